/* logits.c -- the indexer's paged MQA logits (docs/ops.md section 4): the entry
 * point the generator table calls (gen.c).
 *
 * It builds the form the spec checker chose for this target (choose_form
 * in compiler/ops/, the kernel's launch record): portable, row warp-matrix (the
 * portable geometry on mma.sync rows), warp-matrix or warpgroup.  Each
 * form's own test of the target hooks (lg_*_fits / _ok) must agree with
 * that choice: a disagreement between the capability table and the hooks
 * is an internal error, never a silent change of form.  Each matrix form
 * checks its arrays against form_rules.h's byte counts.
 */
#include "shape.h"

static int disagree(const dsv4_kernel *k, dsv4_kb *kb, const char *form, dsv4_diags *d)
{
  dsv4_error(d, k->file, k->line,
             "kernel '%s': internal error: the %s form was chosen for %s, whose hooks cannot build it", k->name, form,
             kb->arch);
  return 1;
}

int dsv4_gen_paged_mqa_logits(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  switch ((int)dsv4_kernel_launch(k, kb->t->kind)->form) {
  case DSV4_FORM_WARPGROUP:
    if (!lg_warpgroup_fits(kb, k))
      return disagree(k, kb, "warpgroup", d);
    if (lg_warpgroup(kb, k, NULL, 0)) {
      dsv4_error(d, k->file, k->line,
                 "kernel '%s': internal error: the warpgroup form's shared memory is not dsv4_logits_wg_shared_bytes()",
                 k->name);
      return 1;
    }
    return 0;
  case DSV4_FORM_WARP:
    if (!lg_warp_target_ok(kb) || lg_warpgroup_fits(kb, k))
      return disagree(k, kb, "warp-matrix", d);
    if (lg_warp(kb, k)) {
      dsv4_error(d, k->file, k->line,
                 "kernel '%s': internal error: the warp form's shared memory is not dsv4_logits_warp_shared_bytes()",
                 k->name);
      return 1;
    }
    return 0;
  case DSV4_FORM_ROW_WARP:
    if (!lg_row_mma_fits(kb, k))
      return disagree(k, kb, "row warp-matrix", d);
    lg_row_mma(kb, k);
    return 0;
  default:
    if (lg_row_mma_fits(kb, k))
      return disagree(k, kb, "portable", d);
    lg_portable(kb, k);
    return 0;
  }
}
