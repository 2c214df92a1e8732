# dsv4c.cmake -- build-time kernel generation for projects using dsv4c.
#
#   dsv4c_add_kernels(<name> SPEC <spec.lua> [TARGETS ptx amdgcn spirv]
#                     [OUTPUT_DIR <dir>] [INCLUDE_DIRS <dirs>...] [DEPENDS <files>...]
#                     [EMBED])
#
# Adds target <name> that runs dsv4c on the spec whenever it, DEPENDS (the
# layout files it includes: dsv4c does not report its includes, so list
# them) or the dsv4c binary changes, writing the loose artifacts and
# <spec-stem>.dsv4b into OUTPUT_DIR (default ${CMAKE_CURRENT_BINARY_DIR}/<name>).
# INCLUDE_DIRS are passed as -I: the folders include() may search after the
# spec's own (it never resolves outside them); dsv4c itself searches its
# shipped specs (DSV4C_SPECS_DIR: layouts.lua and the rest) last, so a spec
# may `include "layouts.lua"` as the shipped ones do, and their .lua files
# are dependencies of every dsv4c_add_kernels target.
# The bundle's path is the target property DSV4C_BUNDLE.
#
# EMBED: dsv4c also writes (--emit c) <id>_kernels.c, the bundle's bytes as
# a C array, and <id>_kernels.h, its opener <id>_kernels_open(ctx, &bundle)
# and each kernel's name constant and typed launcher, where <id> is the
# spec's stem made a C identifier (string(MAKE_C_IDENTIFIER); it must begin
# with a letter).  <name> is then a static library of that source: link it
# (it brings dsv4c::dsv4rt and OUTPUT_DIR as include folder) and
# #include "<id>_kernels.h"; the program needs no bundle file at run time.
# The properties DSV4C_SOURCE and DSV4C_HEADER give the two paths.
# The shipped specs: set by the installed package (dsv4cConfig.cmake), or,
# included from a source tree, the tree's own specs/.
if(NOT DSV4C_SPECS_DIR)
  get_filename_component(DSV4C_SPECS_DIR "${CMAKE_CURRENT_LIST_DIR}/../specs" ABSOLUTE)
endif()

function(dsv4c_add_kernels name)
  cmake_parse_arguments(A "EMBED" "SPEC;OUTPUT_DIR" "TARGETS;DEPENDS;INCLUDE_DIRS" ${ARGN})
  if(NOT A_SPEC)
    message(FATAL_ERROR "dsv4c_add_kernels(${name}): SPEC is required")
  endif()
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "dsv4c_add_kernels(${name}): unknown arguments ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT A_OUTPUT_DIR)
    set(A_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/${name})
  endif()
  # dsv4c names the bundle after the spec's file name less its last extension
  get_filename_component(stem ${A_SPEC} NAME_WLE)
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
    # a new dsv4c (or its SPIR-V helper beside it) regenerates the kernels
    set(exe_dep ${DSV4C_EXECUTABLE})
    get_filename_component(exe_dir ${DSV4C_EXECUTABLE} DIRECTORY)
    if(EXISTS ${exe_dir}/dsv4c-spirv)
      list(APPEND exe_dep ${exe_dir}/dsv4c-spirv)
    endif()
  endif()
  set(iflags)
  foreach(dir ${A_INCLUDE_DIRS})
    list(APPEND iflags -I ${dir})
  endforeach()
  file(GLOB shipped_specs ${DSV4C_SPECS_DIR}/*.lua)
  list(APPEND A_DEPENDS ${shipped_specs})
  set(bundle ${A_OUTPUT_DIR}/${stem}.dsv4b)
  if(NOT A_EMBED)
    add_custom_command(OUTPUT ${bundle}
      COMMAND ${exe} ${A_SPEC} ${tflag} ${iflags} -o ${A_OUTPUT_DIR}
      DEPENDS ${A_SPEC} ${A_DEPENDS} ${exe_dep}
      COMMENT "dsv4c ${A_SPEC} -> ${bundle}" VERBATIM)
    add_custom_target(${name} ALL DEPENDS ${bundle})
    set_target_properties(${name} PROPERTIES DSV4C_BUNDLE ${bundle})
    return()
  endif()

  # EMBED: the same prefix rule as dsv4c's (compiler/embed.c), checked here
  # so that a bad spec name stops the configure step and not the build
  string(MAKE_C_IDENTIFIER "${stem}" id)
  string(TOLOWER "${id}" id_lower)
  if(NOT id MATCHES "^[A-Za-z]" OR id_lower MATCHES "^(dsv4_|dsv4rt)")
    message(FATAL_ERROR "dsv4c_add_kernels(${name}): EMBED needs a spec name that begins with a letter and not "
                        "with dsv4_ or dsv4rt (the runtime's names); '${stem}' gives '${id}'")
  endif()
  if(TARGET dsv4c::dsv4rt)
    set(rt dsv4c::dsv4rt)
  elseif(TARGET dsv4rt)
    set(rt dsv4rt)
  else()
    message(FATAL_ERROR "dsv4c_add_kernels(${name}): EMBED needs the runtime target (find_package(dsv4c))")
  endif()
  set(csrc ${A_OUTPUT_DIR}/${id}_kernels.c)
  set(chdr ${A_OUTPUT_DIR}/${id}_kernels.h)
  # the bundle file is a byproduct: deleting it does not rerun dsv4c, and
  # nothing built from <name> reads it
  add_custom_command(OUTPUT ${csrc} ${chdr}
    BYPRODUCTS ${bundle}
    COMMAND ${exe} ${A_SPEC} ${tflag} ${iflags} --emit c -o ${A_OUTPUT_DIR}
    DEPENDS ${A_SPEC} ${A_DEPENDS} ${exe_dep}
    COMMENT "dsv4c --emit c ${A_SPEC} -> ${csrc}" VERBATIM)
  add_library(${name} STATIC ${csrc} ${chdr})
  target_include_directories(${name} PUBLIC ${A_OUTPUT_DIR})
  target_link_libraries(${name} PUBLIC ${rt})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON LINKER_LANGUAGE C
                        DSV4C_BUNDLE ${bundle} DSV4C_SOURCE ${csrc} DSV4C_HEADER ${chdr})
endfunction()
