/* hsaco_check.h -- static validation of an AMDGPU HSA code object.
 *
 * The amdgcn target links LLVM's object with `ld.lld -shared` into a .hsaco
 * (ELF64 shared object, code object v4/v5).  Before bundling it we check,
 * without a GPU or ROCm, that the file is one the HSA loader will accept for
 * the intended processor and that every kernel we generated is described in
 * the metadata note and exported as a symbol.  Every read is bounds-checked:
 * a truncated or corrupted file yields an error, never a crash.  Nothing
 * here allocates, prints or exits.
 */
#ifndef DSV4_HSACO_CHECK_H
#define DSV4_HSACO_CHECK_H

#include <stddef.h>

/* Validate the code object `elf` (len bytes) for processor `gpu` ("gfx942",
 * optionally with target features as in "gfx942:sramecc+:xnack-") and the
 * kernels named in kernels[0..nkernels).  Checks: ELF64 little-endian
 * ET_DYN for EM_AMDGPU, OS ABI AMDGPU_HSA with ABI version 2 or 3 (code
 * object v4/v5), e_flags processor = gpu; an "AMDGPU" NT_AMDGPU_METADATA
 * note holding a MessagePack map whose amdhsa.target is
 * "amdgcn-amd-amdhsa--<gpu>" (followed by end or ':') and whose
 * amdhsa.kernels entries all have .name, .symbol = .name + ".kd",
 * .kernarg_segment_size, .group_segment_fixed_size and
 * .max_flat_workgroup_size, with one entry per named kernel; and for each
 * named kernel a defined STT_FUNC symbol "<kernel>" and a defined 64-byte
 * STT_OBJECT symbol "<kernel>.kd" in .dynsym or .symtab.
 * Returns 0 when valid; otherwise nonzero with a one-line message in err
 * (when err is non-NULL and errlen > 0; always NUL-terminated). */
int dsv4_hsaco_check(const unsigned char *elf, size_t len, const char *gpu,
                     const char *const *kernels, int nkernels, char *err,
                     size_t errlen);

#endif /* DSV4_HSACO_CHECK_H */
