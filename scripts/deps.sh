#!/usr/bin/env bash
# Install the Debian 12 packages dsv4c needs that are missing (nothing else
# is downloaded).  Idempotent: does nothing when all are present.
set -eu
PKGS=(
  cmake make gcc g++ pkg-config            # build
  libasan8 libubsan1                       # gcc's sanitizer runtimes (the DSV4C_SANITIZE run of test.sh)
  clang libclang-rt-14-dev                 # libFuzzer (tests/fuzz, scripts/fuzz.sh)
  liblua5.4-dev                            # spec language
  llvm-19-dev llvm-19 lld-19               # IR, PTX, AMDGCN, ld.lld for HSA code objects
  llvm-15-dev libllvmspirvlib-15-dev       # SPIR-V through the Khronos translator
  spirv-tools                              # SPIR-V validation (C API) and spirv-val
  ocl-icd-opencl-dev ocl-icd-libopencl1 pocl-opencl-icd   # OpenCL on the CPU
  python3-dev python3-numpy                # the dsv4c Python package (python/) and its NumPy tests
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
