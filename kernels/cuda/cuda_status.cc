#include "kernels/cuda/cuda_status.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace bmad::cuda {

std::string CallSite(const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call;
}

Status CudaStatus(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(error);
  const StatusCode code = (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
                              ? StatusCode::kUnavailable
                              : (e == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted
                                                                : StatusCode::kInternal);
  return Status(code, CallSite(call, file, line) + " failed: " + cudaGetErrorName(e) + " (" +
                          cudaGetErrorString(e) + ")");
}

Status CublasStatus(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<cublasStatus_t>(error);
  return Internal(CallSite(call, file, line) + " failed: " + cublasGetStatusName(e) + " (" +
                  cublasGetStatusString(e) + ")");
}

}  // namespace bmad::cuda
