#include "kernels/cuda/cuda_status.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace bmad::cuda {
namespace {

std::string Where(const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call;
}

}  // namespace

Status CudaStatus(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(error);
  const StatusCode code = (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
                              ? StatusCode::kUnavailable
                              : (e == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted
                                                                : StatusCode::kInternal);
  return Status(code, Where(call, file, line) + " failed: " + cudaGetErrorName(e) + " (" +
                          cudaGetErrorString(e) + ")");
}

Status CublasStatus(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<cublasStatus_t>(error);
  return Internal(Where(call, file, line) + " failed: " + cublasGetStatusName(e) + " (" +
                  cublasGetStatusString(e) + ")");
}

Status NcclStatus(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<ncclResult_t>(error);
  return Status(e == ncclRemoteError || e == ncclSystemError ? StatusCode::kUnavailable
                                                             : StatusCode::kInternal,
                Where(call, file, line) + " failed: " + ncclGetErrorString(e));
}

}  // namespace bmad::cuda
