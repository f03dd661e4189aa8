# The CUDA backend is optional: AUTO builds it when nvcc exists, for the architectures we ship.
set(BMAD_HAVE_CUDA OFF)
if(NOT BMAD_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # NCCL first: without it there is no multi-GPU replica, so AUTO builds the CPU backend only
    # (with a warning) rather than failing, and ON fails.
    find_package(CUDAToolkit REQUIRED)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
    if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
      if(BMAD_CUDA STREQUAL "ON")
        message(FATAL_ERROR "BMAD_CUDA=ON: CUDA found but NCCL not found (install libnccl-dev or set NCCL_HOME)")
      endif()
      message(WARNING "bmad: nvcc found but NCCL not: building without the CUDA backend "
                      "(install libnccl-dev or set NCCL_HOME to build it)")
    else()
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        # sm_80 (A100) and sm_90 (H100/H200): the only GPUs we ship for.
        set(CMAKE_CUDA_ARCHITECTURES 80 90)
      endif()
      enable_language(CUDA)
      set(CMAKE_CUDA_STANDARD 17)   # CMake 3.25 cannot ask nvcc for CUDA20.
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      add_library(NCCL::nccl UNKNOWN IMPORTED)
      set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
      set(BMAD_HAVE_CUDA ON)
    endif()
  elseif(BMAD_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BMAD_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "bmad: CUDA backend ${BMAD_HAVE_CUDA}")
