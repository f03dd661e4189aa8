// Holds a repeated warning to one line per interval: a flood of the same failure (one per token
// chunk while a peer is unreachable) would bury everything else in the log.

#pragma once

#include <cstdint>

namespace bmad::log {

class Throttle {
 public:
  explicit Throttle(int64_t interval_ns) : interval_ns_(interval_ns) {}

  // Called at each occurrence: true when this one is to be said (the first, and the first once
  // the interval since the last one said has passed); `*unsaid` is then how many occurred
  // between the two and were not said.
  bool Allow(int64_t now_ns, uint64_t* unsaid);

 private:
  int64_t interval_ns_;
  bool said_any_ = false;
  int64_t said_ns_ = 0;
  uint64_t unsaid_ = 0;
};

}  // namespace bmad::log
