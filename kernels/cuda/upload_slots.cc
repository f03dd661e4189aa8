#include "kernels/cuda/upload_slots.h"

#include <algorithm>

namespace bmad::cuda {

UploadSlots::UploadSlots(int kinds)
    : current_(static_cast<size_t>(kinds), -1),
      buffers_(static_cast<size_t>(kinds) * buffers_per_kind()) {}

UploadSlots::Plan UploadSlots::Next(int kind, std::span<const int32_t> values) const {
  Plan plan;
  const int side = current_[static_cast<size_t>(kind)];
  if (side >= 0) {
    const int cur = kind * buffers_per_kind() + side;
    const Buffer& b = buffers_[static_cast<size_t>(cur)];
    if (b.valid && !values.empty() && std::ranges::equal(b.values, values)) {
      plan.reuse = true;
      plan.buffer = cur;
      return plan;
    }
    plan.retire = cur;
  }
  plan.buffer = kind * buffers_per_kind() + (side < 0 ? 0 : 1 - side);
  const Buffer& next = buffers_[static_cast<size_t>(plan.buffer)];
  plan.wait_consumed = next.retired;
  plan.wait_landed = next.copied;
  return plan;
}

void UploadSlots::Issued(int kind, const Plan& plan, std::span<const int32_t> values) {
  if (plan.reuse) return;
  if (plan.retire >= 0) buffers_[static_cast<size_t>(plan.retire)].retired = true;
  Buffer& b = buffers_[static_cast<size_t>(plan.buffer)];
  b.values.assign(values.begin(), values.end());
  b.valid = true;
  b.copied = true;
  current_[static_cast<size_t>(kind)] = plan.buffer - kind * buffers_per_kind();
}

void UploadSlots::Failed(int kind) {
  for (int side = 0; side < buffers_per_kind(); ++side) {
    buffers_[static_cast<size_t>(kind * buffers_per_kind() + side)].valid = false;
  }
}

}  // namespace bmad::cuda
