// NcclStatus lives apart from the CUDA and cuBLAS ones so that programs using only the backend
// (tests/gpu) do not need libnccl at run time.
#include <nccl.h>

#include "kernels/cuda/cuda_status.h"

namespace bmad::cuda {

Status NcclStatus(int error, const char* call, const char* file, int line) {
  const auto e = static_cast<ncclResult_t>(error);
  return Status(e == ncclRemoteError || e == ncclSystemError ? StatusCode::kUnavailable
                                                             : StatusCode::kInternal,
                CallSite(call, file, line) + " failed: " + ncclGetErrorString(e));
}

}  // namespace bmad::cuda
