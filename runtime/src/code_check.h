/* code_check.h -- the structure of the code a bundle hands to a driver,
 * checked when the bundle is opened (code_check.c). */
#ifndef DSV4RT_CODE_CHECK_H
#define DSV4RT_CODE_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* An LLVM bitcode module (the SPIR 1.2 fallback): 0, or 1 with why
 * (why_len bytes) saying what is wrong and at which bit. */
int rt_bitcode_check(const uint8_t *p, uint64_t n, char *why, size_t why_len);
/* A SPIR-V module: 0, or 1 with why. */
int rt_spirv_check(const uint8_t *p, uint64_t n, char *why, size_t why_len);
/* The sub-group size a SPIR-V module (one rt_spirv_check passed) requires:
 * the largest SubgroupSize execution mode of its entry points, 0 if none. */
uint32_t rt_spirv_subgroup_size(const uint8_t *p, uint64_t n);

#endif
