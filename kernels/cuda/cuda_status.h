// Every CUDA runtime, cuBLAS and NCCL call goes through one of these macros, which turn a
// failure into a Status naming the file, the line, the call and the library's error string.
// Kernel launches are checked the same way: the launchers (kernel_launchers.h) return the launch's
// cudaGetLastError(), which the caller passes to BMAD_CUDA_CHECK.
//
// Code that cannot return a Status (the Backend ops, which "do not fail") runs its checked body
// as a function returning Status and keeps the first failure in a StickyStatus, which the owner
// reports later (CudaBackend::Synchronize).
#pragma once

#include <string>

#include "common/status.h"

namespace bmad::cuda {

// "file:line: call", the prefix of every message below.
std::string CallSite(const char* call, const char* file, int line);

// cudaError_t, cublasStatus_t and ncclResult_t are passed as ints so this header needs no
// CUDA include and can be used from plain C++ files.
Status CudaStatus(int error, const char* call, const char* file, int line);
Status CublasStatus(int error, const char* call, const char* file, int line);
Status NcclStatus(int error, const char* call, const char* file, int line);  // nccl_status.cc

// The first failure of a series of calls; later failures are usually its consequences (a CUDA
// context that faulted fails every later call) and are dropped. Not thread-safe.
class StickyStatus {
 public:
  bool ok() const { return first_.ok(); }
  const Status& status() const { return first_; }
  void Record(const Status& s) {
    if (!s.ok() && first_.ok()) first_ = s;
  }

 private:
  Status first_;
};

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
