// Vocabularies for the tokenizer tests: the real ones in shared/models, and variants of
// stories260K.gguf rebuilt in memory with a few tokens renamed or keys changed (the same edits
// were applied to files that llama.cpp tokenized to produce the expected ids).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/model/tokenizer/vocabulary.h"

namespace bmad::tokenizer::testing {

inline constexpr char kLlama2File[] = "llama-2-tiny-random.gguf";  // the Llama-2 32k vocabulary
inline constexpr char kStoriesFile[] = "stories260K.gguf";         // a 512-token vocabulary

Result<std::unique_ptr<gguf::GgufFile>> OpenSharedModel(const std::string& file_name);
// The tokenizer of a shared model, loaded once per process (tests only read it).
const Tokenizer& SharedTokenizer(const std::string& file_name);

struct TokenEdit {
  int32_t id;
  std::string text;
  TokenType type;
};

// `base`'s metadata (tensors are left out: the vocabulary does not need them) with `edits`
// applied to tokenizer.ggml.tokens/token_type, then `more` applied to the writer.
Result<std::unique_ptr<gguf::GgufFile>> RewriteVocabulary(
    const gguf::GgufFile& base, const std::vector<TokenEdit>& edits,
    const std::function<void(gguf::GgufWriter&)>& more = {});

// `base` with `edits` applied to its vocabulary, then `more` to its metadata, tensors and all,
// as a GGUF file at `path`.
Status WriteRewrittenModel(const gguf::GgufFile& base, const std::vector<TokenEdit>& edits,
                           const std::string& path, const std::function<void(gguf::GgufWriter&)>& more = {});

// stories260K with special tokens of every kind (user-defined "<tool>", "<tool_call>", "ab"; a
// control "<ctl>"; "<|im_end|>" and "<|fim_pad|>" typed normal; an empty text at 511).
std::vector<TokenEdit> SpecialTokenEdits();
// SpecialTokenEdits plus a control "<|endoftext|>" at 489 (llama.cpp requires it for Phi-3).
std::vector<TokenEdit> Phi3TokenEdits();

}  // namespace bmad::tokenizer::testing
