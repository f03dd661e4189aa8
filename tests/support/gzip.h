// Gzip-compressed bytes, for tests that send compressed request bodies (link ZLIB::ZLIB).
#pragma once

#include <zlib.h>

#include <string>
#include <string_view>

namespace bmad::testing {

// `bytes` as one gzip member, at the best compression (so a run of one byte shrinks a
// thousandfold: a decompression bomb). Empty when zlib fails.
inline std::string Gzip(std::string_view bytes) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&z, static_cast<uLong>(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const bool done = deflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(done ? z.total_out : 0);
  deflateEnd(&z);
  return out;
}

}  // namespace bmad::testing
