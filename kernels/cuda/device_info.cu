#include "kernels/cuda/device_info.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_status.h"

namespace bmad::cuda {

Result<std::vector<DeviceInfo>> ListDevices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return Unavailable(std::string("no usable CUDA device: ") +
                       (err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0"));
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    BMAD_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    DeviceInfo d;
    d.index = i;
    d.name = prop.name;
    d.compute_capability = prop.major * 10 + prop.minor;
    d.total_bytes = prop.totalGlobalMem;
    // Properties only: cudaSetDevice or cudaMemGetInfo would create this process's context on
    // every visible GPU (hundreds of MiB each), and every rank of a replica lists them all.
    devices.push_back(d);
  }
  return devices;
}

}  // namespace bmad::cuda
