// What CUDA devices this process can use.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace bmad::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_capability = 0;  // e.g. 90 for sm_90
  size_t total_bytes = 0;
};

// Every visible device, without creating a context on any; kUnavailable with the driver's
// reason when there is none (no GPU, no driver), so `backend: cuda` on such a machine fails at
// start-up with a clear message.
Result<std::vector<DeviceInfo>> ListDevices();

// cuBLAS and NCCL versions linked in (work without a GPU), e.g. "cuBLAS 13.1.0, NCCL 2.28.9".
std::string LibraryVersions();

}  // namespace bmad::cuda
