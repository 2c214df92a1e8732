// spirv_shim.cpp -- the only C++ in dsv4c: SPIRV-LLVM-Translator has no C
// API, so these two functions wrap llvm::writeSpirv / llvm::readSpirv.
#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm-c/Core.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

static char *dup_string(const std::string &s)
{
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  if (p)
    std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

static unsigned char *dup_bytes(const std::string &s, size_t *n)
{
  *n = s.size();
  unsigned char *p = static_cast<unsigned char *>(std::malloc(s.size() ? s.size() : 1));
  if (p)
    std::memcpy(p, s.data(), s.size());
  return p;
}

// Translate module m to SPIR-V; 0 on success, else *err (malloc'd).
// sub_groups: the module uses sub-group shuffles and a required size.
extern "C" int dsv4_spirv_write(LLVMModuleRef m, int sub_groups, unsigned char **out, size_t *n, char **err)
{
  std::ostringstream os;
  std::string msg;
  // SPIR-V 1.0: what OpenCL 1.2 / 2.1 consumers and the validator's OpenCL
  // 1.2 environment accept; the translator's default would be 1.4.  Sub-group
  // code needs 1.3 (OpGroupNonUniformShuffleXor; SubgroupSize needs 1.1): the
  // translator aborts on it at 1.0.
  SPIRV::TranslatorOpts opts(sub_groups ? SPIRV::VersionNumber::SPIRV_1_3 : SPIRV::VersionNumber::SPIRV_1_0);
  if (!llvm::writeSpirv(llvm::unwrap(m), opts, os, msg)) {
    *err = dup_string(msg.empty() ? "translation failed" : msg);
    return 1;
  }
  *out = dup_bytes(os.str(), n);
  return 0;
}

// SPIR-V back to SPIR 1.2 bitcode (what `llvm-spirv -r` does), for OpenCL
// implementations that take SPIR but not SPIR-V IL (PoCL 3.1).
extern "C" int dsv4_spirv_to_spir12(const unsigned char *spv, size_t n, unsigned char **bc, size_t *bcn, char **err)
{
  llvm::LLVMContext ctx;
  ctx.setOpaquePointers(false);
  std::istringstream is(std::string(reinterpret_cast<const char *>(spv), n));
  llvm::Module *m = nullptr;
  std::string msg;
  if (!llvm::readSpirv(ctx, is, m, msg)) {
    *err = dup_string(msg.empty() ? "reverse translation failed" : msg);
    return 1;
  }
  std::string buf;
  llvm::raw_string_ostream os(buf);
  llvm::WriteBitcodeToFile(*m, os);
  os.flush();
  delete m;
  *bc = dup_bytes(buf, bcn);
  return 0;
}

// SPIR-V back to an LLVM module in a context of its own (typed pointers, as
// the translator's SPIR 1.2 output), for a pass to change before it is
// written (spirv_subgroups.c); the caller disposes of both.  0 on success.
extern "C" int dsv4_spirv_read(const unsigned char *spv, size_t n, LLVMContextRef *ctx_out, LLVMModuleRef *m_out,
                               char **err)
{
  llvm::LLVMContext *ctx = new llvm::LLVMContext;
  ctx->setOpaquePointers(false);
  std::istringstream is(std::string(reinterpret_cast<const char *>(spv), n));
  llvm::Module *m = nullptr;
  std::string msg;
  if (!llvm::readSpirv(*ctx, is, m, msg)) {
    *err = dup_string(msg.empty() ? "reverse translation failed" : msg);
    delete ctx;
    return 1;
  }
  *ctx_out = llvm::wrap(ctx);
  *m_out = llvm::wrap(m);
  return 0;
}
