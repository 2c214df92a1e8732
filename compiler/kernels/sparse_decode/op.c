/* op.c -- the sparse MLA decode's generator (docs/ops.md section 3), the entry
 * gen.c's table calls: it builds the form the checker chose
 * (choose_form, compiler/ops/sparse_decode.c; the kernel's launch record
 * for this target) (shape.h lists the forms and their files).
 * The matrix forms' module also holds <name>_combine, their split-KV
 * second kernel.
 */
#include "shape.h"

/* A matrix form, then the combine kernel after it in the same module. */
static int matrix_forms(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  /* The combine (which waits for this grid's end before reading) may be
   * placed as soon as every CTA has started: its launch overlaps this
   * one.  And this grid touches no memory before the grid before it in
   * the stream has finished, so the runtime may launch it as that grid's
   * programmatic dependent (DSV4_ENTRY_FIRST_WAITS): its launch then
   * overlaps the end of that grid where that grid allows it (the
   * combine, or this kernel, of the decode before). */
  if (kb->t->grid_dep && kb->t->grid_dep(kb, 0) && kb->t->grid_dep(kb, 1))
    kb->entry_flags |= DSV4_ENTRY_FIRST_WAITS;
  int form = dsv4_kernel_launch(k, kb->t->kind)->form;
  int (*gen)(dsv4_kb *, const dsv4_kernel *, dsv4_diags *) = form == DSV4_FORM_WARP          ? sd_warp
                                                             : form == DSV4_FORM_WARP_DIRECT ? sd_direct
                                                                                             : sd_warpgroup;
  if (gen(kb, k, d))
    return 1;
  LLVMBuildRetVoid(kb->b); /* the module's second kernel follows; dsv4_generate ends that one */
  sd_combine(kb, k);
  return 0;
}

int dsv4_gen_sparse_decode(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  if (dsv4_kernel_launch(k, kb->t->kind)->form != DSV4_FORM_PORTABLE)
    return matrix_forms(kb, k, d);
  return sd_portable(kb, k);
}
