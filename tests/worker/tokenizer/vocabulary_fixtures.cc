#include "tests/worker/tokenizer/vocabulary_fixtures.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "tests/support/paths.h"

namespace bmad::tokenizer::testing {

Result<std::unique_ptr<gguf::GgufFile>> OpenSharedModel(const std::string& file_name) {
  return gguf::GgufFile::Open(bmad::testing::SharedModelsDir() + "/" + file_name);
}

const Tokenizer& SharedTokenizer(const std::string& file_name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Tokenizer>& slot = cache[file_name];
  if (!slot) {
    Result<std::unique_ptr<gguf::GgufFile>> file = OpenSharedModel(file_name);
    // A missing shared model makes every test that needs it meaningless: stop loudly.
    if (!file.ok()) AbortOnErrorResult(file.status());
    Result<Tokenizer> tokenizer = LoadTokenizer(**file);
    if (!tokenizer.ok()) AbortOnErrorResult(tokenizer.status());
    slot = std::make_unique<Tokenizer>(std::move(tokenizer).value());
  }
  return *slot;
}

namespace {

// `base`'s metadata with `edits` applied, then `more`, in `writer`.
Status FillRewrittenVocabulary(const gguf::GgufFile& base, const std::vector<TokenEdit>& edits,
                               const std::function<void(gguf::GgufWriter&)>& more, gguf::GgufWriter& writer) {
  for (const auto& [key, value] : base.metadata()) {
    BMAD_RETURN_IF_ERROR(writer.SetValue(key, value));
  }
  if (!edits.empty()) {
    BMAD_ASSIGN_OR_RETURN(std::vector<std::string_view> views,
                          base.GetStringArray("tokenizer.ggml.tokens"));
    BMAD_ASSIGN_OR_RETURN(std::vector<int64_t> raw_types,
                          base.GetIntArray("tokenizer.ggml.token_type"));
    std::vector<std::string> texts(views.begin(), views.end());
    std::vector<int32_t> types(raw_types.begin(), raw_types.end());
    for (const TokenEdit& edit : edits) {
      texts.at(edit.id) = edit.text;
      types.at(edit.id) = static_cast<int32_t>(edit.type);
    }
    writer.SetStringArray("tokenizer.ggml.tokens", texts);
    writer.SetInt32Array("tokenizer.ggml.token_type", types);
  }
  if (more) more(writer);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<gguf::GgufFile>> RewriteVocabulary(
    const gguf::GgufFile& base, const std::vector<TokenEdit>& edits,
    const std::function<void(gguf::GgufWriter&)>& more) {
  gguf::GgufWriter writer;
  BMAD_RETURN_IF_ERROR(FillRewrittenVocabulary(base, edits, more, writer));
  BMAD_ASSIGN_OR_RETURN(std::string bytes, writer.WriteToString());
  return gguf::GgufFile::FromBytes(std::move(bytes), "rewritten-" + base.path());
}

Status WriteRewrittenModel(const gguf::GgufFile& base, const std::vector<TokenEdit>& edits,
                           const std::string& path, const std::function<void(gguf::GgufWriter&)>& more) {
  gguf::GgufWriter writer;
  BMAD_RETURN_IF_ERROR(FillRewrittenVocabulary(base, edits, more, writer));
  for (const gguf::TensorInfo& t : base.tensors()) {
    BMAD_RETURN_IF_ERROR(writer.AddTensor(t.name, t.shape, static_cast<gguf::TensorType>(t.type),
                                          std::vector<uint8_t>(t.data, t.data + t.nbytes)));
  }
  return writer.WriteFile(path);
}

std::vector<TokenEdit> SpecialTokenEdits() {
  return {{490, "<|im_end|>", TokenType::kNormal},
          {491, "<tool>", TokenType::kUserDefined},
          {492, "<tool_call>", TokenType::kUserDefined},
          {493, "<|fim_pad|>", TokenType::kNormal},
          {494, "ab", TokenType::kUserDefined},
          {510, "<ctl>", TokenType::kControl},
          {511, "", TokenType::kNormal}};
}

std::vector<TokenEdit> Phi3TokenEdits() {
  std::vector<TokenEdit> edits = SpecialTokenEdits();
  edits.push_back({489, "<|endoftext|>", TokenType::kControl});
  return edits;
}

}  // namespace bmad::tokenizer::testing
