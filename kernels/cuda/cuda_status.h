// Every CUDA runtime, cuBLAS and NCCL call goes through one of these macros, which turn a
// failure into a Status naming the file, the line, the call and the library's error string.
#pragma once

#include <string>

#include "common/status.h"

namespace bmad::cuda {

// cudaError_t, cublasStatus_t and ncclResult_t are passed as ints so this header needs no
// CUDA include and can be used from plain C++ files.
Status CudaStatus(int error, const char* call, const char* file, int line);
Status CublasStatus(int error, const char* call, const char* file, int line);
Status NcclStatus(int error, const char* call, const char* file, int line);

}  // namespace bmad::cuda

#define BMAD_CUDA_CHECK(call)                                                                  \
  do {                                                                                         \
    const int bmad_cuda_err_ = static_cast<int>(call);                                         \
    if (bmad_cuda_err_ != 0)                                                                   \
      return ::bmad::cuda::CudaStatus(bmad_cuda_err_, #call, __FILE__, __LINE__);              \
  } while (0)

#define BMAD_CUBLAS_CHECK(call)                                                                \
  do {                                                                                         \
    const int bmad_cublas_err_ = static_cast<int>(call);                                       \
    if (bmad_cublas_err_ != 0)                                                                 \
      return ::bmad::cuda::CublasStatus(bmad_cublas_err_, #call, __FILE__, __LINE__);          \
  } while (0)

#define BMAD_NCCL_CHECK(call)                                                                  \
  do {                                                                                         \
    const int bmad_nccl_err_ = static_cast<int>(call);                                         \
    if (bmad_nccl_err_ != 0)                                                                   \
      return ::bmad::cuda::NcclStatus(bmad_nccl_err_, #call, __FILE__, __LINE__);              \
  } while (0)
