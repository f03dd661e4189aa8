// LibraryVersions (device_info.h), apart from ListDevices so that a program that only lists
// devices (the bmad CLI, through the replica) does not need libnccl at run time: a GPU machine
// for tests/gpu/run.sh may have no NCCL, and the bundle cannot carry it (about 200 MB).
#include <cublas_v2.h>
#include <nccl.h>

#include "kernels/cuda/device_info.h"

namespace bmad::cuda {

std::string LibraryVersions() {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  int nccl = 0;
  ncclGetVersion(&nccl);
  return "cuBLAS " + std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(patch) + ", NCCL " + std::to_string(nccl / 10000) + "." +
         std::to_string((nccl / 100) % 100) + "." + std::to_string(nccl % 100);
}

}  // namespace bmad::cuda
