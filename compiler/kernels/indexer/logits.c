/* logits.c -- the indexer's paged MQA logits (OPS.md section 4): the entry
 * point the generator table calls (gen.c), and the choice of form.
 *
 * tile.matrix asks for a matrix form: the warpgroup one where the target
 * and shape fit it, else the warp one (an error where the target cannot
 * build it).  Without tile.matrix the portable form's launch geometry is
 * kept, on warp matrix units where they fit (lg_row_mma), else portable.
 * The spec checker guesses the matrix form too, on looser conditions, to
 * bound shared memory; each matrix form checks its arrays against
 * dsv4_abi.h's byte counts, and a mismatch is an internal error here.
 */
#include "shape.h"

/* The tile.matrix forms: warpgroup where it fits, else warp. */
static int matrix_form(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  if (lg_warpgroup_fits(kb, k)) {
    if (lg_warpgroup(kb, k)) {
      dsv4_error(d, k->file, k->line, "kernel '%s': internal error: the warpgroup form's shared memory is not dsv4_logits_wg_shared_bytes()", k->name);
      return 1;
    }
    return 0;
  }
  if (!lg_warp_target_ok(kb)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': this target (%s) cannot build the warp-matrix form of paged_mqa_logits",
               k->name, kb->arch);
    return 1;
  }
  if (lg_warp(kb, k)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': internal error: the warp form's shared memory is not dsv4_logits_warp_shared_bytes()", k->name);
    return 1;
  }
  return 0;
}

int dsv4_gen_paged_mqa_logits(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  if (k->tile.matrix)
    return matrix_form(kb, k, d);
  if (lg_row_mma_fits(kb, k))
    lg_row_mma(kb, k);
  else
    lg_portable(kb, k);
  return 0;
}
