#include "kernels/cpu/scratch_buffers.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace bmad::kernels::cpu {

ScratchBuffers::ScratchBuffers(int threads) : slots_(static_cast<size_t>(threads)) {}

ScratchBuffers::~ScratchBuffers() {
  for (Slot& s : slots_) Release(s);
}

void ScratchBuffers::Release(Slot& slot) {
  if (!slot.data) return;
  if (hooks_.free_scratch) {
    hooks_.free_scratch(slot.data);
  } else {
    std::free(slot.data);
  }
  slot = Slot{};
}

float* ScratchBuffers::Get(int thread, size_t floats) {
  Slot& slot = slots_[static_cast<size_t>(thread)];
  if (slot.capacity < floats) Grow(slot, floats);
  return slot.data;
}

void ScratchBuffers::Reserve(int threads, size_t floats) {
  for (size_t i = 0; i < static_cast<size_t>(threads) && i < slots_.size(); ++i) {
    if (slots_[i].capacity < floats) Grow(slots_[i], floats);
  }
}

void ScratchBuffers::Grow(Slot& slot, size_t floats) {
  Release(slot);
  // Grow with headroom so a slowly rising size settles after a few growths.
  const size_t capacity = std::max<size_t>(1024, floats + floats / 2);
  const size_t bytes = (capacity * sizeof(float) + 63) / 64 * 64;
  void* p = hooks_.allocate_scratch ? hooks_.allocate_scratch(bytes) : std::aligned_alloc(64, bytes);
  growths_.fetch_add(1, std::memory_order_relaxed);
  // Every kernel writes through what Get returns: out of memory is std::bad_alloc (as a vector's
  // growth would be), not a null pointer to crash on.
  if (p == nullptr) throw std::bad_alloc();
  slot.data = static_cast<float*>(p);
  slot.capacity = capacity;
}

}  // namespace bmad::kernels::cpu
