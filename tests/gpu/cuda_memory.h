// DeviceMemory on the GPU: cudaMalloc'd buffers, copies through the CUDA backend's streams (so
// they are ordered with its ops, and ToHost reports the backend's first error).
#pragma once

#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "tests/gpu/device_llama.h"

namespace bmad::gpu_tests {

class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(kernels::CudaBackend& backend) : backend_(backend) {}
  ~CudaMemory() override;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  Result<void*> Allocate(size_t bytes) override;
  Status ToDevice(void* dst, const void* host_src, size_t bytes) override;
  Status ToHost(void* host_dst, const void* src, size_t bytes) override;
  Status OnDevice(void* dst, const void* src, size_t bytes) override;

 private:
  kernels::CudaBackend& backend_;
  std::vector<void*> blocks_;
};

}  // namespace bmad::gpu_tests
