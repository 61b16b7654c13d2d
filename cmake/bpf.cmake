# The eBPF GIL probe (core/probes/bpf): target `gt_bpf`, linked into _core either way.
#   With GT_WITH_BPF and clang (>= 11), bpftool, libbpf and libelf (pkg-config) on
#   x86_64: core/probes/bpf/gilprobe.bpf.c -> gilprobe.bpf.o (clang -target bpf) ->
#   gilprobe.skel.h (bpftool gen skeleton), all in ${CMAKE_CURRENT_BINARY_DIR}/bpf;
#   the same for lockprobe.bpf.c (the lock-kind probe of free-threaded builds);
#   gt_bpf = core/probes/bpf/bpfprobe.c + elfsym.c + inherit.c + lockprobe.c with
#   GT_HAVE_BPF=1, linking libbpf, libelf and zlib.
#   Otherwise gt_bpf = core/probes/bpf/bpfprobe_stub.c (reports "unavailable" at runtime)
#   and a STATUS message says why.
#
# This file is also a script (cmake -P) that writes the skeleton header: bpftool
# prints it on stdout, and a script avoids shell redirection in the build rule.
if(CMAKE_SCRIPT_MODE_FILE AND DEFINED GT_SKEL_OUT)
  if(NOT DEFINED GT_SKEL_NAME)
    set(GT_SKEL_NAME gilprobe_bpf)
  endif()
  execute_process(
    COMMAND "${GT_SKEL_BPFTOOL}" gen skeleton "${GT_SKEL_OBJ}" name ${GT_SKEL_NAME}
    OUTPUT_FILE "${GT_SKEL_OUT}.tmp"
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    file(REMOVE "${GT_SKEL_OUT}.tmp")
    message(FATAL_ERROR "bpftool gen skeleton ${GT_SKEL_OBJ} failed: ${rc}")
  endif()
  file(RENAME "${GT_SKEL_OUT}.tmp" "${GT_SKEL_OUT}")
  return()
endif()

set(GT_BPF_SRC ${CMAKE_CURRENT_SOURCE_DIR}/core/probes/bpf)
set(GT_BPF_OUT ${CMAKE_CURRENT_BINARY_DIR}/bpf)
set(gt_bpf_why "")

if(NOT GT_WITH_BPF)
  set(gt_bpf_why "GT_WITH_BPF is OFF")
elseif(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(gt_bpf_why "only x86_64 is supported (this is ${CMAKE_SYSTEM_PROCESSOR})")
else()
  find_program(GT_BPF_CLANG NAMES clang clang-18 clang-17 clang-16 clang-15 clang-14
                                  clang-13 clang-12 clang-11)
  find_program(GT_BPFTOOL NAMES bpftool HINTS /usr/sbin /sbin /usr/local/sbin)
  pkg_check_modules(LIBBPF IMPORTED_TARGET libbpf)
  pkg_check_modules(LIBELF IMPORTED_TARGET libelf)
  find_library(GT_LIBZ NAMES z)
  if(GT_BPF_CLANG)
    execute_process(COMMAND ${GT_BPF_CLANG} --version OUTPUT_VARIABLE gt_clang_version_out
                    ERROR_QUIET)
    string(REGEX MATCH "clang version ([0-9]+)" _ "${gt_clang_version_out}")
    set(GT_BPF_CLANG_MAJOR "${CMAKE_MATCH_1}")
  endif()
  if(NOT GT_BPF_CLANG)
    set(gt_bpf_why "clang not found (apt-get install clang)")
  elseif(GT_BPF_CLANG_MAJOR STREQUAL "")
    set(gt_bpf_why "${GT_BPF_CLANG} does not look like clang")
  elseif(GT_BPF_CLANG_MAJOR LESS 11)
    set(gt_bpf_why "${GT_BPF_CLANG} is too old (need clang >= 11 for BPF CO-RE)")
  elseif(NOT GT_BPFTOOL)
    set(gt_bpf_why "bpftool not found (apt-get install bpftool)")
  elseif(NOT LIBBPF_FOUND)
    set(gt_bpf_why "libbpf not found by pkg-config (apt-get install libbpf-dev)")
  elseif(NOT LIBELF_FOUND)
    set(gt_bpf_why "libelf not found by pkg-config (apt-get install libelf-dev)")
  elseif(NOT GT_LIBZ)
    set(gt_bpf_why "zlib not found (apt-get install zlib1g-dev)")
  endif()
endif()

if(gt_bpf_why STREQUAL "")
  pkg_get_variable(GT_LIBBPF_INCLUDEDIR libbpf includedir)
  file(MAKE_DIRECTORY ${GT_BPF_OUT})
  # A probe's BPF half: PROBE.bpf.c (with PROBE_abi.h) -> PROBE.bpf.o -> PROBE.skel.h,
  # whose skeleton is struct PROBE_bpf; its path in OUT.
  function(gt_bpf_skeleton probe out)
    set(obj ${GT_BPF_OUT}/${probe}.bpf.o)
    set(skel ${GT_BPF_OUT}/${probe}.skel.h)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${GT_BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Wextra
              -Wno-unused-parameter -I${GT_LIBBPF_INCLUDEDIR} -I${GT_BPF_SRC}
              -c ${GT_BPF_SRC}/${probe}.bpf.c -o ${obj}
      DEPENDS ${GT_BPF_SRC}/${probe}.bpf.c ${GT_BPF_SRC}/${probe}_abi.h
              ${GT_BPF_SRC}/ringbuf.bpf.h ${GT_BPF_SRC}/vmlinux_min.h
      COMMENT "BPF ${probe}.bpf.o"
      VERBATIM)
    add_custom_command(
      OUTPUT ${skel}
      COMMAND ${CMAKE_COMMAND} -DGT_SKEL_BPFTOOL=${GT_BPFTOOL} -DGT_SKEL_OBJ=${obj}
              -DGT_SKEL_OUT=${skel} -DGT_SKEL_NAME=${probe}_bpf -P ${GT_BPF_CMAKE}
      DEPENDS ${obj} ${GT_BPF_CMAKE}
      COMMENT "BPF skeleton ${probe}.skel.h"
      VERBATIM)
    set(${out} ${skel} PARENT_SCOPE)
  endfunction()
  set(GT_BPF_CMAKE ${CMAKE_CURRENT_LIST_FILE})
  gt_bpf_skeleton(gilprobe gt_bpf_skel)
  # The lock-kind probe (free-threaded builds).
  gt_bpf_skeleton(lockprobe gt_lock_skel)
  add_custom_target(gt_bpf_skel DEPENDS ${gt_bpf_skel} ${gt_lock_skel})

  add_library(gt_bpf STATIC ${GT_BPF_SRC}/bpfprobe.c ${GT_BPF_SRC}/elfsym.c ${GT_BPF_SRC}/inherit.c
              ${GT_BPF_SRC}/lockprobe.c ${gt_bpf_skel} ${gt_lock_skel})
  add_dependencies(gt_bpf gt_bpf_skel)
  target_compile_definitions(gt_bpf PUBLIC GT_HAVE_BPF=1)
  target_include_directories(gt_bpf PUBLIC ${GT_BPF_SRC} PRIVATE ${GT_BPF_OUT})
  # bpfprobe.c pushes into the thread registry (record).
  target_link_libraries(gt_bpf PUBLIC gt_record PkgConfig::LIBBPF PkgConfig::LIBELF ${GT_LIBZ}
                        pthread ${CMAKE_DL_LIBS})
  message(STATUS "eBPF GIL probe: built (${GT_BPF_CLANG}, ${GT_BPFTOOL}, "
                 "libbpf ${LIBBPF_VERSION}, libelf ${LIBELF_VERSION})")
else()
  add_library(gt_bpf STATIC ${GT_BPF_SRC}/bpfprobe_stub.c)
  target_include_directories(gt_bpf PUBLIC ${GT_BPF_SRC})
  target_link_libraries(gt_bpf PUBLIC gt_record)
  message(STATUS "eBPF GIL probe: not built, using the stub: ${gt_bpf_why}")
endif()

