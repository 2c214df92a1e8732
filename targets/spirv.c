/* spirv.c -- the SPIR-V target as dsv4c sees it: the IR is built by the
 * LLVM 15 helper dsv4c-spirv (spirv_gen.c), then the SPIR-V is validated
 * here with the SPIRV-Tools C API before anything is written. */
#define _GNU_SOURCE
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spirv_proto.h"
#include "target.h"

#ifndef DSV4C_SPIRV_HELPER_DEFAULT
#define DSV4C_SPIRV_HELPER_DEFAULT "dsv4c-spirv"
#endif

const char *dsv4_spirv_tools_version(void)
{
  return spvSoftwareVersionString();
}

/* Where the helper is: $DSV4C_SPIRV_HELPER, beside this executable, or the
 * install path compiled in. */
static const char *helper_path(char *buf, size_t n)
{
  const char *env = getenv("DSV4C_SPIRV_HELPER");
  if (env && *env)
    return env;
  char self[1024];
  ssize_t m = readlink("/proc/self/exe", self, sizeof self - 1);
  if (m > 0) {
    self[m] = 0;
    char *slash = strrchr(self, '/');
    if (slash) {
      snprintf(buf, n, "%.*s/dsv4c-spirv", (int)(slash - self), self);
      if (access(buf, X_OK) == 0)
        return buf;
    }
  }
  return DSV4C_SPIRV_HELPER_DEFAULT;
}

/* Read one (u64 length, bytes) record from the reply. */
static int take(const unsigned char **p, const unsigned char *end, unsigned char **out, size_t *n)
{
  uint64_t len;
  if ((size_t)(end - *p) < 8)
    return 1;
  memcpy(&len, *p, 8);
  *p += 8;
  if ((uint64_t)(end - *p) < len)
    return 1;
  *out = malloc(len + 1);
  if (!*out)
    return 1;
  memcpy(*out, *p, len);
  (*out)[len] = 0;
  *n = len;
  *p += len;
  return 0;
}

/* The environment the SPIR-V is validated in: OpenCL 1.2's, or for
 * sub-group code (SPIR-V 1.3, past every OpenCL environment SPIRV-Tools
 * 2023.1 has: OpenCL 2.2's is SPIR-V 1.2) SPIR-V 1.3's own rules. */
static spv_target_env validation_env(const dsv4_kernel *k)
{
  return k->target[DSV4_TARGET_SPIRV].subgroups ? SPV_ENV_UNIVERSAL_1_3 : SPV_ENV_OPENCL_1_2;
}

/* spvValidate in the kernel's environment; disassembly when asked. */
static int validate(const dsv4_kernel *k, const unsigned char *spv, size_t n, dsv4_artifact *a, unsigned want,
                    dsv4_diags *d)
{
  if (n % 4 || n < 20) {
    dsv4_error(d, k->file, k->line, "kernel '%s': SPIR-V of %zu bytes is not a whole module", k->name, n);
    return 1;
  }
  spv_context ctx = spvContextCreate(validation_env(k));
  spv_const_binary_t bin = {(const uint32_t *)spv, n / 4};
  spv_diagnostic diag = NULL;
  int rc = 0;
  if (spvValidate(ctx, &bin, &diag) != SPV_SUCCESS) {
    dsv4_error(d, k->file, k->line, "kernel '%s': SPIR-V fails validation (SPIRV-Tools, %s): %s", k->name,
               validation_env(k) == SPV_ENV_OPENCL_1_2 ? "OpenCL 1.2" : "SPIR-V 1.3",
               diag && diag->error ? diag->error : "unknown error");
    rc = 1;
  }
  spvDiagnosticDestroy(diag);
  if (!rc && (want & DSV4_WANT_ASM)) {
    spv_text text = NULL;
    diag = NULL;
    if (spvBinaryToText(ctx, bin.code, bin.wordCount, SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES, &text, &diag) ==
        SPV_SUCCESS)
      a->asm_text = strndup(text->str, text->length);
    spvTextDestroy(text);
    spvDiagnosticDestroy(diag);
  }
  spvContextDestroy(ctx);
  return rc;
}

static int spirv_compile(const dsv4_target *t, const dsv4_kernel *k, unsigned want, dsv4_artifact *a,
                         dsv4_diags *d)
{
  (void)t;
  /* one request a call (compiles run on several threads: dsv4c -j) */
  dsv4_spirv_request *rq = calloc(1, sizeof *rq);
  if (!rq) {
    dsv4_error(d, k->file, k->line, "kernel '%s': out of memory for the SPIR-V helper's request", k->name);
    return 1;
  }
  memcpy(rq->magic, DSV4_SPQ_MAGIC, 8);
  rq->kernel_size = sizeof(dsv4_kernel);
  rq->want = want & (DSV4_WANT_LLVM | DSV4_WANT_ASM);
  rq->kernel = *k;
  char hb[1100];
  char *argv[] = {(char *)helper_path(hb, sizeof hb), NULL};
  unsigned char *out = NULL;
  size_t on = 0;
  char *err = NULL;
  int st = dsv4_run_tool(argv, rq, sizeof *rq, &out, &on, &err);
  free(rq);
  const unsigned char *p = out, *end = out + on;
  uint32_t status = 0;
  unsigned char *spv = NULL, *bc = NULL, *ll = NULL, *msg = NULL;
  size_t sn = 0, bn = 0, ln = 0, mn = 0;
  int bad = on < 12 || memcmp(out, DSV4_SPR_MAGIC, 8);
  if (!bad) {
    memcpy(&status, out + 8, 4);
    p = out + 12;
    bad = take(&p, end, &spv, &sn) || take(&p, end, &bc, &bn) || take(&p, end, &ll, &ln) || take(&p, end, &msg, &mn);
  }
  int rc = 0;
  if (bad || status || st) {
    if (!bad && msg && mn && mn % sizeof(dsv4_diag) == 0)
      for (size_t i = 0; i < mn / sizeof(dsv4_diag); i++)
        dsv4_diag_add(d, (const dsv4_diag *)msg + i);
    else
      dsv4_error(d, k->file, k->line, "kernel '%s': the SPIR-V helper %s failed (status %d)%s%s", k->name, argv[0],
                 st, err && *err ? ": " : "", err ? err : "");
    rc = 1;
  }
  if (!rc)
    rc = validate(k, spv, sn, a, want, d);
  if (!rc && bn < 4) {
    dsv4_error(d, k->file, k->line, "kernel '%s': the SPIR 1.2 fallback is empty", k->name);
    rc = 1;
  }
  if (!rc) {
    a->code = spv, a->code_len = sn, spv = NULL;
    a->aux = bc, a->aux_len = bn, bc = NULL;
    if (k->target[DSV4_TARGET_SPIRV].emulate_subgroups)
      a->flags |= DSV4_ENTRY_SUBGROUPS_EMULATED;
    if (want & DSV4_WANT_LLVM)
      a->llvm = (char *)ll, ll = NULL;
    snprintf(a->note, sizeof a->note, "validated by SPIRV-Tools (%s); SPIR 1.2 fallback %zu bytes",
             validation_env(k) == SPV_ENV_OPENCL_1_2 ? "OpenCL 1.2" : "SPIR-V 1.3", a->aux_len);
  }
  free(spv), free(bc), free(ll), free(msg), free(out), free(err);
  return rc;
}

const dsv4_target dsv4_target_spirv = {.kind = DSV4_TARGET_SPIRV, .ir = NULL, .compile = spirv_compile};
