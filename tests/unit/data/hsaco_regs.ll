; Fixture for tests/unit/test_hsaco.c: r, a kernel that uses many registers
; of gfx942's unified file (v0-v127 and a0-a71: LLVM 19 writes .vgpr_count
; 200, alignup(128, 4) + 72, and .agpr_count 72) at most 256 threads a
; work-group; and many, a kernel of 98 arguments (more than the reader's
; DSV4_HSACO_MAX_ARGS, hidden ones not counted).
;   llc -mtriple=amdgcn-amd-amdhsa -mcpu=gfx942 -filetype=obj hsaco_regs.ll -o hsaco_regs.o
;   ld.lld-19 -shared hsaco_regs.o -o hsaco_regs.hsaco
define amdgpu_kernel void @r(ptr addrspace(1) %p, i32 %n) #0 {
  call void asm sideeffect "", "~{v127},~{a71}"()
  store i32 %n, ptr addrspace(1) %p
  ret void
}
attributes #0 = { "amdgpu-flat-work-group-size"="1,256" }

define amdgpu_kernel void @many(ptr addrspace(1) %p,
    i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %a4, i32 %a5, i32 %a6, i32 %a7,
    i32 %a8, i32 %a9, i32 %a10, i32 %a11, i32 %a12, i32 %a13, i32 %a14, i32 %a15,
    i32 %a16, i32 %a17, i32 %a18, i32 %a19, i32 %a20, i32 %a21, i32 %a22, i32 %a23,
    i32 %a24, i32 %a25, i32 %a26, i32 %a27, i32 %a28, i32 %a29, i32 %a30, i32 %a31,
    i32 %a32, i32 %a33, i32 %a34, i32 %a35, i32 %a36, i32 %a37, i32 %a38, i32 %a39,
    i32 %a40, i32 %a41, i32 %a42, i32 %a43, i32 %a44, i32 %a45, i32 %a46, i32 %a47,
    i32 %a48, i32 %a49, i32 %a50, i32 %a51, i32 %a52, i32 %a53, i32 %a54, i32 %a55,
    i32 %a56, i32 %a57, i32 %a58, i32 %a59, i32 %a60, i32 %a61, i32 %a62, i32 %a63,
    i32 %a64, i32 %a65, i32 %a66, i32 %a67, i32 %a68, i32 %a69, i32 %a70, i32 %a71,
    i32 %a72, i32 %a73, i32 %a74, i32 %a75, i32 %a76, i32 %a77, i32 %a78, i32 %a79,
    i32 %a80, i32 %a81, i32 %a82, i32 %a83, i32 %a84, i32 %a85, i32 %a86, i32 %a87,
    i32 %a88, i32 %a89, i32 %a90, i32 %a91, i32 %a92, i32 %a93, i32 %a94, i32 %a95,
    i32 %a96) {
  store i32 %a96, ptr addrspace(1) %p
  ret void
}
