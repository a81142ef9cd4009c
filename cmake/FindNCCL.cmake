# FindNCCL: the NCCL header and shared library, from the CUDA toolkit, NCCL_ROOT / NCCL_HOME,
# or system paths. Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION and the
# interface target NCCL::headers. Ingot compiles against the header only and opens the
# library with dlopen at run time (runtime/dist/nccl_library.cc), so nothing links libnccl;
# NCCL_LIBRARY is recorded as the last place the runtime looks.
set(_nccl_hints $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${NCCL_ROOT})
if(CUDAToolkit_INCLUDE_DIRS)
  list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} ([0-9]+).*" "\\1" _nccl_${_part}
           "${_nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_INCLUDE_DIR NCCL_LIBRARY
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::headers)
  add_library(NCCL::headers INTERFACE IMPORTED)
  set_target_properties(NCCL::headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
