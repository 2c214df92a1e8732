/* targets.c -- the table of targets this dsv4c was built with. */
#include "target.h"

#include "llvm_emit.h"

extern const dsv4_target dsv4_target_ptx, dsv4_target_amdgcn, dsv4_target_spirv;

const dsv4_target *dsv4_target_get(dsv4_target_kind kind)
{
  static const dsv4_target *const all[DSV4_TARGET_COUNT] = {
      [DSV4_TARGET_PTX] = &dsv4_target_ptx,
      [DSV4_TARGET_AMDGCN] = &dsv4_target_amdgcn,
      [DSV4_TARGET_SPIRV] = &dsv4_target_spirv,
  };
  return (unsigned)kind < DSV4_TARGET_COUNT ? all[kind] : NULL;
}

void dsv4_targets_init(void) { dsv4_llvm_init(); }
