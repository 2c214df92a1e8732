# dsv4c.cmake -- build-time kernel generation for projects using dsv4c.
#
#   dsv4c_add_kernels(<name> SPEC <spec.lua> [TARGETS ptx amdgcn spirv]
#                     [OUTPUT_DIR <dir>] [INCLUDE_DIRS <dirs>...] [DEPENDS <files>...])
#
# Adds target <name> that runs dsv4c on the spec whenever it (or DEPENDS,
# e.g. the layout files it includes) changes, writing the loose artifacts
# and <spec-stem>.dsv4b into OUTPUT_DIR (default ${CMAKE_CURRENT_BINARY_DIR}/<name>).
# INCLUDE_DIRS are passed as -I: the folders include() may search after the
# spec's own (it never resolves outside them).
# The bundle's path is the target property DSV4C_BUNDLE.
function(dsv4c_add_kernels name)
  cmake_parse_arguments(A "" "SPEC;OUTPUT_DIR" "TARGETS;DEPENDS;INCLUDE_DIRS" ${ARGN})
  if(NOT A_SPEC)
    message(FATAL_ERROR "dsv4c_add_kernels(${name}): SPEC is required")
  endif()
  if(NOT A_OUTPUT_DIR)
    set(A_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/${name})
  endif()
  get_filename_component(stem ${A_SPEC} NAME_WE)
  set(tflag)
  if(A_TARGETS)
    list(JOIN A_TARGETS "," tlist)
    set(tflag -t ${tlist})
  endif()
  if(TARGET dsv4c)
    set(exe $<TARGET_FILE:dsv4c>)
    set(exe_dep dsv4c dsv4c-spirv)
  else()
    find_program(DSV4C_EXECUTABLE dsv4c REQUIRED)
    set(exe ${DSV4C_EXECUTABLE})
    set(exe_dep)
  endif()
  set(iflags)
  foreach(dir ${A_INCLUDE_DIRS})
    list(APPEND iflags -I ${dir})
  endforeach()
  set(bundle ${A_OUTPUT_DIR}/${stem}.dsv4b)
  add_custom_command(OUTPUT ${bundle}
    COMMAND ${exe} ${A_SPEC} ${tflag} ${iflags} -o ${A_OUTPUT_DIR}
    DEPENDS ${A_SPEC} ${A_DEPENDS} ${exe_dep}
    COMMENT "dsv4c ${A_SPEC} -> ${bundle}" VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${bundle})
  set_target_properties(${name} PROPERTIES DSV4C_BUNDLE ${bundle})
endfunction()
