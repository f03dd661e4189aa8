// Synthesized models: the keys, types and shapes llama.cpp expects, deterministic weights with
// the intended values, the vocabulary, and the spec's validation.
#include "worker/model/synth/model_synth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/k_quants.h"
#include "kernels/legacy_quants.h"
#include "kernels/q8_0.h"
#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/synth/synth_weights.h"

namespace bmad::synth {
namespace {

using gguf::GgufFile;
using gguf::TensorInfo;
using gguf::ValueType;
using ::testing::HasSubstr;

SynthSpec SmallSpec(SynthDtype dtype) {
  SynthSpec spec;
  spec.layers = 2;
  spec.dim = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 96;
  spec.vocab = 300;
  spec.ctx = 128;
  spec.dtype = dtype;
  spec.seed = 7;
  spec.name = "small";
  return spec;
}

// A one-layer model that takes the Llama 2 vocabulary (32000 tokens) of llama-2-tiny-random.
SynthSpec CopiedVocabularySpec(SynthDtype dtype) {
  SynthSpec spec = SmallSpec(dtype);
  spec.layers = 1;
  spec.dim = 32;
  spec.heads = 2;
  spec.kv_heads = 2;
  spec.ffn = 32;
  spec.vocab = 0;
  spec.vocab_from = bmad::testing::TinyRandomModelPath();
  return spec;
}

std::string BuildBytes(const SynthSpec& spec) {
  gguf::GgufWriter writer;
  Status s = BuildSynthModel(spec, writer);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto bytes = writer.WriteToString();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

std::unique_ptr<GgufFile> Build(const SynthSpec& spec) {
  auto file = GgufFile::FromBytes(BuildBytes(spec), "synth.gguf");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

// The values the generator intended for one matrix of a built model.
std::vector<float> Intended(const SynthSpec& spec, const TensorInfo& t, float stddev) {
  return RandomMatrixValues({TensorSeed(spec.seed, t.name), t.shape[0], t.shape[1], stddev});
}

std::vector<float> F32Data(const TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.elements()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

TEST(ModelSynthTest, WritesLlamaKeysWithTheTypesLlamaCppRequires) {
  auto file = Build(SmallSpec(SynthDtype::kF16));
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(*file->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file->GetString("general.name"), "small");
  const std::vector<std::pair<std::string, int64_t>> uint32_keys = {
      {"general.file_type", 1},
      {"llama.context_length", 128},
      {"llama.embedding_length", 64},
      {"llama.block_count", 2},
      {"llama.feed_forward_length", 96},
      {"llama.rope.dimension_count", 16},
      {"llama.attention.head_count", 4},
      {"llama.attention.head_count_kv", 2},
      {"llama.vocab_size", 300},
      {"tokenizer.ggml.bos_token_id", 1},
      {"tokenizer.ggml.eos_token_id", 2},
      {"tokenizer.ggml.unknown_token_id", 0},
  };
  for (const auto& [key, value] : uint32_keys) {
    ASSERT_TRUE(file->Has(key)) << key;
    EXPECT_EQ(file->Find(key)->type, ValueType::kUint32) << key;
    EXPECT_EQ(*file->GetInt(key), value) << key;
  }
  EXPECT_EQ(file->Find("llama.attention.layer_norm_rms_epsilon")->type, ValueType::kFloat32);
  EXPECT_EQ(*file->GetFloat("llama.attention.layer_norm_rms_epsilon"),
            static_cast<double>(1e-5f));
  EXPECT_EQ(*file->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(*file->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(file->Find("tokenizer.ggml.scores")->array_type, ValueType::kFloat32);
  EXPECT_EQ(file->Find("tokenizer.ggml.token_type")->array_type, ValueType::kInt32);
  EXPECT_EQ(file->GetStringArray("tokenizer.ggml.tokens")->size(), 300u);
  EXPECT_FALSE(file->Has("general.alignment"));
  EXPECT_EQ(file->alignment(), 32u);

  EXPECT_EQ(*Build(SmallSpec(SynthDtype::kF32))->GetInt("general.file_type"), 0);
  EXPECT_EQ(*Build(SmallSpec(SynthDtype::kQ8_0))->GetInt("general.file_type"), 7);
}

TEST(ModelSynthTest, WritesEveryTensorWithLlamaCppNamesAndShapes) {
  const SynthSpec spec = SmallSpec(SynthDtype::kQ8_0);
  auto file = Build(spec);
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(file->tensors().size(), 3u + 9u * 2u);
  const std::vector<std::pair<std::string, std::string>> matrices = {
      {"token_embd.weight", "[64, 300]"}, {"output.weight", "[64, 300]"},
      {"attn_q.weight", "[64, 64]"},      {"attn_k.weight", "[64, 32]"},
      {"attn_v.weight", "[64, 32]"},      {"attn_output.weight", "[64, 64]"},
      {"ffn_gate.weight", "[64, 96]"},    {"ffn_up.weight", "[64, 96]"},
      {"ffn_down.weight", "[96, 64]"}};
  for (const auto& [name, shape] : matrices) {
    const bool global = name == "token_embd.weight" || name == "output.weight";
    for (int layer = 0; layer < (global ? 1 : 2); ++layer) {
      const std::string full = global ? name : "blk." + std::to_string(layer) + "." + name;
      const TensorInfo* t = file->FindTensor(full);
      ASSERT_NE(t, nullptr) << full;
      EXPECT_EQ(t->ShapeString(), shape) << full;
      EXPECT_EQ(t->type_name(), "q8_0") << full;
    }
  }
  for (const std::string name : {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight",
                                 "blk.1.attn_norm.weight", "blk.1.ffn_norm.weight",
                                 "output_norm.weight"}) {
    const TensorInfo* t = file->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ShapeString(), "[64]");
    EXPECT_EQ(t->type_name(), "f32");
    EXPECT_EQ(F32Data(*t), std::vector<float>(64, 1.0f)) << name;
  }
  int64_t parameters = 0;
  for (const TensorInfo& t : file->tensors()) parameters += t.elements();
  EXPECT_EQ(parameters, SynthParameterCount(spec, 300));
}

TEST(ModelSynthTest, SameSeedIsByteIdenticalAnotherSeedDiffers) {
  const SynthSpec spec = SmallSpec(SynthDtype::kF16);
  const std::string a = BuildBytes(spec);
  EXPECT_EQ(a, BuildBytes(spec));
  SynthSpec other = spec;
  other.seed = 8;
  const std::string b = BuildBytes(other);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);

  // The file on disk is the same bytes.
  const std::string dir = bmad::testing::MakeTempDir("model_synth_");
  ASSERT_TRUE(SynthesizeModel(spec, dir + "/m.gguf").ok());
  std::ifstream in(dir + "/m.gguf", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), a);
  std::filesystem::remove_all(dir);
}

TEST(ModelSynthTest, F32WeightsAreTheIntendedValuesWithTheIntendedSpread) {
  const SynthSpec spec = SmallSpec(SynthDtype::kF32);
  auto file = Build(spec);
  ASSERT_NE(file, nullptr);
  const auto stats = [](const std::vector<float>& v) {
    double sum = 0, sq = 0;
    for (float x : v) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / static_cast<double>(v.size());
    return std::make_pair(mean, std::sqrt(sq / static_cast<double>(v.size()) - mean * mean));
  };
  const TensorInfo* embd = file->FindTensor("token_embd.weight");
  const std::vector<float> embd_values = F32Data(*embd);
  EXPECT_EQ(embd_values, Intended(spec, *embd, 1.0f));
  auto [mean, stddev] = stats(embd_values);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(stddev, 1.0, 0.03);
  for (float x : embd_values) EXPECT_LT(std::fabs(x), std::sqrt(3.0f));

  const TensorInfo* down = file->FindTensor("blk.1.ffn_down.weight");
  const std::vector<float> down_values = F32Data(*down);
  EXPECT_EQ(down_values, Intended(spec, *down, 1.0f / std::sqrt(96.0f)));
  std::tie(mean, stddev) = stats(down_values);
  EXPECT_NEAR(stddev, 1.0 / std::sqrt(96.0), 0.005);
  // Every tensor draws its own stream.
  EXPECT_NE(F32Data(*file->FindTensor("blk.0.attn_q.weight")),
            F32Data(*file->FindTensor("blk.1.attn_q.weight")));
}

TEST(ModelSynthTest, F16WeightsAreTheIntendedValuesRounded) {
  const SynthSpec spec = SmallSpec(SynthDtype::kF16);
  auto file = Build(spec);
  ASSERT_NE(file, nullptr);
  const TensorInfo* t = file->FindTensor("blk.0.attn_k.weight");
  const std::vector<float> intended = Intended(spec, *t, 1.0f / 8.0f);
  std::vector<uint16_t> halves(intended.size());
  ASSERT_EQ(t->nbytes, halves.size() * 2);
  std::memcpy(halves.data(), t->data, t->nbytes);
  for (size_t i = 0; i < halves.size(); ++i) {
    ASSERT_EQ(HalfToFloat(halves[i]), RoundToHalf(intended[i])) << i;
  }
}

TEST(ModelSynthTest, Q8_0BlocksDequantizeCloseToTheIntendedValues) {
  const SynthSpec spec = SmallSpec(SynthDtype::kQ8_0);
  auto file = Build(spec);
  ASSERT_NE(file, nullptr);
  for (const std::string name : {"token_embd.weight", "blk.1.ffn_down.weight"}) {
    const TensorInfo* t = file->FindTensor(name);
    ASSERT_NE(t, nullptr);
    const float stddev = name == "token_embd.weight" ? 1.0f : 1.0f / std::sqrt(96.0f);
    const std::vector<float> intended = Intended(spec, *t, stddev);
    const size_t blocks = intended.size() / kernels::kQ8_0Block;
    ASSERT_EQ(t->nbytes, blocks * sizeof(kernels::BlockQ8_0));
    std::vector<kernels::BlockQ8_0> q(blocks);
    std::memcpy(q.data(), t->data, t->nbytes);
    std::vector<float> restored(intended.size());
    kernels::DequantizeRowQ8_0(q.data(), static_cast<int64_t>(intended.size()), restored.data());
    for (size_t b = 0; b < blocks; ++b) {
      float amax = 0;
      for (int j = 0; j < kernels::kQ8_0Block; ++j) {
        amax = std::max(amax, std::fabs(intended[b * 32 + j]));
      }
      // The scale is amax/127 rounded to F16; each value is within half a step of the exact
      // scale, plus what the scale's rounding costs at |q| <= 127.
      const float exact = amax / 127.0f;
      const float scale = HalfToFloat(q[b].scale);
      EXPECT_NEAR(scale, exact, exact * 1e-3f) << b;
      const float bound = 0.5f * exact + 127.0f * std::fabs(scale - exact) + 1e-6f;
      for (int j = 0; j < kernels::kQ8_0Block; ++j) {
        ASSERT_NEAR(restored[b * 32 + j], intended[b * 32 + j], bound)
            << name << " block " << b << " element " << j;
      }
    }
  }
}

// BF16, Q4_0, Q5_0, Q4_1 and Q5_1 files: llama.cpp's file_type, every matrix of the type, and
// each value within a rounding step of the intended one (BF16: within half a unit of its 8-bit
// mantissa).
TEST(ModelSynthTest, Bf16And32WeightBlockMatricesHoldTheIntendedValues) {
  for (const auto& [dtype, name, file_type] :
       {std::tuple{SynthDtype::kBF16, "bf16", 32}, std::tuple{SynthDtype::kQ4_0, "q4_0", 2},
        std::tuple{SynthDtype::kQ5_0, "q5_0", 8}, std::tuple{SynthDtype::kQ4_1, "q4_1", 3},
        std::tuple{SynthDtype::kQ5_1, "q5_1", 9}}) {
    SCOPED_TRACE(name);
    SynthSpec spec = SmallSpec(dtype);
    spec.dim = 64;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.ffn = 96;
    auto file = Build(spec);
    ASSERT_NE(file, nullptr);
    EXPECT_EQ(*file->GetInt("general.file_type"), file_type);
    for (const std::string tensor : {"token_embd.weight", "output.weight", "blk.0.attn_k.weight", "blk.0.ffn_down.weight"}) {
      const TensorInfo* t = file->FindTensor(tensor);
      ASSERT_NE(t, nullptr) << tensor;
      ASSERT_EQ(t->type_name(), name) << tensor;
      const float stddev = tensor == "token_embd.weight" ? 1.0f : 1.0f / std::sqrt(static_cast<float>(t->shape[0]));
      const std::vector<float> intended = Intended(spec, *t, stddev);
      const auto n = static_cast<int64_t>(intended.size());
      std::vector<float> restored(intended.size());
      if (dtype == SynthDtype::kBF16) {
        ASSERT_EQ(t->nbytes, intended.size() * 2);
        for (size_t i = 0; i < intended.size(); ++i) {
          uint16_t h;
          std::memcpy(&h, t->data + 2 * i, 2);
          restored[i] = Bf16ToFloat(h);
        }
      } else if (dtype == SynthDtype::kQ4_0) {
        ASSERT_EQ(t->nbytes, intended.size() / 32 * sizeof(kernels::BlockQ4_0));
        std::vector<kernels::BlockQ4_0> blocks(intended.size() / 32);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ4_0(blocks.data(), n, restored.data());
      } else if (dtype == SynthDtype::kQ5_0) {
        ASSERT_EQ(t->nbytes, intended.size() / 32 * sizeof(kernels::BlockQ5_0));
        std::vector<kernels::BlockQ5_0> blocks(intended.size() / 32);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ5_0(blocks.data(), n, restored.data());
      } else if (dtype == SynthDtype::kQ4_1) {
        ASSERT_EQ(t->nbytes, intended.size() / 32 * sizeof(kernels::BlockQ4_1));
        std::vector<kernels::BlockQ4_1> blocks(intended.size() / 32);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ4_1(blocks.data(), n, restored.data());
      } else {
        ASSERT_EQ(t->nbytes, intended.size() / 32 * sizeof(kernels::BlockQ5_1));
        std::vector<kernels::BlockQ5_1> blocks(intended.size() / 32);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ5_1(blocks.data(), n, restored.data());
      }
      // A _0 block's step is its largest magnitude / 8 (Q4_0) or / 16 (Q5_0), at most a / 8 or
      // a / 16 for uniform values over [-a, a]. Values round to the nearest step, except near
      // the opposite extreme of the largest one, which the levels (-8..7, -16..15) clip by a
      // step. A _1 block's step is its range / 15 or / 31 (at most 2a / 15, 2a / 31), and every
      // value rounds to the nearest (plus the F16 rounding of the min and the step).
      const float a = stddev * std::sqrt(3.0f);
      for (size_t i = 0; i < intended.size(); ++i) {
        const float tolerance = dtype == SynthDtype::kBF16   ? std::fabs(intended[i]) / 256
                                : dtype == SynthDtype::kQ4_0 ? a / 8
                                : dtype == SynthDtype::kQ5_0 ? a / 16
                                : dtype == SynthDtype::kQ4_1 ? a / 15 + a / 256
                                                             : a / 31 + a / 256;
        ASSERT_LE(std::fabs(restored[i] - intended[i]), tolerance * 1.001f) << tensor << " element " << i;
      }
    }
  }
}

// Q4_K_M and Q5_K_M put Q6_K where llama.cpp's presets do for a Llama model of 8 layers: the
// output, and attn_v and ffn_down of layers 0, 3, 6 and 7; every other matrix is Q4_K (Q5_K).
// Each block decodes to within a step of the intended values.
TEST(ModelSynthTest, KQuantMixAndBlocksAsLlamaCppLaysThemOut) {
  for (const SynthDtype dtype : {SynthDtype::kQ4_K_M, SynthDtype::kQ5_K_M}) {
    const std::string base = dtype == SynthDtype::kQ4_K_M ? "q4_K" : "q5_K";
    SCOPED_TRACE(base);
    SynthSpec spec = SmallSpec(dtype);
    spec.layers = 8;
    spec.dim = 256;
    spec.heads = 4;
    spec.kv_heads = 4;
    spec.ffn = 512;
    auto file = Build(spec);
    ASSERT_NE(file, nullptr);
    EXPECT_EQ(*file->GetInt("general.file_type"), dtype == SynthDtype::kQ4_K_M ? 15 : 17);
    EXPECT_EQ(file->FindTensor("output.weight")->type_name(), "q6_K");
    EXPECT_EQ(file->FindTensor("token_embd.weight")->type_name(), base);
    for (int layer = 0; layer < 8; ++layer) {
      const bool more_bits = layer == 0 || layer == 3 || layer == 6 || layer == 7;
      const std::string blk = "blk." + std::to_string(layer) + ".";
      for (const char* name : {"attn_v.weight", "ffn_down.weight"}) {
        EXPECT_EQ(file->FindTensor(blk + name)->type_name(), more_bits ? "q6_K" : base) << blk << name;
      }
      for (const char* name : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"}) {
        EXPECT_EQ(file->FindTensor(blk + name)->type_name(), base) << blk << name;
      }
    }
    for (const std::string name : {"token_embd.weight", "output.weight", "blk.1.ffn_down.weight", "blk.0.ffn_down.weight"}) {
      const TensorInfo* t = file->FindTensor(name);
      const int64_t in = t->shape[0];
      const float stddev = name == "token_embd.weight" ? 1.0f : 1.0f / std::sqrt(static_cast<float>(in));
      const std::vector<float> intended = Intended(spec, *t, stddev);
      std::vector<float> restored(intended.size());
      const bool q4 = t->type_name() == "q4_K", q5 = t->type_name() == "q5_K";
      ASSERT_EQ(t->nbytes, intended.size() / kernels::kQK_K *
                               (q4 ? sizeof(kernels::BlockQ4_K) : q5 ? sizeof(kernels::BlockQ5_K) : sizeof(kernels::BlockQ6_K)));
      const auto n = static_cast<int64_t>(intended.size());
      if (q4) {
        std::vector<kernels::BlockQ4_K> blocks(intended.size() / kernels::kQK_K);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ4_K(blocks.data(), n, restored.data());
      } else if (q5) {
        std::vector<kernels::BlockQ5_K> blocks(intended.size() / kernels::kQK_K);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ5_K(blocks.data(), n, restored.data());
      } else {
        std::vector<kernels::BlockQ6_K> blocks(intended.size() / kernels::kQK_K);
        std::memcpy(blocks.data(), t->data, t->nbytes);
        kernels::DequantizeRowQ6_K(blocks.data(), n, restored.data());
      }
      // Uniform values over [-a, a] (a = stddev * sqrt(3)): a step is at most 2a / 15 (Q4_K),
      // 2a / 31 (Q5_K) or a / 31 (Q6_K), and no value is further than a step from where it was
      // meant to be.
      const float a = stddev * std::sqrt(3.0f);
      const float step = q4 ? 2 * a / 15 : q5 ? 2 * a / 31 : a / 31;
      double squared = 0;
      for (size_t i = 0; i < intended.size(); ++i) {
        ASSERT_LE(std::fabs(restored[i] - intended[i]), step) << name << " element " << i;
        squared += double(restored[i] - intended[i]) * (restored[i] - intended[i]);
      }
      // On average far less: within half a step (rms of a uniform rounding error: step / sqrt(12)).
      EXPECT_LE(std::sqrt(squared / double(intended.size())), 0.5 * step) << name;
    }
  }
}

TEST(ModelSynthTest, CopiesTheVocabularyFromAnotherModel) {
  const std::string source_path = bmad::testing::TinyRandomModelPath();
  auto source = GgufFile::Open(source_path);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  SynthSpec spec = CopiedVocabularySpec(SynthDtype::kF32);
  auto file = Build(spec);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(*file->GetInt("llama.vocab_size"), 32000);
  EXPECT_EQ(file->FindTensor("token_embd.weight")->ShapeString(), "[32, 32000]");
  EXPECT_EQ(file->FindTensor("output.weight")->ShapeString(), "[32, 32000]");
  int copied = 0;
  for (const auto& [key, value] : (*source)->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ++copied;
    const gguf::MetadataValue* mine = file->Find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(mine->type, value.type) << key;
    EXPECT_EQ(mine->array_type, value.array_type) << key;
    EXPECT_TRUE(mine->scalar == value.scalar) << key;
    EXPECT_TRUE(mine->array == value.array) << key;
  }
  EXPECT_GE(copied, 7);
  EXPECT_EQ((*file->GetStringArray("tokenizer.ggml.tokens"))[9038], "\xe2\x96\x81Once");

  spec.vocab = 32000;  // equal to the source: fine
  EXPECT_NE(Build(spec), nullptr);
  spec.vocab = 512;
  gguf::GgufWriter writer;
  Status s = BuildSynthModel(spec, writer);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("32000"));
  EXPECT_THAT(s.message(), HasSubstr("llama-2-tiny-random.gguf"));
}

// Every tensor of `a` and `b` byte-identical, except output.weight; returns its two byte spans.
std::pair<std::span<const uint8_t>, std::span<const uint8_t>> SameButOutput(const GgufFile& a,
                                                                           const GgufFile& b) {
  for (const TensorInfo& t : a.tensors()) {
    if (t.name == "output.weight") continue;
    const TensorInfo* other = b.FindTensor(t.name);
    EXPECT_NE(other, nullptr) << t.name;
    if (other == nullptr) continue;
    EXPECT_EQ(0, std::memcmp(t.data, other->data, t.nbytes)) << t.name;
  }
  const TensorInfo* x = a.FindTensor("output.weight");
  const TensorInfo* y = b.FindTensor("output.weight");
  return {{static_cast<const uint8_t*>(x->data), x->nbytes},
          {static_cast<const uint8_t*>(y->data), y->nbytes}};
}

TEST(ModelSynthTest, TextOnlyZeroesTheOutputRowsOfEveryNonTextToken) {
  for (SynthDtype dtype : {SynthDtype::kF32, SynthDtype::kF16, SynthDtype::kQ8_0}) {
    SynthSpec spec = SmallSpec(dtype);
    auto plain = Build(spec);
    spec.text_only = true;
    auto text = Build(spec);
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(text, nullptr);
    auto [plain_out, text_out] = SameButOutput(*plain, *text);
    ASSERT_EQ(plain_out.size(), text_out.size());
    const size_t row_bytes = text_out.size() / 300;
    // The generated vocabulary: <unk>, <s>, </s>, then 256 byte tokens, then text.
    for (size_t row = 0; row < 300; ++row) {
      const auto mine = text_out.subspan(row * row_bytes, row_bytes);
      const auto theirs = plain_out.subspan(row * row_bytes, row_bytes);
      if (row < 259) {
        EXPECT_TRUE(std::all_of(mine.begin(), mine.end(), [](uint8_t b) { return b == 0; }))
            << SynthDtypeName(dtype) << " row " << row;
      } else {
        EXPECT_TRUE(std::equal(mine.begin(), mine.end(), theirs.begin()))
            << SynthDtypeName(dtype) << " row " << row;
      }
    }
  }
}

TEST(ModelSynthTest, TextOnlyReadsTheTypesOfACopiedVocabulary) {
  SynthSpec spec = CopiedVocabularySpec(SynthDtype::kF16);
  spec.text_only = true;
  auto file = Build(spec);
  ASSERT_NE(file, nullptr);
  const std::vector<int64_t> types = *file->GetIntArray("tokenizer.ggml.token_type");
  const TensorInfo* out = file->FindTensor("output.weight");
  const auto* bytes = static_cast<const uint8_t*>(out->data);
  const size_t row_bytes = out->nbytes / types.size();
  int zero_rows = 0;
  for (size_t row = 0; row < types.size(); ++row) {
    const bool zero = std::all_of(bytes + row * row_bytes, bytes + (row + 1) * row_bytes,
                                  [](uint8_t b) { return b == 0; });
    EXPECT_EQ(zero, types[row] != 1) << "token " << row << " type " << types[row];
    zero_rows += zero;
  }
  EXPECT_EQ(zero_rows, 259);  // <unk>, <s>, </s> and the 256 byte fallbacks of Llama 2
}

TEST(ModelSynthTest, VocabFromErrors) {
  SynthSpec spec = SmallSpec(SynthDtype::kF32);
  spec.vocab = 0;
  spec.vocab_from = "/nonexistent/vocab.gguf";
  gguf::GgufWriter writer;
  EXPECT_EQ(BuildSynthModel(spec, writer).code(), StatusCode::kNotFound);

  // A GGUF file without a vocabulary.
  const std::string dir = bmad::testing::MakeTempDir("model_synth_");
  gguf::GgufWriter empty;
  empty.SetString("general.architecture", "llama");
  ASSERT_TRUE(empty.WriteFile(dir + "/novocab.gguf").ok());
  spec.vocab_from = dir + "/novocab.gguf";
  gguf::GgufWriter writer2;
  Status s = BuildSynthModel(spec, writer2);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("novocab.gguf"));
  EXPECT_THAT(s.message(), HasSubstr("tokenizer.ggml.tokens"));

  // A vocabulary the loader refuses (two tokens with one text) is not copied into a model that
  // would then be refused only when served.
  auto source = gguf::GgufFile::Open(bmad::testing::SharedModelsDir() + "/stories260K.gguf");
  ASSERT_TRUE(source.ok());
  gguf::GgufWriter duplicate;
  for (auto [key, value] : (*source)->metadata()) {
    if (key == "tokenizer.ggml.tokens") value.array[301] = value.array[300];
    ASSERT_TRUE(duplicate.SetValue(key, value).ok());
  }
  ASSERT_TRUE(duplicate.WriteFile(dir + "/duplicate.gguf").ok());
  spec.vocab_from = dir + "/duplicate.gguf";
  gguf::GgufWriter writer3;
  s = BuildSynthModel(spec, writer3);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("duplicate.gguf"));
  EXPECT_THAT(s.message(), HasSubstr("token 301 repeats the text"));
  std::filesystem::remove_all(dir);
}

TEST(ModelSynthTest, ValidationNamesTheProblem) {
  struct Case {
    const char* what;
    void (*mutate)(SynthSpec&);
    const char* expected;
  };
  const Case cases[] = {
      {"no layers", [](SynthSpec& s) { s.layers = 0; }, "layers"},
      {"too many layers", [](SynthSpec& s) { s.layers = kMaxLayers + 1; }, "layers"},
      {"negative dim", [](SynthSpec& s) { s.dim = -64; }, "dim"},
      {"huge dim", [](SynthSpec& s) { s.dim = kMaxDim * 2; }, "dim"},
      {"no heads", [](SynthSpec& s) { s.heads = 0; }, "heads"},
      {"kv over heads", [](SynthSpec& s) { s.kv_heads = 8; }, "kv_heads"},
      {"no kv heads", [](SynthSpec& s) { s.kv_heads = 0; }, "kv_heads"},
      {"no ffn", [](SynthSpec& s) { s.ffn = 0; }, "ffn"},
      {"no ctx", [](SynthSpec& s) { s.ctx = 0; }, "ctx"},
      {"dim not divisible", [](SynthSpec& s) { s.dim = 66; }, "not divisible by heads"},
      {"heads not divisible", [](SynthSpec& s) { s.heads = 4; s.kv_heads = 3; },
       "not divisible by kv_heads"},
      {"odd head dim", [](SynthSpec& s) { s.dim = 60; }, "must be even"},
      {"q8_0 dim", [](SynthSpec& s) { s.dtype = SynthDtype::kQ8_0; s.dim = 48; },
       "multiples of 32"},
      {"q8_0 ffn", [](SynthSpec& s) { s.dtype = SynthDtype::kQ8_0; s.ffn = 100; },
       "multiples of 32"},
      {"q4_k dim", [](SynthSpec& s) { s.dtype = SynthDtype::kQ4_K_M; s.ffn = 512; },
       "q4_k_m needs dim and ffn to be multiples of 256, got dim 64 and ffn 512"},
      {"q6_k ffn", [](SynthSpec& s) { s.dtype = SynthDtype::kQ6_K; s.dim = 256; },
       "multiples of 256"},
      {"small vocab", [](SynthSpec& s) { s.vocab = 258; }, "vocab"},
      {"no vocab", [](SynthSpec& s) { s.vocab = 0; }, "vocab"},
      {"too many parameters",
       [](SynthSpec& s) { s.layers = 1024; s.dim = 65536; s.heads = 512; s.kv_heads = 512; },
       "parameters"},
  };
  EXPECT_TRUE(ValidateSynthSpec(SmallSpec(SynthDtype::kF16)).ok());
  for (const Case& c : cases) {
    SynthSpec spec = SmallSpec(SynthDtype::kF16);
    c.mutate(spec);
    Status s = ValidateSynthSpec(spec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(s.message(), HasSubstr(c.expected)) << c.what;
    gguf::GgufWriter writer;
    EXPECT_EQ(BuildSynthModel(spec, writer).code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(writer.tensor_count(), 0u) << c.what;
  }
  EXPECT_EQ(*ParseSynthDtype("q8_0"), SynthDtype::kQ8_0);
  EXPECT_EQ(*ParseSynthDtype("q4_k_m"), SynthDtype::kQ4_K_M);
  EXPECT_EQ(*ParseSynthDtype("bf16"), SynthDtype::kBF16);
  EXPECT_EQ(*ParseSynthDtype("q4_0"), SynthDtype::kQ4_0);
  EXPECT_EQ(*ParseSynthDtype("q5_0"), SynthDtype::kQ5_0);
  EXPECT_EQ(*ParseSynthDtype("q4_1"), SynthDtype::kQ4_1);
  EXPECT_EQ(*ParseSynthDtype("q5_1"), SynthDtype::kQ5_1);
  EXPECT_THAT(ParseSynthDtype("q2_k").status().message(),
              HasSubstr("f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q4_k, q6_k, q4_k_m or q5_k_m"));
}

TEST(ModelSynthTest, WriteFailureNamesThePath) {
  Status s = SynthesizeModel(SmallSpec(SynthDtype::kF16), "/nonexistent-dir/m.gguf");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent-dir/m.gguf"));
}

}  // namespace
}  // namespace bmad::synth
