// An address range that faults on any access: an anonymous PROT_NONE mapping. Tests hand it to
// the allocators to prove they never read or write the memory they manage, as they must not on
// device memory.
#pragma once

#include <sys/mman.h>

#include <cstddef>

namespace bmad::memory::testing {

class ProtNoneMapping {
 public:
  // MAP_NORESERVE: nothing is committed, so even large ranges cost nothing.
  explicit ProtNoneMapping(size_t bytes) : bytes_(bytes) {
    void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
    base_ = base == MAP_FAILED ? nullptr : base;
  }
  ~ProtNoneMapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  ProtNoneMapping(const ProtNoneMapping&) = delete;
  ProtNoneMapping& operator=(const ProtNoneMapping&) = delete;

  void* base() const { return base_; }  // nullptr when mmap failed
  size_t bytes() const { return bytes_; }

 private:
  void* base_ = nullptr;
  size_t bytes_;
};

}  // namespace bmad::memory::testing
