// libFuzzer: Decode must never crash, leak or hit undefined behaviour on any bytes, and every
// message it accepts must encode, decode and encode again to the same bytes (bytes, not ==,
// because a float field may hold NaN).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/proto/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bmad::Result<bmad::proto::Message> decoded = bmad::proto::Decode(data, size, 1 << 20);
  if (!decoded.ok()) return 0;
  const std::string again = bmad::proto::Encode(*decoded);
  bmad::Result<bmad::proto::Message> round = bmad::proto::Decode(again.data(), again.size());
  if (!round.ok() || bmad::proto::Encode(*round) != again) std::abort();
  return 0;
}
