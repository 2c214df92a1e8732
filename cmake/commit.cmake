# Run at every build (compiler/CMakeLists.txt): write OUT, a header with
# DSV4C_COMMIT (the source tree's commit, "-dirty" with uncommitted changes,
# "unknown" outside a git clone), rewriting it only when it changed so that
# nothing rebuilds needlessly.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit unknown)
endif()
set(text "#define DSV4C_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
