/* test_amdgcn_launch.c -- dsv4c holds every AMDGCN artifact to its launch
 * record and its argument list before writing it (targets/amdgcn.c, with
 * common/hsaco_meta.h's dsv4_hsaco_launch_agrees).  The shipped spec's
 * gather and decode compile as they are; with the record tampered after
 * the checker made it (dynamic LDS past a work-group's 64 KiB, a second
 * kernel the module does not have) the compile is refused at the
 * kernel's spec line, naming the kernel, and leaves no code.
 *   usage: test_amdgcn_launch SPECS_DIR SPEC */
#include <stdio.h>
#include <string.h>

#include "spec.h"
#include "target.h"

static int passed, failed;

/* Record one expectation; say what went wrong where it failed. */
static void expect(int ok, const char *what, const char *detail)
{
  if (ok) {
    passed++;
    return;
  }
  failed++;
  printf("FAIL %s: %s\n", what, detail);
}

/* Compile k for AMDGCN; its first diagnostic, formatted as the CLI
 * prints it, into msg ("" when none). */
static int compile(const dsv4_kernel *k, dsv4_artifact *a, char *msg, size_t n)
{
  static dsv4_diags d;
  const dsv4_target *t = dsv4_target_get(DSV4_TARGET_AMDGCN);
  memset(&d, 0, sizeof d);
  memset(a, 0, sizeof *a);
  int rc = t->compile(t, k, 0, a, &d);
  msg[0] = '\0';
  if (d.n)
    dsv4_diag_format(&d.items[0], msg, n);
  return rc;
}

/* The first kernel of op `op` the plan builds for AMDGCN (NULL: none). */
static const dsv4_kernel *first_of(const dsv4_plan *p, dsv4_op op)
{
  for (int i = 0; i < p->nkernels; i++)
    if (p->kernels[i].op == op && p->kernels[i].target[DSV4_TARGET_AMDGCN].enabled)
      return &p->kernels[i];
  return NULL;
}

/* k as it is compiles, and its code object is kept. */
static void clean(const dsv4_kernel *k)
{
  dsv4_artifact a;
  char msg[1024], what[128];
  int rc = compile(k, &a, msg, sizeof msg);
  snprintf(what, sizeof what, "%s compiles as the spec has it", k->name);
  expect(rc == 0 && a.code && a.code_len > 0 && !msg[0], what, msg);
  dsv4_artifact_free(&a);
}

/* k's copy with a tampered record is refused at k's line, naming k, with
 * `needle` in the message, and makes no code. */
static void refused(const dsv4_kernel *k, const char *what, const char *needle)
{
  dsv4_artifact a;
  char msg[1024], head[512];
  int rc = compile(k, &a, msg, sizeof msg);
  snprintf(head, sizeof head, "%s:%d: error: kernel '%s': ", k->file, k->line, k->name);
  expect(rc != 0 && !a.code && strncmp(msg, head, strlen(head)) == 0 && strstr(msg, needle), what, msg);
  printf("%s: %s\n", what, msg);
  dsv4_artifact_free(&a);
}

int main(int argc, char **argv)
{
  static dsv4_plan plan;
  static dsv4_diags d;
  if (argc < 3) {
    fprintf(stderr, "usage: test_amdgcn_launch SPECS_DIR SPEC\n");
    return 2;
  }
  const char *inc[1] = {argv[1]};
  dsv4_spec_opts o = {.include_dirs = inc, .ninclude_dirs = 1};
  dsv4_targets_init();
  if (dsv4_spec_load(argv[2], &o, &plan, &d)) {
    printf("FAIL %s does not load: %s\n", argv[2], d.n ? d.items[0].msg : "");
    return 1;
  }
  const dsv4_kernel *gather = first_of(&plan, DSV4_OP_DEQUANT_GATHER);
  const dsv4_kernel *decode = first_of(&plan, DSV4_OP_SPARSE_DECODE);
  if (!gather || !decode) {
    printf("FAIL %s has no AMDGCN dequant_gather or sparse_decode\n", argv[2]);
    return 1;
  }
  clean(gather);
  clean(decode);

  /* 64 KiB and a byte of dynamic LDS (beside whatever static LDS it has) */
  static dsv4_kernel k;
  k = *decode;
  k.launch[DSV4_TARGET_AMDGCN].shared_bytes = 65537;
  refused(&k, "dynamic LDS past 64 KiB", "65536 a work-group of gfx942");

  /* a record naming the split-KV combine, which the portable form's module
   * does not hold: the runtime would look it up and find nothing */
  k = *gather;
  k.launch[DSV4_TARGET_AMDGCN].second = DSV4_SECOND_COMBINE;
  k.launch[DSV4_TARGET_AMDGCN].second_threads = 128;
  char needle[128];
  snprintf(needle, sizeof needle, "kernel '%s_combine' is not in amdhsa.kernels", gather->name);
  refused(&k, "second kernel missing", needle);

  printf("%d passed, %d failed\n", passed, failed);
  return failed || !passed ? 1 : 0;
}
