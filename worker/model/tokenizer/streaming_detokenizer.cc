#include "worker/model/tokenizer/streaming_detokenizer.h"

#include <string_view>

#include "worker/model/tokenizer/utf8.h"

namespace bmad::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool decodes_sequence_start)
    : tokenizer_(&tokenizer),
      decodes_sequence_start_(decodes_sequence_start),
      at_start_(decodes_sequence_start) {}

std::string StreamingDetokenizer::Feed(int32_t id) {
  // Same rule as Tokenizer::Decode: only the sequence's first token, even an empty one.
  const std::string piece = at_start_ ? std::string(tokenizer_->SequenceStartPiece(id)) : tokenizer_->TokenPiece(id);
  at_start_ = false;
  pending_.append(piece);

  std::string out;
  const std::string_view bytes = pending_;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Scan scan = ScanUtf8(bytes.substr(pos));
    if (scan.status == Utf8Status::kIncomplete) break;  // held for the next token
    if (scan.status == Utf8Status::kComplete) {
      out.append(bytes.substr(pos, scan.length));
    } else {
      out.append(kReplacementCharacter);
    }
    pos += scan.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacementCharacter);
  pending_.clear();
  at_start_ = decodes_sequence_start_;
  return out;
}

}  // namespace bmad::tokenizer
