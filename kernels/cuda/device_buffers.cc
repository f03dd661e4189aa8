#include "kernels/cuda/device_buffers.h"

namespace bmad::cuda {

DeviceBuffers::DeviceBuffers(int slots, FallbackAllocator fallback,
                             std::function<void()> before_free)
    : slots_(static_cast<size_t>(slots)),
      fallback_(std::move(fallback)),
      before_free_(std::move(before_free)) {}

DeviceBuffers::~DeviceBuffers() {
  bool any = false;
  for (const Slot& s : slots_) any = any || s.p != nullptr;
  if (any && before_free_) before_free_();
  for (Slot& s : slots_) {
    if (s.p == nullptr) continue;
    if (s.from_fallback) {
      if (fallback_.free) fallback_.free(s.p);
    } else if (hooks_.free_scratch) {
      hooks_.free_scratch(s.p);
    }
    s = Slot{};
  }
}

void DeviceBuffers::Release(Slot& s) {
  if (s.p == nullptr) return;
  if (before_free_) before_free_();
  if (s.from_fallback) {
    if (fallback_.free) fallback_.free(s.p);
  } else if (hooks_.free_scratch) {
    hooks_.free_scratch(s.p);
  }
  s = Slot{};
}

void* DeviceBuffers::Get(int slot, size_t bytes) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (bytes <= s.bytes && s.p != nullptr) return s.p;
  Release(s);
  const size_t want = ((bytes + bytes / 4) + 255) / 256 * 256;
  const size_t grown = want == 0 ? 256 : want;
  void* p = hooks_.allocate_scratch ? hooks_.allocate_scratch(grown) : nullptr;
  bool from_fallback = false;
  if (p == nullptr && fallback_.allocate) {
    p = fallback_.allocate(grown);
    from_fallback = p != nullptr;
    if (from_fallback) ++fallbacks_;
  }
  if (p == nullptr) return nullptr;
  ++growths_;
  s = Slot{p, grown, from_fallback};
  return p;
}

}  // namespace bmad::cuda
