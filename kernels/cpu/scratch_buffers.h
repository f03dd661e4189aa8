// One growable float buffer per compute thread, for kernels that need working space (matmul
// tiles, attention blocks). A buffer grows when a larger op first needs it and is then reused,
// so after warm-up ops allocate nothing; growths are counted. Memory comes from the backend's
// MemoryHooks (the worker's arena) or the system allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace bmad::kernels::cpu {

class ScratchBuffers {
 public:
  explicit ScratchBuffers(int threads);
  ~ScratchBuffers();
  ScratchBuffers(const ScratchBuffers&) = delete;
  ScratchBuffers& operator=(const ScratchBuffers&) = delete;

  void SetHooks(const MemoryHooks& hooks) { hooks_ = hooks; }
  // At least `floats` floats for `thread`'s exclusive use (64-byte aligned). Contents are not
  // kept across growth. Throws std::bad_alloc when no memory is left (never returns null).
  float* Get(int thread, size_t floats);
  // Grows the buffers of threads [0, threads) to at least `floats`. Called by the dispatching
  // thread before a parallel loop, so that which pool thread happens to pick up the largest
  // task does not decide when a buffer grows: after warm-up, steady state allocates nothing
  // regardless of scheduling. Must not run while those threads use their buffers; slots past
  // `threads` (a caller's own, holding live data) are left alone.
  void Reserve(int threads, size_t floats);
  uint64_t growths() const { return growths_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    float* data = nullptr;
    size_t capacity = 0;
  };
  void Release(Slot& slot);
  void Grow(Slot& slot, size_t floats);

  MemoryHooks hooks_;
  std::vector<Slot> slots_;
  std::atomic<uint64_t> growths_{0};
};

}  // namespace bmad::kernels::cpu
