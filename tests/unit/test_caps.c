/* test_caps.c -- the target tables (targets/caps.c): each target's arch
 * list names its rows in order, and the facts the checker and generators
 * ask come out of the rows as the PTX ISA and CUDA give them. */
#include <stdio.h>
#include <string.h>

#include "caps.h"
#include "../check.h"

static int passed, failed;

int main(void)
{
  for (int t = 0; t < DSV4_TARGET_COUNT; t++) {
    char list[256] = "";
    const dsv4_arch_caps *r;
    for (int i = 0; (r = dsv4_caps_row((dsv4_target_kind)t, i)); i++) {
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", r->arch);
      CHECK(dsv4_caps((dsv4_target_kind)t, r->arch) == r, "%s: lookup of %s", dsv4_target_name(t), r->arch);
      CHECK(r->max_threads == 1024 && r->warp >= 1, "%s %s: limits", dsv4_target_name(t), r->arch);
    }
    CHECK(!strcmp(list, dsv4_caps_arch_list((dsv4_target_kind)t)), "%s: list '%s' against rows '%s'",
          dsv4_target_name(t), dsv4_caps_arch_list((dsv4_target_kind)t), list);
    CHECK(dsv4_target_arch_ok((dsv4_target_kind)t, dsv4_target_default_arch((dsv4_target_kind)t)),
          "%s: its default arch is not in its table", dsv4_target_name(t));
    CHECK(!dsv4_caps((dsv4_target_kind)t, "sm_70") && !dsv4_caps((dsv4_target_kind)t, NULL), "%s: unknown arch",
          dsv4_target_name(t));
  }
  CHECK(dsv4_target_warp(DSV4_TARGET_PTX, "sm_90a") == 32 && dsv4_target_warp(DSV4_TARGET_AMDGCN, "gfx942") == 64 &&
            dsv4_target_warp(DSV4_TARGET_SPIRV, "opencl1.2") == 1, "warp widths");
  CHECK(dsv4_target_has_bf16_mma(DSV4_TARGET_PTX, "sm_80") && !dsv4_target_has_bf16_mma(DSV4_TARGET_AMDGCN, "gfx942") &&
            !dsv4_target_has_bf16_mma(DSV4_TARGET_SPIRV, "opencl1.2"),
        "bf16 mma.sync: every PTX arch, no other target");
  CHECK(!dsv4_target_has_e4m3_mma(DSV4_TARGET_PTX, "sm_86") && dsv4_target_has_e4m3_mma(DSV4_TARGET_PTX, "sm_89") &&
            dsv4_target_has_e4m3_mma(DSV4_TARGET_PTX, "sm_90a"), "e4m3 mma.sync from sm_89");
  CHECK(dsv4_target_has_wgmma(DSV4_TARGET_PTX, "sm_90a") && !dsv4_target_has_wgmma(DSV4_TARGET_PTX, "sm_90"),
        "wgmma on sm_90a only");
  CHECK(dsv4_target_max_shared(DSV4_TARGET_PTX, "sm_80") == 166912 &&
            dsv4_target_max_shared(DSV4_TARGET_PTX, "sm_89") == 101376 &&
            dsv4_target_max_shared(DSV4_TARGET_PTX, "sm_90a") == 232448 &&
            dsv4_target_max_shared(DSV4_TARGET_SPIRV, "opencl1.2") == 0, "opt-in shared memory per arch");
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
