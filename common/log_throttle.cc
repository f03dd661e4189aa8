#include "common/log_throttle.h"

namespace bmad::log {

bool Throttle::Allow(int64_t now_ns, uint64_t* unsaid) {
  if (said_any_ && now_ns - said_ns_ < interval_ns_) {
    ++unsaid_;
    return false;
  }
  *unsaid = unsaid_;
  unsaid_ = 0;
  said_any_ = true;
  said_ns_ = now_ns;
  return true;
}

}  // namespace bmad::log
