/* test_signature.c -- the generators and the runtime agree on every op's
 * arguments.  Both take positions and kinds from dsv4_abi.h's lists: the
 * generators' parameters (kb_kernel, their DSV4_A_* / SD_ / LG_ indices)
 * and the runtime's marshalling (ops.c's DSV4_A_* slots, checked against
 * the bundle's signature at every launch, rt.c check_signature).  This
 * test holds the generator side to the list: each kernel of the shipped
 * specs, built by its generator for PTX and AMDGCN, must have exactly the
 * list's parameters, by position, name and LLVM type, and a matrix
 * decode's combine kernel the combine list's; a module has that second
 * kernel exactly where the kernel's launch record names one. */
#include <llvm-c/Core.h>
#include <stdio.h>
#include <string.h>

#include "kernels/gen.h"
#include "spec.h"
#include "target.h"

static int passed, failed;

/* The LLVM type a kind is passed as (kb_kernel's rule, restated). */
static int type_ok(LLVMTypeRef t, int kind)
{
  switch (kind) {
  case DSV4_ARG_PTR:
  case DSV4_ARG_IN:
    return LLVMGetTypeKind(t) == LLVMPointerTypeKind;
  case DSV4_ARG_I32:
    return LLVMGetTypeKind(t) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) == 32;
  case DSV4_ARG_I64:
    return LLVMGetTypeKind(t) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(t) == 64;
  case DSV4_ARG_F32:
    return LLVMGetTypeKind(t) == LLVMFloatTypeKind;
  default:
    return 0;
  }
}

/* Function fname of m against the kinds and names of a list. */
static void check_fn(LLVMModuleRef m, const char *fname, const char *what, const unsigned char *kinds,
                     const char *const *names, int n)
{
  LLVMValueRef f = LLVMGetNamedFunction(m, fname);
  if (!f || (int)LLVMCountParams(f) != n) {
    failed++;
    printf("FAIL %s: %s has %d parameters, its list %d\n", what, fname, f ? (int)LLVMCountParams(f) : -1, n);
    return;
  }
  for (int i = 0; i < n; i++) {
    LLVMValueRef p = LLVMGetParam(f, (unsigned)i);
    size_t len;
    const char *pn = LLVMGetValueName2(p, &len);
    if (!type_ok(LLVMTypeOf(p), kinds[i]) || (names && strcmp(pn, names[i]))) {
      failed++;
      printf("FAIL %s: %s parameter %d is '%s' where the list has '%s' of kind %d\n", what, fname, i, pn,
             names ? names[i] : "?", kinds[i]);
      return;
    }
  }
  passed++;
}

/* Every kernel of one spec, for each LLVM 19 target it names. */
static void check_spec(const char *path, const char *specs)
{
  static dsv4_plan plan;
  const char *inc[1] = {specs};
  dsv4_spec_opts o = {.include_dirs = inc, .ninclude_dirs = 1};
  dsv4_diags d = {0};
  if (dsv4_spec_load(path, &o, &plan, &d)) {
    failed++;
    printf("FAIL %s: does not load: %s\n", path, d.n ? d.items[0].msg : "");
    return;
  }
  for (int i = 0; i < plan.nkernels; i++) {
    const dsv4_kernel *k = &plan.kernels[i];
    for (int t = 0; t < DSV4_TARGET_COUNT; t++) {
      const dsv4_target *tg = dsv4_target_get((dsv4_target_kind)t);
      if (!k->target[t].enabled || !tg->ir)
        continue; /* SPIR-V is built by the LLVM 15 helper, from the same generators */
      char what[160];
      snprintf(what, sizeof what, "%s %s [%s]", path, k->name, dsv4_target_name((dsv4_target_kind)t));
      dsv4_kb kb;
      kb_init(&kb, tg->ir, k);
      dsv4_diags gd = {0};
      if (dsv4_generate(&kb, k, &gd)) {
        failed++;
        printf("FAIL %s: generation failed: %s\n", what, gd.n ? gd.items[0].msg : "");
      } else {
        unsigned char kinds[DSV4_MAX_ARGS];
        const char *names[DSV4_MAX_ARGS];
        int n = dsv4_op_args(k->op, kinds, names);
        check_fn(kb.mod, k->name, what, kinds, names, n);
        /* the module's second kernel exists exactly where the launch
         * record (choose_form) names one */
        for (uint32_t sk = DSV4_SECOND_COMBINE; sk < DSV4_SECOND_COUNT; sk++) {
          char cname[96];
          snprintf(cname, sizeof cname, "%s%s", k->name, dsv4_second_suffix(sk));
          if (k->launch[t].second == sk) {
            n = dsv4_second_args(sk, kinds, NULL);
            check_fn(kb.mod, cname, what, kinds, NULL, n);
          } else if (LLVMGetNamedFunction(kb.mod, cname) && !(dsv4_second_suffix(k->launch[t].second) &&
                                                               !strcmp(dsv4_second_suffix(k->launch[t].second),
                                                                       dsv4_second_suffix(sk)))) {
            /* (a kernel of another second kind's name: topk's merge and the fused op's share "_merge") */
            failed++;
            printf("FAIL %s: has %s, but its launch record names no such second kernel\n", what, cname);
          }
        }
      }
      kb_dispose(&kb);
    }
  }
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: test_signature SPECS_DIR SPEC...\n");
    return 2;
  }
  for (int i = 2; i < argc; i++)
    check_spec(argv[i], argv[1]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed || !passed ? 1 : 0;
}
