/* spirv_gen.c -- dsv4c-spirv, the LLVM 15 helper of the SPIR-V target.
 *
 * Reads one kernel plan from stdin (spirv_proto.h), lowers it as dsv4c
 * lowers every target (compiler/lower.c) but with the SPIR-V hooks, translates it to
 * SPIR-V, translates that back to SPIR 1.2 bitcode (the fallback for OpenCL
 * implementations without IL input; its sub-groups emulated where the spec
 * asks: spirv_subgroups.c), and writes both to stdout.  The parent
 * validates the SPIR-V; this process may abort inside the translator
 * without harming the parent.
 */
#include <llvm-c/BitWriter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/kernels/gen.h"
#include "../compiler/lower.h"
#include "spirv_ir.h"
#include "spirv_proto.h"
#include "target.h"

int dsv4_spirv_write(LLVMModuleRef m, int sub_groups, unsigned char **out, size_t *n, char **err);
int dsv4_spirv_to_spir12(const unsigned char *spv, size_t n, unsigned char **bc, size_t *bcn, char **err);
int dsv4_spirv_read(const unsigned char *spv, size_t n, LLVMContextRef *ctx, LLVMModuleRef *m, char **err);

/* The SPIR 1.2 fallback of kernel k from its SPIR-V: the reverse
 * translation, with the sub-groups emulated where the spec asks
 * (spirv_subgroups.c).  0, or 1 with *err (malloc'd). */
static int spir12(const dsv4_kernel *k, const unsigned char *spv, size_t n, unsigned char **bc, size_t *bcn,
                  char **err)
{
  const dsv4_target_opts *o = &k->target[DSV4_TARGET_SPIRV];
  if (!o->emulate_subgroups)
    return dsv4_spirv_to_spir12(spv, n, bc, bcn, err);
  LLVMContextRef cx;
  LLVMModuleRef m;
  if (dsv4_spirv_read(spv, n, &cx, &m, err))
    return 1;
  const dsv4_launch *ln = dsv4_kernel_launch(k, DSV4_TARGET_SPIRV);
  int threads = (int)(ln->second_threads > ln->threads ? ln->second_threads : ln->threads);
  int rc = dsv4_spirv_emulate_subgroups(m, o->subgroup_size, threads, err);
  if (!rc) {
    LLVMMemoryBufferRef buf = LLVMWriteBitcodeToMemoryBuffer(m);
    *bcn = LLVMGetBufferSize(buf);
    *bc = malloc(*bcn ? *bcn : 1);
    if (*bc)
      memcpy(*bc, LLVMGetBufferStart(buf), *bcn);
    else
      rc = 1, *err = strdup("out of memory for the SPIR 1.2 fallback");
    LLVMDisposeMemoryBuffer(buf);
  }
  LLVMDisposeModule(m);
  LLVMContextDispose(cx);
  return rc;
}

static void put_record(const void *p, uint64_t n)
{
  fwrite(&n, 8, 1, stdout);
  if (n)
    fwrite(p, 1, (size_t)n, stdout);
}

/* Reply with status and the four records; the last is the diagnostics,
 * as the dsv4_diag records they are (both sides are one build). */
static int reply(uint32_t status, const unsigned char *spv, size_t sn, const unsigned char *bc, size_t bn,
                 const char *ll, const dsv4_diags *d)
{
  fwrite(DSV4_SPR_MAGIC, 1, 8, stdout);
  fwrite(&status, 4, 1, stdout);
  put_record(spv, spv ? sn : 0);
  put_record(bc, bc ? bn : 0);
  put_record(ll, ll ? strlen(ll) : 0);
  put_record(d ? d->items : NULL, d ? (uint64_t)d->n * sizeof(dsv4_diag) : 0);
  fflush(stdout);
  return status ? 1 : 0;
}

int main(void)
{
  static dsv4_spirv_request rq;
  if (fread(&rq, 1, sizeof rq, stdin) != sizeof rq || memcmp(rq.magic, DSV4_SPQ_MAGIC, 8) ||
      rq.kernel_size != sizeof(dsv4_kernel)) {
    static dsv4_diags bad;
    dsv4_error(&bad, NULL, 0, "dsv4c-spirv: malformed request (mismatched dsv4c and helper builds?)");
    return reply(2, NULL, 0, NULL, 0, NULL, &bad);
  }
  const dsv4_kernel *k = &rq.kernel;
  dsv4_diags d = {0};
  dsv4_kb kb;
  kb_init(&kb, &dsv4_spirv_ir, k);
  if (dsv4_lower(&kb, k, NULL, &d)) { /* the diagnostics travel as they are */
    kb_dispose(&kb);
    return reply(1, NULL, 0, NULL, 0, NULL, &d);
  }
  char *ll = (rq.want & DSV4_WANT_LLVM) ? LLVMPrintModuleToString(kb.mod) : NULL;
  unsigned char *spv = NULL, *bc = NULL;
  size_t sn = 0, bn = 0;
  char *err = NULL;
  if (dsv4_spirv_write(kb.mod, k->target[DSV4_TARGET_SPIRV].subgroups, &spv, &sn, &err) ||
      spir12(k, spv, sn, &bc, &bn, &err)) {
    dsv4_error(&d, k->file, k->line, "kernel '%s': SPIR-V translation failed: %s", k->name, err ? err : "");
    return reply(1, NULL, 0, NULL, 0, ll, &d);
  }
  int r = reply(0, spv, sn, bc, bn, ll, NULL);
  free(spv);
  free(bc);
  if (ll)
    LLVMDisposeMessage(ll);
  kb_dispose(&kb);
  return r;
}
