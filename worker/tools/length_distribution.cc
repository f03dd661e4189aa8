#include "worker/tools/length_distribution.h"

#include <algorithm>
#include <charconv>

namespace bmad::tools {
namespace {

bool ParseInt(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

Result<LengthDistribution> LengthDistribution::Parse(const std::string& text, const std::string& flag) {
  LengthDistribution d;
  d.text_ = text;
  auto bad = [&] {
    return InvalidArgument(flag + " expects N, A-B or A,B,C (token counts from 1 to " +
                           std::to_string(kMaxLength) + "), got '" + text + "'");
  };
  auto out_of_range = [](int64_t v) { return v < 1 || v > kMaxLength; };
  if (text.find(',') != std::string::npos) {
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(',', start);
      if (end == std::string::npos) end = text.size();
      int64_t v = 0;
      if (!ParseInt(std::string_view(text).substr(start, end - start), &v) || out_of_range(v)) return bad();
      d.choices_.push_back(v);
      start = end + 1;
    }
    return d;
  }
  if (const size_t dash = text.find('-'); dash != std::string::npos) {
    if (!ParseInt(std::string_view(text).substr(0, dash), &d.low_) ||
        !ParseInt(std::string_view(text).substr(dash + 1), &d.high_) || out_of_range(d.low_) ||
        out_of_range(d.high_) || d.high_ < d.low_) {
      return bad();
    }
    return d;
  }
  if (!ParseInt(text, &d.low_) || out_of_range(d.low_)) return bad();
  d.high_ = d.low_;
  return d;
}

int64_t LengthDistribution::Sample(std::mt19937_64& rng) const {
  if (!choices_.empty()) return choices_[rng() % choices_.size()];
  return low_ + static_cast<int64_t>(rng() % static_cast<uint64_t>(high_ - low_ + 1));
}

int64_t LengthDistribution::max() const {
  return choices_.empty() ? high_ : *std::max_element(choices_.begin(), choices_.end());
}

}  // namespace bmad::tools
