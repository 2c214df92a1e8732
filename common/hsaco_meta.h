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
  uint32_t sgprs, vgprs, agprs;   /* .sgpr_count, .vgpr_count, .agpr_count (0 where absent); on gfx90a and
                                     gfx942 .vgpr_count is the unified file's count, AGPRs included
                                     (LLVM: alignup(arch VGPRs, 4) + AGPRs), .sgpr_count holds VCC,
                                     FLAT_SCRATCH and XNACK_MASK */
  int nargs;                      /* entries of args[] (explicit ones first, in order) */
  dsv4_hsaco_arg args[DSV4_HSACO_MAX_ARGS];
} dsv4_hsaco_kernel;

/* Kernel `name`'s metadata from the code object elf[0..len) into *out.
 * 0, or nonzero with a one-line message in err (NUL-terminated when errlen
 * > 0): not an AMDGPU code object, no metadata note, no such kernel, a
 * field missing or out of range, more than DSV4_HSACO_MAX_ARGS args.
 * Held to: .symbol is .name + ".kd"; .kernarg_segment_size,
 * .kernarg_segment_align (a power of two), .group_segment_fixed_size,
 * .private_segment_fixed_size, .max_flat_workgroup_size, .wavefront_size,
 * .sgpr_count and .vgpr_count present (AMDGPUUsage: required), each an
 * unsigned integer below 2^32; every argument has .offset, .size and
 * .value_kind, and lies inside the kernarg segment.  A key twice in one
 * map is malformed. */
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

/* ---- the reading dsv4c's whole-object check (targets/hsaco_check.c) also
 * builds on, so that the ELF and MessagePack are read in one place ---- */

/* What the code object says as a whole. */
typedef struct {
  unsigned mach;        /* e_flags & EF_AMDGPU_MACH: the processor (LLVM's EF_AMDGPU_MACH_* number) */
  unsigned abi_version; /* e_ident[EI_ABIVERSION]: 2 code object v4, 3 v5 */
  char target[96];      /* amdhsa.target, e.g. "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-" */
  int nkernels;         /* amdhsa.kernels entries */
} dsv4_hsaco_object;

/* The ELF header and the metadata map's top level of elf[0..len) into
 * *out: an ELF64 little-endian ET_DYN for EM_AMDGPU, OS ABI AMDGPU_HSA,
 * code object v4 or v5, with an "AMDGPU" NT_AMDGPU_METADATA note whose
 * map has a string amdhsa.target (< 96 bytes) and an array amdhsa.kernels.
 * 0, or nonzero with a one-line message in err as above. */
int dsv4_hsaco_object_read(const unsigned char *elf, size_t len, dsv4_hsaco_object *out, char *err, size_t errlen);

/* Entry i (0 <= i < nkernels) of amdhsa.kernels into *out, held to what
 * dsv4_hsaco_kernel_meta holds the entry it finds to.  0 or nonzero with
 * a message, as dsv4_hsaco_kernel_meta. */
int dsv4_hsaco_kernel_at(const unsigned char *elf, size_t len, int i, dsv4_hsaco_kernel *out, char *err,
                         size_t errlen);

/* Whether the code object defines (st_shndx != 0) a symbol named
 * name followed by suffix, of ELF symbol type stt (STT_FUNC 2, STT_OBJECT
 * 1), in .symtab or .dynsym; when size is nonzero its st_size must be
 * size.  1 yes, 0 no, -1 when the file or a symbol table is malformed. */
int dsv4_hsaco_symbol(const unsigned char *elf, size_t len, const char *name, const char *suffix, unsigned stt,
                      uint64_t size);

#endif
