/* hsaco_check.h -- static validation of an AMDGPU HSA code object.
 *
 * The amdgcn target links LLVM's object with `ld.lld -shared` into a .hsaco
 * (ELF64 shared object, code object v4/v5).  Before bundling it we check,
 * without a GPU or ROCm, that the file is one the HSA loader will accept for
 * the intended processor and that every kernel we generated is described in
 * the metadata note and exported as a symbol.  The reading is
 * common/hsaco_meta.c's (the reader the runtime uses too): every read is
 * bounds-checked, a truncated or corrupted file yields an error, never a
 * crash.  Nothing here allocates, prints or exits.
 */
#ifndef DSV4_HSACO_CHECK_H
#define DSV4_HSACO_CHECK_H

#include <stddef.h>

/* Validate the code object `elf` (len bytes) for processor `gpu` ("gfx942",
 * optionally with target features as in "gfx942:sramecc+:xnack-") and the
 * kernels named in kernels[0..nkernels).  Checks: what
 * dsv4_hsaco_object_read holds the file to (ELF64 little-endian ET_DYN for
 * EM_AMDGPU, OS ABI AMDGPU_HSA with ABI version 2 or 3, an "AMDGPU"
 * NT_AMDGPU_METADATA note holding a MessagePack map); e_flags processor =
 * gpu; amdhsa.target is "amdgcn-amd-amdhsa--<gpu>" (followed by end or
 * ':'); every amdhsa.kernels entry is what dsv4_hsaco_kernel_at holds it
 * to (.symbol = .name + ".kd", the required fields present, arguments
 * inside the kernarg segment); one entry per named kernel; and for each
 * named kernel a defined STT_FUNC symbol "<kernel>" and a defined 64-byte
 * STT_OBJECT symbol "<kernel>.kd" in .dynsym or .symtab.
 * Returns 0 when valid; otherwise nonzero with a one-line message in err
 * (when err is non-NULL and errlen > 0; always NUL-terminated). */
int dsv4_hsaco_check(const unsigned char *elf, size_t len, const char *gpu, const char *const *kernels, int nkernels,
                     char *err, size_t errlen);

#endif /* DSV4_HSACO_CHECK_H */
