/* hsaco_meta.h -- what an AMDGPU HSA code object's metadata says about one
 * kernel, read without ROCm or LLVM (common/hsaco_meta.c), and whether it
 * agrees with how the runtime launches that kernel.
 *
 * One reader for two users: dsv4c holds every AMDGCN artifact to it before
 * the artifact is written (targets/amdgcn.c), and libdsv4rt's HIP backend
 * holds the code object a bundle carries to it again when it loads it, and
 * places each argument of a launch at the offset read here
 * (runtime/src/hip.c).  The metadata is the MessagePack map of the code
 * object's NT_AMDGPU_METADATA note (LLVM's AMDGPUUsage, "Code Object V4/V5
 * Metadata"): its amdhsa.kernels entry whose .name is the kernel.
 * Nothing here allocates, prints or exits; every read is bounds-checked.
 */
#ifndef DSV4_HSACO_META_H
#define DSV4_HSACO_META_H

#include <stddef.h>
#include <stdint.h>

#define DSV4_HSACO_MAX_ARGS 96 /* .args entries read (explicit and hidden) */

/* An argument's .value_kind, as the launch needs it. */
enum {
  DSV4_HSACO_ARG_GLOBAL = 1, /* global_buffer: a device pointer */
  DSV4_HSACO_ARG_VALUE = 2,  /* by_value */
  DSV4_HSACO_ARG_HIDDEN = 3, /* hidden_*: the HIP runtime fills these, after the explicit ones */
  DSV4_HSACO_ARG_OTHER = 4   /* anything else (dynamic_shared_pointer, image, ...): never ours */
};

typedef struct {
  uint32_t offset, size; /* .offset, .size (bytes into the kernarg segment) */
  int kind;              /* DSV4_HSACO_ARG_* */
  char value_kind[40];   /* .value_kind as written (truncated), for messages */
} dsv4_hsaco_arg;

typedef struct {
  char name[64];                  /* .name */
  uint32_t kernarg_size;          /* .kernarg_segment_size */
  uint32_t kernarg_align;         /* .kernarg_segment_align */
  uint32_t group_segment;         /* .group_segment_fixed_size: static LDS bytes */
  uint32_t private_segment;       /* .private_segment_fixed_size: scratch bytes a work-item */
  uint32_t max_flat_workgroup;    /* .max_flat_workgroup_size */
  uint32_t wavefront;             /* .wavefront_size */
  uint32_t sgprs, vgprs, agprs;   /* .sgpr_count, .vgpr_count, .agpr_count (0 where absent) */
  int nargs;                      /* entries of args[] (explicit ones first, in order) */
  dsv4_hsaco_arg args[DSV4_HSACO_MAX_ARGS];
} dsv4_hsaco_kernel;

/* Kernel `name`'s metadata from the code object elf[0..len) into *out.
 * 0, or nonzero with a one-line message in err (NUL-terminated when errlen
 * > 0): not an AMDGPU code object, no metadata note, no such kernel, a
 * field missing or out of range, more than DSV4_HSACO_MAX_ARGS args. */
int dsv4_hsaco_kernel_meta(const unsigned char *elf, size_t len, const char *name, dsv4_hsaco_kernel *out, char *err,
                           size_t errlen);

/* 0 if kernel m agrees with a launch of it on processor gpu ("gfx942",
 * target features after ':' ignored) by a launch record: its explicit
 * arguments are kinds[0..nargs) (dsv4_arg_kind numbers of dsv4_abi.h: PTR
 * and IN a global_buffer of 8 bytes, I32 and F32 by_value of 4, I64
 * by_value of 8), in that order, each at its natural alignment right after
 * the one before, nothing but hidden arguments after them, all inside
 * kernarg_size; the wavefront is the arch's; `threads` work-items a
 * work-group fit max_flat_workgroup; static plus `dyn_shared` dynamic LDS
 * fit the arch's LDS a work-group; and the registers the kernel uses let
 * a work-group of `threads` run (at least one wave a SIMD).  Else nonzero
 * with a one-line message naming the kernel and the field. */
int dsv4_hsaco_launch_agrees(const dsv4_hsaco_kernel *m, const char *gpu, const uint8_t *kinds, int nargs,
                             uint32_t threads, uint32_t dyn_shared, char *err, size_t errlen);

/* Bytes of the explicit arguments' block (the end of the last explicit
 * argument): what a launch passes as its kernarg buffer. */
uint32_t dsv4_hsaco_explicit_bytes(const dsv4_hsaco_kernel *m);

#endif
