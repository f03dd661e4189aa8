#include "worker/model/tokenizer/vocabulary.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>
#include <unordered_set>

#include "common/log.h"
#include "common/utf8.h"

namespace bmad::tokenizer {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// llama.cpp's names for the pre-tokenizers implemented here (llama-vocab.cpp).
constexpr std::string_view kLlama3PreNames[] = {"llama3",   "llama-v3",  "llama-bpe",
                                                "falcon3",  "falcon-h1", "pixtral",
                                                "midm-2.0", "lfm2",      "jina-v5-nano"};
constexpr std::string_view kQwen2PreNames[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2"};

// Texts llama.cpp treats as "ends generation" whatever the file says (llama-vocab.cpp builds
// `special_eog_ids` from this list; see https://github.com/ggml-org/llama.cpp/issues/9606).
// clang-format off
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>"};
// clang-format on

// End-of-turn texts (a subset of the list above); the lowest such id becomes eot_id when the
// file names none.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",           "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",      "<EOT>",      "_<EOT>",  "[EOT]",         "<end_of_utterance>",
    "<｜end▁of▁sentence｜>"};

// Fill-in-the-middle markers: llama.cpp makes them control tokens; the pad, repo and file
// separator markers also end generation.
constexpr std::string_view kFimMarkerTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>",    "<fim_prefix>",    "<｜fim▁begin｜>", "<PRE>",
    "▁<PRE>",         "<|code_prefix|>", "<|prefix|>",      "<|fim_suffix|>",  "<fim-suffix>",
    "<fim_suffix>",   "<｜fim▁hole｜>",  "<SUF>",           "▁<SUF>",          "<|code_suffix|>",
    "<|suffix|>",     "<|fim_middle|>",  "<fim-middle>",    "<fim_middle>",    "<｜fim▁end｜>",
    "<MID>",          "▁<MID>",          "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimEndOfGenerationTexts[] = {
    "<|fim_pad|>",  "<fim-pad>",     "<fim_pad>",  "<PAD>",  "[PAD]",       // pad
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",  // repo
    "<|file_sep|>"};                                                        // file sep

template <size_t N>
bool IsOneOf(std::string_view text, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

bool IsHexDigit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// "<0xHH>" is the only spelling of a byte token llama.cpp decodes (it reads text[3..4] as hex).
bool IsByteTokenText(std::string_view text) {
  return text.size() == 6 && text.substr(0, 3) == "<0x" && IsHexDigit(text[3]) &&
         IsHexDigit(text[4]) && text[5] == '>';
}

// Reads an optional token id key into `id`; a key of another type is an error. An id outside
// the vocabulary leaves `id` at its default, with a warning: llama.cpp does the same ("bad
// special token"), and real files have it (a padding id one past a vocabulary that was never
// resized), so refusing them would refuse models llama.cpp serves.
Status ReadOptionalId(const gguf::GgufFile& file, std::string_view key, int32_t size, int32_t* id) {
  if (!file.Has(key)) return Status::Ok();
  Result<int64_t> value = file.GetInt(key);
  if (!value.ok()) return value.status();
  if (*value < 0 || *value >= size) {
    log::Warn("tokenizer", "special token id outside the vocabulary: keeping the default",
              {{"file", file.path()}, {"key", std::string(key)}, {"id", *value}, {"vocabulary", size},
               {"default", *id == kNoToken ? std::string("none") : std::to_string(*id)}});
    return Status::Ok();
  }
  *id = static_cast<int32_t>(*value);
  return Status::Ok();
}

Status ReadOptionalBool(const gguf::GgufFile& file, std::string_view key, bool* out) {
  if (!file.Has(key)) return Status::Ok();
  Result<bool> value = file.GetBool(key);
  if (!value.ok()) return value.status();
  *out = *value;
  return Status::Ok();
}

Status CheckArrayLength(const gguf::GgufFile& file, std::string_view key, size_t length,
                        size_t expected) {
  if (length == expected) return Status::Ok();
  return DataLoss(file.path() + ": metadata key '" + std::string(key) + "' has " +
                  std::to_string(length) + " entries but '" + std::string(kTokensKey) + "' has " +
                  std::to_string(expected));
}

// A type outside GGUF's (0 undefined .. 6 byte) is a broken file: taken as undefined, every
// piece decoded to nothing and the model "generated" empty text.
Result<TokenType> TokenTypeFromFile(const gguf::GgufFile& file, size_t id, int64_t raw) {
  if (raw < 0 || raw > static_cast<int64_t>(TokenType::kByte)) {
    return DataLoss(file.path() + ": metadata key '" + std::string(kTypesKey) + "': token " + std::to_string(id) +
                    " has type " + std::to_string(raw) + " (the types are 0 to " +
                    std::to_string(static_cast<int>(TokenType::kByte)) + ")");
  }
  return static_cast<TokenType>(raw);
}

// llama.cpp's text-based clean-up after the ids are read: control-looking tokens become
// control tokens, end-of-generation tokens are collected, and a missing eot id is detected.
void ApplyWellKnownTexts(Vocabulary& v) {
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string& text = v.texts[id];
    const bool ends_generation =
        IsOneOf(text, kEndOfGenerationTexts) || IsOneOf(text, kFimEndOfGenerationTexts);
    if (ends_generation || IsOneOf(text, kFimMarkerTexts)) v.types[id] = TokenType::kControl;
    if (ends_generation) v.end_of_generation_ids.push_back(id);
    // As llama.cpp: only when no valid eot id was read (absent, or outside the vocabulary).
    if (v.eot_id == kNoToken && IsOneOf(text, kEndOfTurnTexts)) v.eot_id = id;
  }
  for (int32_t id : {v.eos_id, v.eot_id, v.eom_id}) {
    if (id != kNoToken) v.end_of_generation_ids.push_back(id);
  }
  std::sort(v.end_of_generation_ids.begin(), v.end_of_generation_ids.end());
  v.end_of_generation_ids.erase(
      std::unique(v.end_of_generation_ids.begin(), v.end_of_generation_ids.end()),
      v.end_of_generation_ids.end());
}

// Phi-3's special tokens eat the whitespace after them (llama.cpp sets RSTRIP by model name).
void ApplyPhi3Attributes(Vocabulary& v, std::string_view model_name) {
  std::string lower(model_name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("phi-3") == std::string::npos && lower.find("phi3") == std::string::npos) return;
  for (int32_t id = 0; id < v.size(); ++id) {
    const TokenType type = v.types[id];
    const std::string& text = v.texts[id];
    const bool special = type == TokenType::kControl || type == TokenType::kUserDefined ||
                         type == TokenType::kUnknown;
    const bool exempt = text == "<unk>" || text == "<s>" || text == "<|endoftext|>";
    if ((special || text == "</s>") && !exempt) v.rstrip_ids.push_back(id);
  }
}

// The "gpt2" parts: pre-tokenizer, merges and llama.cpp's BPE defaults.
Status ReadBytePairEncoding(const gguf::GgufFile& file, Vocabulary& v) {
  v.model = TokenizerModel::kBytePairEncoding;
  v.bos_id = 11;
  v.eos_id = 11;
  v.unk_id = kNoToken;
  v.add_bos = false;
  v.add_space_prefix = false;

  std::string_view pre;
  if (file.Has(kPreKey)) {
    Result<std::string_view> value = file.GetString(kPreKey);
    if (!value.ok()) return value.status();
    pre = *value;
  }
  if (IsOneOf(pre, kLlama3PreNames)) {
    v.pre_tokenizer = PreTokenizer::kLlama3;
    v.add_bos = true;
    v.clean_spaces = true;
  } else if (IsOneOf(pre, kQwen2PreNames)) {
    v.pre_tokenizer = PreTokenizer::kQwen2;
  } else {
    return Unimplemented(
        file.path() + ": " +
        (pre.empty() ? "the byte-level BPE vocabulary names no pre-tokenizer ('" +
                           std::string(kPreKey) + "' is missing)"
                     : "BPE pre-tokenizer " + QuotedText(pre) + " ('" + std::string(kPreKey) +
                           "') is not supported") +
        " (supported: the Llama-3 family, e.g. 'llama-bpe', and the Qwen2 family, e.g. 'qwen2')");
  }

  Result<std::vector<std::string_view>> merges = file.GetStringArray(kMergesKey);
  if (!merges.ok()) return merges.status();
  v.merges.assign(merges->begin(), merges->end());
  return Status::Ok();
}

}  // namespace

Status ValidateVocabulary(const Vocabulary& v) {
  const size_t n = v.texts.size();
  if (n == 0) return InvalidArgument("the vocabulary has no tokens");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("the vocabulary has " + std::to_string(n) +
                           " tokens, more than token ids can address");
  }
  if (v.scores.size() != n || v.types.size() != n) {
    return InvalidArgument("the vocabulary has " + std::to_string(n) + " texts but " +
                           std::to_string(v.scores.size()) + " scores and " +
                           std::to_string(v.types.size()) + " types");
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = v.texts[id];
    if (text.empty()) return InvalidArgument("token " + std::to_string(id) + " has empty text");
    if (!seen.insert(text).second) {
      return InvalidArgument("token " + std::to_string(id) + " repeats the text " + QuotedText(text));
    }
    // NaN would break the strict ordering the merge queue needs.
    if (std::isnan(v.scores[id])) {
      return InvalidArgument("token " + std::to_string(id) + " has a NaN score");
    }
    if (v.types[id] == TokenType::kByte && !IsByteTokenText(text)) {
      return InvalidArgument("byte token " + std::to_string(id) + " is spelled " + QuotedText(text) +
                             ", expected <0xHH>");
    }
  }
  const auto check_id = [&](const char* what, int32_t id) -> Status {
    if (id == kNoToken || (id >= 0 && static_cast<size_t>(id) < n)) return Status::Ok();
    return InvalidArgument(std::string(what) + " id " + std::to_string(id) +
                           " is outside the vocabulary of " + std::to_string(n) + " tokens");
  };
  BMAD_RETURN_IF_ERROR(check_id("bos", v.bos_id));
  BMAD_RETURN_IF_ERROR(check_id("eos", v.eos_id));
  BMAD_RETURN_IF_ERROR(check_id("unk", v.unk_id));
  BMAD_RETURN_IF_ERROR(check_id("pad", v.pad_id));
  BMAD_RETURN_IF_ERROR(check_id("eot", v.eot_id));
  BMAD_RETURN_IF_ERROR(check_id("eom", v.eom_id));
  for (int32_t id : v.end_of_generation_ids) {
    BMAD_RETURN_IF_ERROR(check_id("end-of-generation", id));
  }
  for (int32_t id : v.rstrip_ids) BMAD_RETURN_IF_ERROR(check_id("rstrip", id));
  // Ranks are compared as floats, exact up to 2^24.
  if (v.merges.size() > (size_t{1} << 24)) {
    return InvalidArgument("the vocabulary has " + std::to_string(v.merges.size()) +
                           " merges, more than 16777216");
  }
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& merge = v.merges[i];
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos || space + 1 == merge.size()) {
      return InvalidArgument("merge " + std::to_string(i) + " is " + QuotedText(merge) +
                             ", expected two parts split by a space");
    }
  }
  if (v.add_bos && v.bos_id == kNoToken)
    return InvalidArgument("add_bos is set but there is no bos id");
  if (v.add_eos && v.eos_id == kNoToken)
    return InvalidArgument("add_eos is set but there is no eos id");
  return Status::Ok();
}

Result<Vocabulary> LoadVocabulary(const gguf::GgufFile& file) {
  Result<std::string_view> model = file.GetString(kModelKey);
  if (!model.ok()) return model.status();
  Vocabulary v;
  if (*model == "gpt2") {
    BMAD_RETURN_IF_ERROR(ReadBytePairEncoding(file, v));
  } else if (*model != "llama") {
    return Unimplemented(file.path() + ": tokenizer model " + QuotedText(*model) +
                         " is not supported (only 'llama', SentencePiece with scores, and "
                         "'gpt2', byte-level BPE)");
  }

  Result<std::vector<std::string_view>> texts = file.GetStringArray(kTokensKey);
  if (!texts.ok()) return texts.status();
  const size_t n = texts->size();
  if (n == 0)
    return DataLoss(file.path() + ": metadata key '" + std::string(kTokensKey) + "' is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return DataLoss(file.path() + ": " + std::to_string(n) +
                    " tokens are more than ids can address");
  }

  v.texts.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    // llama.cpp renames empty texts rather than refusing the file.
    std::string_view text = (*texts)[id];
    v.texts.push_back(text.empty() ? "[EMPTY_" + std::to_string(id) + "]" : std::string(text));
  }

  v.scores.assign(n, 0.0f);
  if (file.Has(kScoresKey)) {
    Result<std::vector<double>> scores = file.GetFloatArray(kScoresKey);
    if (!scores.ok()) return scores.status();
    BMAD_RETURN_IF_ERROR(CheckArrayLength(file, kScoresKey, scores->size(), n));
    for (size_t id = 0; id < n; ++id) v.scores[id] = static_cast<float>((*scores)[id]);
  }

  v.types.assign(n, TokenType::kNormal);
  if (file.Has(kTypesKey)) {
    Result<std::vector<int64_t>> types = file.GetIntArray(kTypesKey);
    if (!types.ok()) return types.status();
    BMAD_RETURN_IF_ERROR(CheckArrayLength(file, kTypesKey, types->size(), n));
    for (size_t id = 0; id < n; ++id) {
      BMAD_ASSIGN_OR_RETURN(v.types[id], TokenTypeFromFile(file, id, (*types)[id]));
    }
  }

  const int32_t size = v.size();
  // The defaults (llama: bos 1, eos 2, unk 0; gpt2: bos = eos = 11) only hold for
  // vocabularies big enough to have those ids.
  if (v.eos_id >= size) v.eos_id = kNoToken;
  if (v.bos_id >= size) v.bos_id = kNoToken;
  BMAD_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.bos_token_id", size, &v.bos_id));
  BMAD_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eos_token_id", size, &v.eos_id));
  BMAD_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.unknown_token_id", size, &v.unk_id));
  BMAD_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.padding_token_id", size, &v.pad_id));
  BMAD_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eot_token_id", size, &v.eot_id));
  BMAD_RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eom_token_id", size, &v.eom_id));
  for (std::string_view key : {"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
                               "tokenizer.ggml.fim_sep_token_id"}) {
    int32_t id = kNoToken;
    BMAD_RETURN_IF_ERROR(ReadOptionalId(file, key, size, &id));
    if (id != kNoToken) v.end_of_generation_ids.push_back(id);
  }
  BMAD_RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_bos_token", &v.add_bos));
  BMAD_RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_eos_token", &v.add_eos));
  BMAD_RETURN_IF_ERROR(
      ReadOptionalBool(file, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));

  ApplyWellKnownTexts(v);
  if (file.Has("general.name")) {
    // Of the wrong type the file is broken, as the model's loader says too (llama_config.cc).
    Result<std::string_view> name = file.GetString("general.name");
    if (!name.ok()) return name.status();
    ApplyPhi3Attributes(v, *name);
  }

  if (Status s = ValidateVocabulary(v); !s.ok()) return DataLoss(file.path() + ": " + s.message());
  return v;
}

}  // namespace bmad::tokenizer
