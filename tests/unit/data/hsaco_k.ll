; Fixture for tests/unit/test_hsaco.c: the smallest amdgcn kernel.
;   llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 -filetype=obj hsaco_k.ll -o hsaco_k.o
;   ld.lld-19 -shared hsaco_k.o -o hsaco_k.hsaco
define amdgpu_kernel void @k(ptr addrspace(1) %p) {
  store i32 1, ptr addrspace(1) %p
  ret void
}
