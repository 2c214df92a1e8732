# env.cmake -- the sanitizer settings every test of a DSV4C_SANITIZE build runs
# with.  The top-level CMakeLists.txt adds this file to the build's
# CTestTestfile.cmake (TEST_INCLUDE_FILES): ctest reads it before it starts any
# test, and the variables set here are inherited by every test process, so a
# plain `ctest` in the build folder (scripts/test.sh, CMakePresets.json's
# "asan" preset, by hand) runs with them.  A variable already set in the
# environment is kept (set ASAN_OPTIONS yourself to try other settings).
#
# ASAN_OPTIONS
#   detect_leaks=1           LeakSanitizer at exit (the default on x86-64 Linux; said here)
#   fast_unwind_on_malloc=0  allocation stacks through libraries built without frame
#                            pointers (PoCL, LLVM), so lsan.supp can match PoCL's frames
#                            instead of a whole library: a leaked cl_mem of ours keeps
#                            its stack through our code and is reported
#   malloc_context_size=16   ... only 16 frames deep: enough to reach the frame lsan.supp
#                            names (10 deep at most in this suite), and the slow unwinder
#                            cheaper than at the default 30
#   protect_shadow_gap=0     the CUDA driver maps memory where ASan's shadow gap would be
#                            protected: without it cuInit fails with "out of memory" (error 2)
#                            on a GPU machine (H100, driver 580: measured); CI has no GPU,
#                            so it changes nothing there
#   detect_odr_violation is left at its default: LLVM 19 (dsv4c), LLVM 15 (dsv4c-spirv,
#   PoCL) and SPIRV-Tools are not instrumented, so ASan registers none of their globals,
#   and the two LLVMs never share a process; nothing to relax
# UBSAN_OPTIONS
#   print_stacktrace=1       where the undefined behaviour happened (the build already
#                            makes every UBSan finding fatal: -fno-sanitize-recover)
# LSAN_OPTIONS
#   suppressions=lsan.supp   third-party leaks, each with its reason
if(NOT DEFINED ENV{ASAN_OPTIONS})
  set(ENV{ASAN_OPTIONS} "detect_leaks=1:fast_unwind_on_malloc=0:malloc_context_size=16:protect_shadow_gap=0")
endif()
if(NOT DEFINED ENV{UBSAN_OPTIONS})
  set(ENV{UBSAN_OPTIONS} "print_stacktrace=1")
endif()
if(NOT DEFINED ENV{LSAN_OPTIONS})
  set(ENV{LSAN_OPTIONS} "suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp")
endif()
