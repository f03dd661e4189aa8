#include "tests/gpu/cuda_memory.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_status.h"

namespace bmad::gpu_tests {

CudaMemory::~CudaMemory() {
  (void)backend_.Synchronize();
  for (void* p : blocks_) cudaFree(p);
}

Result<void*> CudaMemory::Allocate(size_t bytes) {
  void* p = nullptr;
  BMAD_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  blocks_.push_back(p);
  return p;
}

Status CudaMemory::ToDevice(void* dst, const void* host_src, size_t bytes) {
  return backend_.CopyToDevice(dst, host_src, bytes);
}

Status CudaMemory::ToHost(void* host_dst, const void* src, size_t bytes) {
  return backend_.CopyToHost(host_dst, src, bytes);
}

Status CudaMemory::OnDevice(void* dst, const void* src, size_t bytes) {
  return backend_.CopyOnDevice(dst, src, bytes);
}

}  // namespace bmad::gpu_tests
