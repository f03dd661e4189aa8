// The CUDA backend's growable scratch (the F16 copy of activations, split-K partials, uploaded
// block tables): a fixed set of slots, each one buffer that only grows. Memory comes from the
// MemoryHooks' allocate_scratch (the worker's arena) and, when no hook is set or it returns
// nullptr, from a fallback allocator (cudaMalloc), counted separately so the worker can export
// it. Nothing here reads or writes the memory it hands out (it is device memory): plain C++,
// tested on an address range that faults on access (tests/kernels/cuda_device_buffers_test.cc).
//
// Thread-safety: none; the backend calls it from the thread that issues its ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/backend.h"

namespace bmad::cuda {

struct FallbackAllocator {
  std::function<void*(size_t bytes)> allocate;  // nullptr on failure
  std::function<void(void* p)> free;
};

class DeviceBuffers {
 public:
  // `before_free` runs before any buffer is given back (the backend waits for its stream there,
  // since a kernel still in flight may read the old buffer).
  DeviceBuffers(int slots, FallbackAllocator fallback, std::function<void()> before_free);
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  // Only before the first Get: later buffers come from these hooks.
  void SetHooks(kernels::MemoryHooks hooks) { hooks_ = std::move(hooks); }

  // Slot `slot`'s buffer, at least `bytes` long (256-byte multiple). Growing replaces the buffer
  // (its contents are lost) with one of 1.25 × the size asked, so slowly rising sizes do not
  // grow it every time. nullptr when both allocators fail.
  void* Get(int slot, size_t bytes);
  size_t capacity(int slot) const { return slots_[static_cast<size_t>(slot)].bytes; }

  uint64_t growths() const { return growths_; }                 // every (re)allocation
  uint64_t fallback_allocations() const { return fallbacks_; }  // of those, by the fallback

 private:
  struct Slot {
    void* p = nullptr;
    size_t bytes = 0;
    bool from_fallback = false;
  };
  void Release(Slot& s);

  std::vector<Slot> slots_;
  FallbackAllocator fallback_;
  std::function<void()> before_free_;
  kernels::MemoryHooks hooks_;
  uint64_t growths_ = 0;
  uint64_t fallbacks_ = 0;
};

}  // namespace bmad::cuda
