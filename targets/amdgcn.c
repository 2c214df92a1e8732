/* amdgcn.c -- the AMDGCN target: amdgpu_kernel functions, LLVM 19's AMDGPU
 * back end, ld.lld-19 linking the object into an HSA code object, and a
 * static check of the ELF and its AMDHSA metadata (no AMD GPU is needed):
 * the whole object (hsaco_check.h), then each kernel the launch record
 * names against that record and the op's argument list (hsaco_meta.h),
 * the check the runtime repeats when it loads the object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/kb.h"
#include "hsaco_check.h"
#include "hsaco_meta.h"
#include "llvm_emit.h"
#include "target.h"

static const char *amd_triple(const char *arch)
{
  (void)arch;
  return "amdgcn-amd-amdhsa";
}

static void amd_mark_kernel(dsv4_kb *kb, LLVMValueRef fn, int threads)
{
  LLVMSetFunctionCallConv(fn, LLVMAMDGPUKERNELCallConv);
  char v[32];
  snprintf(v, sizeof v, "1,%d", threads);
  LLVMAddAttributeAtIndex(
      fn, LLVMAttributeFunctionIndex,
      LLVMCreateStringAttribute(kb->ctx, "amdgpu-flat-work-group-size", 27, v, (unsigned)strlen(v)));
}

static LLVMValueRef amd_thread_id(dsv4_kb *kb)
{
  return kb_call(kb, "llvm.amdgcn.workitem.id.x", kb->i32, NULL, NULL, 0, LLVMCCallConv);
}

static LLVMValueRef amd_block_id(dsv4_kb *kb, int dim)
{
  static const char *const n[] = {"llvm.amdgcn.workgroup.id.x", "llvm.amdgcn.workgroup.id.y",
                                  "llvm.amdgcn.workgroup.id.z"};
  return kb_call(kb, n[dim], kb->i32, NULL, NULL, 0, LLVMCCallConv);
}

static void amd_barrier(dsv4_kb *kb) { kb_call(kb, "llvm.amdgcn.s.barrier", kb->v, NULL, NULL, 0, LLVMCCallConv); }

/* This thread's lane in its wavefront: the lanes below it (mbcnt over a
 * full mask, low then high 32 lanes). */
static LLVMValueRef amd_lane(dsv4_kb *kb)
{
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef lo_args[2] = {kb_i32(kb, -1), kb_i32(kb, 0)};
  LLVMValueRef lo = kb_call(kb, "llvm.amdgcn.mbcnt.lo", kb->i32, ps, lo_args, 2, LLVMCCallConv);
  LLVMValueRef hi_args[2] = {kb_i32(kb, -1), lo};
  return kb_call(kb, "llvm.amdgcn.mbcnt.hi", kb->i32, ps, hi_args, 2, LLVMCCallConv);
}

/* f32 v of lane (lane ^ mask) of the wavefront: ds_bpermute_b32, which
 * reads the source lane's register through the LDS crossbar (no LDS is
 * allocated, no barrier) at a byte address, lane * 4.  Any mask below 64
 * reaches across the whole wave, the 32-lane halves included. */
static LLVMValueRef amd_xor_lane(dsv4_kb *kb, LLVMValueRef v, int mask)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef src = LLVMBuildXor(b, amd_lane(kb), kb_i32(kb, mask), "");
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef args[2] = {LLVMBuildShl(b, src, kb_i32(kb, 2), ""), LLVMBuildBitCast(b, v, kb->i32, "")};
  LLVMValueRef r = kb_call(kb, "llvm.amdgcn.ds.bpermute", kb->i32, ps, args, 2, LLVMCCallConv);
  return LLVMBuildBitCast(b, r, kb->f32, "");
}

/* Groups of up to a whole wave of 64 (kb_lane_reduce asks only for groups
 * inside one wave): the butterfly over ds_bpermute. */
static LLVMValueRef amd_lane_reduce(dsv4_kb *kb, LLVMValueRef v, int width, int op)
{
  return kb_butterfly(kb, v, width, op, amd_xor_lane);
}

static const dsv4_target_ir amd_ir = {
    .kind = DSV4_TARGET_AMDGCN,
    .global_as = 1,
    .shared_as = 3,
    .triple = amd_triple,
    .opt_pipeline = "default<O3>",
    .mark_kernel = amd_mark_kernel,
    .thread_id = amd_thread_id,
    .block_id = amd_block_id,
    .barrier = amd_barrier,
    .lane_reduce = amd_lane_reduce,
};

/* ld.lld -shared obj -> hsaco, in a private temporary directory. */
static int link_hsaco(const dsv4_kernel *k, const unsigned char *obj, size_t n, unsigned char **hsaco,
                      size_t *hn, dsv4_diags *d)
{
  static const char *const cands[] = {"ld.lld-19", "/usr/lib/llvm-19/bin/ld.lld", NULL};
  char tool[512], dir[512], in[600], out[600];
  if (!dsv4_find_tool(cands, tool, sizeof tool)) {
    dsv4_error(d, k->file, k->line,
               "kernel '%s': ld.lld-19 not found (Debian package lld-19); cannot link the HSA code object", k->name);
    return 1;
  }
  if (dsv4_tmpdir(dir, sizeof dir)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': cannot create a temporary directory for ld.lld", k->name);
    return 1;
  }
  snprintf(in, sizeof in, "%s/k.o", dir);
  snprintf(out, sizeof out, "%s/k.hsaco", dir);
  int rc = dsv4_write_file(in, obj, n);
  char *argv[] = {tool, "-shared", "--no-undefined", "-o", out, in, NULL};
  unsigned char *o = NULL;
  size_t on = 0;
  char *err = NULL;
  if (!rc)
    rc = dsv4_run_tool(argv, NULL, 0, &o, &on, &err);
  if (!rc)
    rc = dsv4_read_file(out, hsaco, hn);
  if (rc)
    dsv4_error(d, k->file, k->line, "kernel '%s': ld.lld failed (status %d): %s", k->name, rc, err ? err : "");
  free(o);
  free(err);
  dsv4_rmtree_flat(dir);
  return rc != 0;
}

/* Kernel `name` of the code object against its launch: explicit arguments
 * kinds[0..n), `threads` a work-group, `shared` bytes of dynamic LDS.  The
 * message names the kernel; 0 when they agree. */
static int launch_agrees(const dsv4_kernel *k, const char *arch, const unsigned char *hsaco, size_t hn,
                         const char *name, const unsigned char *kinds, int n, uint32_t threads, uint32_t shared,
                         dsv4_diags *d)
{
  dsv4_hsaco_kernel m;
  char err[512];
  if (dsv4_hsaco_kernel_meta(hsaco, hn, name, &m, err, sizeof err)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': the linked HSA code object fails its check: %s", k->name, err);
    return 1;
  }
  if (dsv4_hsaco_launch_agrees(&m, arch, kinds, n, threads, shared, err, sizeof err)) {
    dsv4_error(d, k->file, k->line, "%s", err);
    return 1;
  }
  return 0;
}

/* Every kernel k's launch record names, against the record and the op's
 * argument list (the bundle's, dsv4_op_signature) or the combine
 * second kernel's (dsv4_second_args: a combine, a merge; launched with no
 * dynamic LDS). */
static int launches_agree(const dsv4_kernel *k, const char *arch, const unsigned char *hsaco, size_t hn,
                          dsv4_diags *d)
{
  const dsv4_launch *l = dsv4_kernel_launch(k, DSV4_TARGET_AMDGCN);
  unsigned char kinds[DSV4_MAX_ARGS];
  int n = dsv4_op_signature(k->op, kinds, NULL);
  if (launch_agrees(k, arch, hsaco, hn, k->name, kinds, n, l->threads, l->shared_bytes, d))
    return 1;
  if (!dsv4_second_suffix(l->second))
    return 0;
  char name[DSV4_NAME_MAX + 16];
  snprintf(name, sizeof name, "%s%s", k->name, dsv4_second_suffix(l->second));
  n = dsv4_second_args(l->second, kinds, NULL);
  return launch_agrees(k, arch, hsaco, hn, name, kinds, n, l->second_threads, 0, d);
}

static int amd_compile(const dsv4_target *t, const dsv4_kernel *k, unsigned want, dsv4_artifact *a, dsv4_diags *d)
{
  const char *arch = k->target[DSV4_TARGET_AMDGCN].arch;
  char *asm_text = NULL;
  unsigned char *obj = NULL, *hsaco = NULL;
  size_t on = 0, hn = 0;
  if (dsv4_llvm_compile(t->ir, k, arch, "", want, 1, a, &asm_text, &obj, &on, d))
    return 1;
  int rc = link_hsaco(k, obj, on, &hsaco, &hn, d);
  free(obj);
  if (!rc) {
    char err[256], second[DSV4_NAME_MAX + 16];
    const char *suffix = dsv4_second_suffix(dsv4_kernel_launch(k, DSV4_TARGET_AMDGCN)->second);
    snprintf(second, sizeof second, "%s%s", k->name, suffix ? suffix : "");
    const char *names[2] = {k->name, second};
    int named = suffix ? 2 : 1;
    if (dsv4_hsaco_check(hsaco, hn, arch, names, named, err, sizeof err)) {
      dsv4_error(d, k->file, k->line, "kernel '%s': the linked HSA code object fails its check: %s", k->name, err);
      rc = 1;
    } else if (launches_agree(k, arch, hsaco, hn, d))
      rc = 1;
  }
  if (rc) {
    free(hsaco);
    free(asm_text);
    return 1;
  }
  snprintf(a->note, sizeof a->note,
           "linked by ld.lld-19; ELF and AMDHSA metadata checked for %s, and against the launch record", arch);
  a->code = hsaco;
  a->code_len = hn;
  if (want & DSV4_WANT_ASM)
    a->asm_text = asm_text;
  else
    free(asm_text);
  return 0;
}

const dsv4_target dsv4_target_amdgcn = {.kind = DSV4_TARGET_AMDGCN, .ir = &amd_ir, .compile = amd_compile};
