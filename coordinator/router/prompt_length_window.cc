#include "coordinator/router/prompt_length_window.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace bmad::coord {

PromptLengthWindow::PromptLengthWindow(int64_t capacity, double quantile)
    : capacity_(static_cast<size_t>(std::max<int64_t>(capacity, 1))),
      quantile_(std::isnan(quantile) ? 1.0 : std::clamp(quantile, 0.0, 1.0)) {}

size_t PromptLengthWindow::Rank() const {
  const size_t n = ring_.size();
  if (n == 0) return 0;
  // The small slack keeps 0.7 * 10 (6.9999...) or 0.8 * 10 (8.0000...1) from moving the rank
  // by one through rounding.
  const double k = std::ceil(quantile_ * static_cast<double>(n) - 1e-9);
  return static_cast<size_t>(std::clamp(k, 1.0, static_cast<double>(n)));
}

void PromptLengthWindow::Add(int64_t length) {
  length = std::max<int64_t>(length, 0);
  if (ring_.size() == capacity_) {
    // Every element of upper_ is >= every element of lower_, so a value not above lower_'s
    // largest is certainly in lower_ (one equal to it may be in both; either copy will do).
    const int64_t evicted = ring_[oldest_];
    if (!lower_.empty() && evicted <= *lower_.rbegin()) {
      lower_.erase(lower_.find(evicted));
    } else {
      upper_.erase(upper_.find(evicted));
    }
    ring_[oldest_] = length;
    oldest_ = (oldest_ + 1) % capacity_;
  } else {
    ring_.push_back(length);
  }
  // Keep every element of lower_ <= every element of upper_ (lower_ may be empty here, after
  // an eviction, so it is upper_'s smallest that decides).
  if (!upper_.empty() && length >= *upper_.begin()) {
    upper_.insert(length);
  } else {
    lower_.insert(length);
  }
  Rebalance();
  ++total_added_;
}

void PromptLengthWindow::Rebalance() {
  const size_t k = Rank();
  // Node handles move elements between the sets without allocating.
  while (lower_.size() > k) upper_.insert(lower_.extract(std::prev(lower_.end())));
  while (lower_.size() < k && !upper_.empty()) lower_.insert(upper_.extract(upper_.begin()));
}

std::optional<int64_t> PromptLengthWindow::Quantile() const {
  if (lower_.empty()) return std::nullopt;
  return *lower_.rbegin();
}

}  // namespace bmad::coord
