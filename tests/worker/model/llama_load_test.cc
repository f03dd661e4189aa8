// A model file bmad cannot run is one clear error naming the file and the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "common/bfloat16.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"
#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"
#include "worker/model/llama/llama_model.h"
#include "worker/model/synth/model_synth.h"

namespace bmad::model {
namespace {

using gguf::TensorType;

// Copies stories260K through the writer, letting `edit` change keys and tensors on the way.
std::string WriteVariant(const std::string& name,
                         const std::function<void(gguf::GgufWriter&, const gguf::TensorInfo*)>& edit) {
  auto src = gguf::GgufFile::Open(testing::SharedModelsDir() + "/stories260K.gguf");
  EXPECT_TRUE(src.ok());
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) EXPECT_TRUE(w.SetValue(key, value).ok());
  for (const gguf::TensorInfo& t : (*src)->tensors()) edit(w, &t);
  edit(w, nullptr);  // a chance to change keys
  const std::string path = testing::MakeTempDir("bmad-load-") + "/" + name + ".gguf";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

void CopyTensor(gguf::GgufWriter& w, const gguf::TensorInfo& t) {
  EXPECT_TRUE(w.AddTensor(t.name, t.shape, static_cast<TensorType>(t.type),
                          std::vector<uint8_t>(t.data, t.data + t.nbytes))
                  .ok());
}

Status LoadError(const std::string& path) {
  kernels::CpuBackend backend;
  auto m = LlamaModel::Load(path, backend);
  return m.ok() ? Status::Ok() : m.status();
}

// stories260K with a rope_freqs.weight tensor of `shape` holding `factors` (F32), as llama.cpp's
// converter writes Llama-3.1 and later models.
std::string WithRopeFreqs(const std::string& name, const std::vector<float>& factors,
                          std::vector<int64_t> shape) {
  return WriteVariant(name, [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) {
      CopyTensor(w, *t);
      return;
    }
    std::vector<uint8_t> bytes(factors.size() * sizeof(float));
    std::memcpy(bytes.data(), factors.data(), bytes.size());
    EXPECT_TRUE(w.AddTensor("rope_freqs.weight", shape, TensorType::kF32, bytes).ok());
  });
}

// The last token's logits of a 40-token prompt (positions reach 39).
std::vector<float> LastLogits(const std::string& path, kernels::Backend& backend) {
  auto loaded = LlamaModel::Load(path, backend);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return {};
  LlamaModel& m = **loaded;
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + (i * 37) % 500);
  const std::vector<int32_t> table = {1, 2, 3};
  KvCache cache(m.CacheShape(4, 16));
  const SequenceStep step{prompt, 0, table, true};
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  EXPECT_TRUE(m.Forward(std::span(&step, 1), cache, logits.data()).ok());
  return logits;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

TEST(LlamaLoadTest, RopeFrequencyFactorsAreReadAndTurnThePairs) {
  // stories260K has heads of 8: 4 rotated pairs. Before, the tensor was ignored, so a Llama-3.1
  // model ran without its RoPE scaling and drifted as prompts grew.
  const std::string base = testing::SharedModelsDir() + "/stories260K.gguf";
  const std::string ones = WithRopeFreqs("rope-ones", {1, 1, 1, 1}, {4});
  const std::string scaled = WithRopeFreqs("rope-scaled", {1, 1, 4, 8}, {4});
  kernels::CpuBackend cpu;
  {
    auto m = LlamaModel::Load(scaled, cpu);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const float* f = (*m)->weights().rope_freq_factors;
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(std::vector<float>(f, f + 4), (std::vector<float>{1, 1, 4, 8}));
    auto plain = LlamaModel::Load(base, cpu);
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ((*plain)->weights().rope_freq_factors, nullptr);
  }
  const std::vector<float> base_logits = LastLogits(base, cpu);
  EXPECT_EQ(MaxAbsDiff(LastLogits(ones, cpu), base_logits), 0.0) << "factors of 1 change nothing";
  const std::vector<float> scaled_logits = LastLogits(scaled, cpu);
  EXPECT_GT(MaxAbsDiff(scaled_logits, base_logits), 0.1) << "the factors were not applied";
  // As the definition (kernels/reference, in double) applies them. The CPU's float arithmetic
  // differs from it by a few 1e-3 on this model's logits with or without factors; the factors
  // move them by more than 1 here.
  kernels::ReferenceBackend reference;
  EXPECT_LE(MaxAbsDiff(LastLogits(scaled, reference), scaled_logits), 1e-2);
}

// Norm vectors stored as BF16 (as some Hugging Face conversions are) are widened exactly: the
// model gives the logits of the same values stored as F32.
TEST(LlamaLoadTest, Bf16NormVectorsAreWidenedExactly) {
  const auto norms = [](bool as_bf16) {
    return [as_bf16](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (!t) return;
      if (t->shape.size() != 1 || t->type != static_cast<uint32_t>(TensorType::kF32)) {
        CopyTensor(w, *t);
        return;
      }
      const auto* f = reinterpret_cast<const float*>(t->data);
      const size_t n = t->nbytes / 4;
      std::vector<uint8_t> bytes(n * (as_bf16 ? 2 : 4));
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = FloatToBf16(f[i]);
        const float widened = Bf16ToFloat(h);
        if (as_bf16) std::memcpy(bytes.data() + 2 * i, &h, 2);
        else std::memcpy(bytes.data() + 4 * i, &widened, 4);
      }
      EXPECT_TRUE(w.AddTensor(t->name, t->shape, as_bf16 ? TensorType::kBF16 : TensorType::kF32, bytes).ok());
    };
  };
  kernels::CpuBackend cpu;
  const std::vector<float> bf16 = LastLogits(WriteVariant("bf16-norms", norms(true)), cpu);
  ASSERT_FALSE(bf16.empty());
  EXPECT_EQ(MaxAbsDiff(bf16, LastLogits(WriteVariant("f32-norms", norms(false)), cpu)), 0.0);
}

TEST(LlamaLoadTest, BadRopeFrequencyFactorsAreRefusedByName) {
  Status s = LoadError(WithRopeFreqs("rope-shape", {1, 1, 1, 1, 1}, {5}));
  EXPECT_NE(s.message().find("tensor 'rope_freqs.weight' has shape [5], expected [4]"), std::string::npos)
      << s.message();
  s = LoadError(WithRopeFreqs("rope-zero", {1, 1, 0, 8}, {4}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'rope_freqs.weight' value 2 is 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("must be finite and positive"), std::string::npos) << s.message();
  s = LoadError(WithRopeFreqs("rope-nan", {1, NAN, 1, 8}, {4}));
  EXPECT_NE(s.message().find("value 1 is nan"), std::string::npos) << s.message();
}

TEST(LlamaLoadTest, UnsupportedArchitecture) {
  const std::string path = WriteVariant("arch", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) CopyTensor(w, *t); else w.SetString("general.architecture", "gpt2");
  });
  Status s = LoadError(path);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("architecture 'gpt2' is not supported"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("arch.gguf"), std::string::npos);
}

TEST(LlamaLoadTest, MissingTensor) {
  const std::string path = WriteVariant("missing", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t && t->name != "blk.3.ffn_up.weight") CopyTensor(w, *t);
  });
  Status s = LoadError(path);
  EXPECT_NE(s.message().find("tensor 'blk.3.ffn_up.weight' is missing"), std::string::npos)
      << s.message();
}

TEST(LlamaLoadTest, TensorsTheModelDoesNotUseAreRefusedByName) {
  // A block_count under the file's layers ran fewer layers; a bias (which llama.cpp's llama
  // graph applies) was ignored: a different model, silently.
  const std::string fewer = WriteVariant("fewer", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) CopyTensor(w, *t); else w.SetUint32("llama.block_count", 3);
  });
  Status s = LoadError(fewer);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("18 tensor(s) the model does not use: 'blk.3."), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("block_count is 3"), std::string::npos) << s.message();
  const std::string bias = WriteVariant("bias", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) {
      CopyTensor(w, *t);
      return;
    }
    EXPECT_TRUE(w.AddTensor("blk.0.attn_q.bias", {64}, TensorType::kF32, std::vector<uint8_t>(64 * 4, 0)).ok());
  });
  s = LoadError(bias);
  EXPECT_NE(s.message().find("1 tensor(s) the model does not use: 'blk.0.attn_q.bias'"), std::string::npos)
      << s.message();
  // Names that only look like a layer's are not taken for one.
  for (const char* odd : {"blk.00.attn_q.weight", "blk.x.attn_q.weight", "blk..attn_q.weight", "blk.0"}) {
    const std::string path = WriteVariant("odd", [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (t) {
        CopyTensor(w, *t);
        return;
      }
      EXPECT_TRUE(w.AddTensor(odd, {4}, TensorType::kF32, std::vector<uint8_t>(16, 0)).ok());
    });
    s = LoadError(path);
    EXPECT_NE(s.message().find(std::string("'") + odd + "'"), std::string::npos) << odd << ": " << s.message();
  }
}

TEST(LlamaLoadTest, UnsupportedTensorType) {
  const std::string path = WriteVariant("q4k", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (!t) return;
    if (t->name == "blk.0.attn_q.weight") {
      // 64 x 64 = 4096 elements = 16 q4_K blocks of 144 bytes (contents irrelevant).
      EXPECT_TRUE(w.AddTensor(t->name, {256, 16}, TensorType::kQ4_K,
                              std::vector<uint8_t>(16 * 144, 0)).ok());
    } else {
      CopyTensor(w, *t);
    }
  });
  Status s = LoadError(path);
  EXPECT_NE(s.message().find("has shape [256, 16], expected [64, 64]"), std::string::npos)
      << s.message();
  const std::string path2 = WriteVariant("q4k2", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (!t) return;
    if (t->name == "blk.0.ffn_gate.weight") {
      // [256, 172] would be the right element count in the wrong shape; use a real q4_K shape
      // whose ggml dims match: ffn_gate is [64, 172], not a multiple of 256, so reshape the
      // whole model's expectations instead: replace output.weight [64, 512] by q4_K [256, 128].
      CopyTensor(w, *t);
    } else if (t->name == "token_embd.weight") {
      CopyTensor(w, *t);
    } else if (t->name == "output.weight") {
      EXPECT_TRUE(w.AddTensor(t->name, {64, 512}, TensorType::kF64,
                              std::vector<uint8_t>(64 * 512 * 8, 0)).ok());
    } else {
      CopyTensor(w, *t);
    }
  });
  Status s2 = LoadError(path2);
  EXPECT_EQ(s2.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s2.message().find("tensor 'output.weight' has type f64; bmad computes with f32, f16, "
                              "bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K and q6_K weights"),
            std::string::npos)
      << s2.message();
}

// A backend without K-quant products (as the CUDA backend, which has F32, F16 and Q8_0 only)
// refuses a Q4_K_M file by its first such tensor, before mapping anything; the CPU backend
// loads it.
TEST(LlamaLoadTest, ABackendWithoutTheWeightTypeRefusesTheFile) {
  class NoKQuantBackend : public kernels::ReferenceBackend {
   public:
    std::string_view name() const override { return "no-k-quant"; }
    bool HasWeightType(kernels::WeightType type) const override { return !kernels::IsKQuant(type); }
  };
  synth::SynthSpec spec;
  spec.layers = 1;
  spec.dim = 256;
  spec.heads = 2;
  spec.kv_heads = 2;
  spec.ffn = 256;
  spec.vocab = 300;
  spec.ctx = 64;
  spec.dtype = synth::SynthDtype::kQ4_K_M;
  const std::string path = testing::MakeTempDir("bmad-load-") + "/q4_k_m.gguf";
  ASSERT_TRUE(synth::SynthesizeModel(spec, path).ok());
  NoKQuantBackend without;
  const Status s = LlamaModel::Load(path, without).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("tensor 'token_embd.weight' has type q4_K, which the no-k-quant backend "
                             "does not compute with (it takes f32, f16 and q8_0); serve this file on the "
                             "cpu backend, or convert it to q8_0"),
            std::string::npos)
      << s.message();
  kernels::CpuBackend cpu;
  EXPECT_TRUE(LlamaModel::Load(path, cpu).ok());
}

TEST(LlamaLoadTest, MixtureOfExpertsIsNamed) {
  const std::string path = WriteVariant("moe", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) CopyTensor(w, *t); else w.SetUint32("llama.expert_count", 8);
  });
  Status s = LoadError(path);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("a mixture-of-experts model (llama.expert_count 8) is not supported"),
            std::string::npos)
      << s.message();
  const std::string dense = WriteVariant("dense", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) CopyTensor(w, *t); else w.SetUint32("llama.expert_count", 0);
  });
  EXPECT_TRUE(LoadError(dense).ok()) << LoadError(dense).ToString();
}

TEST(LlamaLoadTest, InconsistentHyperparameters) {
  const std::string path = WriteVariant("heads", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) CopyTensor(w, *t); else w.SetUint32("llama.attention.head_count", 7);
  });
  Status s = LoadError(path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a multiple of the head count 7"), std::string::npos) << s.message();
  // A size of zero is named by its key.
  const std::string empty = WriteVariant("layers", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) CopyTensor(w, *t); else w.SetUint32("llama.block_count", 0);
  });
  s = LoadError(empty);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("llama.block_count is 0; model sizes must be positive"), std::string::npos)
      << s.message();
}

TEST(LlamaLoadTest, AHeadSizeApartFromTheWidthIsNamed) {
  // stories260K: width 64 over 8 heads, a head size of 8.
  for (const char* key : {"llama.attention.key_length", "llama.attention.value_length"}) {
    const std::string wide = WriteVariant("wide", [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (t) CopyTensor(w, *t); else w.SetUint32(key, 16);
    });
    const Status s = LoadError(wide);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << key;
    EXPECT_NE(s.message().find(std::string(key) + " 16 differs from embedding_length / head_count = 8"),
              std::string::npos)
        << s.message();
    const std::string same = WriteVariant("same", [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (t) CopyTensor(w, *t); else w.SetUint32(key, 8);
    });
    EXPECT_TRUE(LoadError(same).ok()) << LoadError(same).ToString();
  }
}

TEST(LlamaLoadTest, OptionalKeysOfTheWrongTypeOrNotFiniteAreRefused) {
  // An optional key used to fall back to its default whatever was wrong with it: a string
  // head_count_kv became a confusing shape error, a string epsilon or rope base loaded with
  // the defaults, an infinite epsilon generated zeros, a denormal RoPE factor NaN logits.
  using Edit = std::function<void(gguf::GgufWriter&)>;
  const std::vector<std::pair<Edit, std::string>> cases = {
      {[](auto& w) { w.SetString("llama.attention.head_count_kv", "8"); },
       "metadata key 'llama.attention.head_count_kv' is"},
      {[](auto& w) { w.SetString("llama.attention.layer_norm_rms_epsilon", "1e-5"); },
       "metadata key 'llama.attention.layer_norm_rms_epsilon' is"},
      {[](auto& w) { w.SetString("llama.rope.freq_base", "10000"); }, "metadata key 'llama.rope.freq_base' is"},
      {[](auto& w) { w.SetString("llama.rope.dimension_count", "8"); },
       "metadata key 'llama.rope.dimension_count' is"},
      {[](auto& w) { w.SetFloat32("llama.attention.layer_norm_rms_epsilon", INFINITY); },
       "layer_norm_rms_epsilon must be a finite positive number, got inf"},
      {[](auto& w) { w.SetFloat32("llama.rope.freq_base", NAN); }, "rope.freq_base must be a finite positive number"},
      {[](auto& w) {
         w.SetString("llama.rope.scaling.type", "linear");
         w.SetFloat32("llama.rope.scaling.factor", 1e-40f);
       },
       "rope.scaling.factor must be a finite positive number with a finite inverse, got 9.99995e-41"},
      {[](auto& w) {
         w.SetString("llama.rope.scaling.type", "linear");
         w.SetFloat32("llama.rope.scaling.factor", INFINITY);
       },
       "rope.scaling.factor must be a finite positive number with a finite inverse, got inf"},
      {[](auto& w) { w.SetUint32("llama.rope.scaling.type", 1); }, "metadata key 'llama.rope.scaling.type' is"},
      {[](auto& w) { w.SetFloat32("llama.rope.scale_linear", -2.0f); },
       "rope.scale_linear must be a finite positive number with a finite inverse, got -2"},
      // A float64 key past the float range (its cast to float would be undefined).
      {[](auto& w) {
         gguf::MetadataValue v{gguf::ValueType::kFloat64, gguf::Scalar(1e300), {}, {}};
         EXPECT_TRUE(w.SetValue("llama.attention.layer_norm_rms_epsilon", v).ok());
       },
       "layer_norm_rms_epsilon must be a finite positive number, got 1e+300"},
      {[](auto& w) { w.SetFloat32("llama.rope.scaling.factor", -1.0f); },
       "rope.scaling.factor must be a finite positive number with a finite inverse, got -1"},
      {[](auto& w) { w.SetUint64("llama.context_length", uint64_t{1} << 40); },
       "context_length 1099511627776 is more than 2147483647 tokens"},
      // It only names the model, but a number there is a broken file all the same.
      {[](auto& w) { w.SetUint32("general.name", 7); }, "metadata key 'general.name' is"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = WriteVariant("key" + std::to_string(i), [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (t) CopyTensor(w, *t); else cases[i].first(w);
    });
    const Status s = LoadError(path);
    EXPECT_FALSE(s.ok()) << "case " << i;
    EXPECT_NE(s.message().find(cases[i].second), std::string::npos) << "case " << i << ": " << s.message();
  }
  // The neutral values still load: scale_linear 0 (none; llama.cpp reads a factor of 0 so).
  const std::string fine = WriteVariant("neutral", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) {
      CopyTensor(w, *t);
    } else {
      w.SetFloat32("llama.rope.scale_linear", 0.0f);
    }
  });
  EXPECT_TRUE(LoadError(fine).ok()) << LoadError(fine).ToString();
}

TEST(LlamaLoadTest, RopeScalingKeysAreReadAsLlamaCppReadsThem) {
  // The factor counts whatever key holds it, with the type linear when the file names none; a
  // factor alone, or the old key under an explicit linear type, was dropped (unscaled output).
  kernels::CpuBackend backend;
  auto variant = [&](const std::string& name, const std::function<void(gguf::GgufWriter&)>& keys) {
    return LastLogits(WriteVariant(name, [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (t) CopyTensor(w, *t); else keys(w);
    }), backend);
  };
  const std::vector<float> plain = variant("plain", [](gguf::GgufWriter&) {});
  const std::vector<float> scaled = variant("scaled", [](gguf::GgufWriter& w) {
    w.SetString("llama.rope.scaling.type", "linear");
    w.SetFloat32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_GT(MaxAbsDiff(plain, scaled), 1e-3) << "a factor of 4 over 40 positions must change the logits";
  EXPECT_EQ(MaxAbsDiff(scaled, variant("factor-only", [](gguf::GgufWriter& w) {
              w.SetFloat32("llama.rope.scaling.factor", 4.0f);
            })), 0.0);
  EXPECT_EQ(MaxAbsDiff(scaled, variant("old-key-linear", [](gguf::GgufWriter& w) {
              w.SetString("llama.rope.scaling.type", "linear");
              w.SetFloat32("llama.rope.scale_linear", 4.0f);
            })), 0.0);
  EXPECT_EQ(MaxAbsDiff(scaled, variant("old-key", [](gguf::GgufWriter& w) {
              w.SetFloat32("llama.rope.scale_linear", 4.0f);
            })), 0.0);
  // The type none scales nothing, whatever the factor; a factor of 0 is none.
  EXPECT_EQ(MaxAbsDiff(plain, variant("none", [](gguf::GgufWriter& w) {
              w.SetString("llama.rope.scaling.type", "none");
              w.SetFloat32("llama.rope.scaling.factor", 4.0f);
            })), 0.0);
  EXPECT_EQ(MaxAbsDiff(plain, variant("zero", [](gguf::GgufWriter& w) {
              w.SetString("llama.rope.scaling.type", "linear");
              w.SetFloat32("llama.rope.scaling.factor", 0.0f);
            })), 0.0);
}

TEST(LlamaLoadTest, LegacyAndMissingFiles) {
  Status v1 = LoadError(testing::SharedModelsDir() + "/legacy/tinyllamas-stories-260k-f32.ggufv1.gguf");
  EXPECT_EQ(v1.code(), StatusCode::kUnimplemented);
  EXPECT_NE(v1.message().find("GGUF version 1"), std::string::npos);
  EXPECT_EQ(LoadError("/nonexistent/model.gguf").code(), StatusCode::kNotFound);
}

TEST(LlamaLoadTest, AContextBeyondTheTrainedOneIsRefusedNotCut) {
  LlamaConfig model;
  model.n_ctx_train = 512;
  EXPECT_EQ(*ContextLengthToServe(model, 0, "m.gguf"), 512);  // 0: the model's own
  EXPECT_EQ(*ContextLengthToServe(model, 256, "m.gguf"), 256);
  EXPECT_EQ(*ContextLengthToServe(model, 512, "m.gguf"), 512);
  const Result<int64_t> beyond = ContextLengthToServe(model, 100000, "m.gguf");
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(beyond.status().message(),
            "model.context_length 100000 is more than m.gguf was trained for (512 tokens, its context_length): "
            "set at most that, or 0 for the model's own");
}

}  // namespace
}  // namespace bmad::model
