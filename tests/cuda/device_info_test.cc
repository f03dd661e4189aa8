#include "kernels/cuda/device_info.h"

#include <gtest/gtest.h>

namespace bmad::cuda {
namespace {

TEST(CudaDeviceInfo, LibrariesReportVersionsWithoutAGpu) {
  const std::string v = LibraryVersions();
  EXPECT_NE(v.find("cuBLAS "), std::string::npos) << v;
  EXPECT_NE(v.find("NCCL "), std::string::npos) << v;
}

TEST(CudaDeviceInfo, NoDeviceIsAClearError) {
  Result<std::vector<DeviceInfo>> devices = ListDevices();
  if (devices.ok()) {
    ASSERT_FALSE(devices->empty());
    EXPECT_GE((*devices)[0].compute_capability, 50);
    EXPECT_GT((*devices)[0].total_bytes, 0u);
  } else {
    EXPECT_EQ(devices.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(devices.status().message().find("no usable CUDA device"), std::string::npos);
  }
}

}  // namespace
}  // namespace bmad::cuda
