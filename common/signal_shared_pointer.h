// SignalSharedPointer: an object a signal handler reaches (a server to stop), and that main
// destroys once it is done with it.
//
// A handler runs on whichever thread the kernel picks, so it may be inside the object while
// main, on another thread, clears the pointer and destroys the object: a stop signal that came
// as a server finished on its own used a freed server. Clear() returns only once no handler is
// still inside; after it, none can reach the object.
//
// Async-signal-safe on the handler's side (lock-free atomics, no allocation, no lock).
#pragma once

#include <atomic>
#include <thread>

namespace bmad {

template <typename T>
class SignalSharedPointer {
 public:
  // Main, before the signals it serves can come (or at any time: a handler sees it or not).
  void Set(T* object) { object_.store(object); }

  // In a handler: `use(*object)` when one is set. Returns whether it was.
  template <typename Use>
  bool With(Use use) {
    // Counted in before the pointer is read: Clear, which stores null before it reads the
    // count, either sees this handler counted or this handler sees null (all seq_cst).
    users_.fetch_add(1);
    T* object = object_.load();
    if (object != nullptr) use(*object);
    users_.fetch_sub(1);
    return object != nullptr;
  }

  // Main, before it destroys the object: no handler uses it once this returns. Must not be
  // called from a handler (it would wait for itself).
  void Clear() {
    object_.store(nullptr);
    while (users_.load() != 0) std::this_thread::yield();
  }

 private:
  static_assert(std::atomic<T*>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
                "a signal handler may only use lock-free atomics");
  std::atomic<T*> object_{nullptr};
  std::atomic<int> users_{0};
};

}  // namespace bmad
