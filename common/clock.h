// Time behind a seam: code that waits, ages or times out takes a Clock&, so tests drive time
// with ManualClock instead of sleeping.
#pragma once

#include <atomic>
#include <cstdint>

namespace bmad {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds since an arbitrary origin.
  virtual int64_t NowNanos() const = 0;
  int64_t NowMillis() const { return NowNanos() / 1'000'000; }
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
};

// std::chrono::steady_clock.
class SystemClock final : public Clock {
 public:
  int64_t NowNanos() const override;
  static SystemClock& Instance();
};

// A clock that moves only when told to (thread-safe).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_nanos = 0) : now_(start_nanos) {}
  int64_t NowNanos() const override { return now_.load(std::memory_order_relaxed); }
  void AdvanceNanos(int64_t d) { now_.fetch_add(d, std::memory_order_relaxed); }
  void AdvanceMillis(int64_t ms) { AdvanceNanos(ms * 1'000'000); }

 private:
  std::atomic<int64_t> now_;
};

// Wall-clock milliseconds since the Unix epoch (for timestamps that cross processes).
int64_t UnixMillis();

}  // namespace bmad
