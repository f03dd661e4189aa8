// A model file bmad cannot run is one clear error naming the file and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/gguf/gguf_writer.h"
#include "worker/model/llama/llama_model.h"

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
      EXPECT_TRUE(w.AddTensor(t->name, {64, 512}, TensorType::kBF16,
                              std::vector<uint8_t>(64 * 512 * 2, 0)).ok());
    } else {
      CopyTensor(w, *t);
    }
  });
  Status s2 = LoadError(path2);
  EXPECT_EQ(s2.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s2.message().find("tensor 'output.weight' has type bf16; bmad computes with f32, f16 "
                              "and q8_0 weights"),
            std::string::npos)
      << s2.message();
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
      {[](auto& w) {
         w.SetString("llama.rope.scaling.type", "linear");
         w.SetFloat32("llama.rope.scaling.factor", 0.0f);
       },
       "rope.scaling.factor must be a finite positive number with a finite inverse, got 0"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = WriteVariant("key" + std::to_string(i), [&](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
      if (t) CopyTensor(w, *t); else cases[i].first(w);
    });
    const Status s = LoadError(path);
    EXPECT_FALSE(s.ok()) << "case " << i;
    EXPECT_NE(s.message().find(cases[i].second), std::string::npos) << "case " << i << ": " << s.message();
  }
  // The neutral values still load: scale_linear 0 (none) and a linear factor of 1.
  const std::string fine = WriteVariant("neutral", [](gguf::GgufWriter& w, const gguf::TensorInfo* t) {
    if (t) {
      CopyTensor(w, *t);
    } else {
      w.SetFloat32("llama.rope.scale_linear", 0.0f);
    }
  });
  EXPECT_TRUE(LoadError(fine).ok()) << LoadError(fine).ToString();
}

TEST(LlamaLoadTest, LegacyAndMissingFiles) {
  Status v1 = LoadError(testing::SharedModelsDir() + "/legacy/tinyllamas-stories-260k-f32.ggufv1.gguf");
  EXPECT_EQ(v1.code(), StatusCode::kUnimplemented);
  EXPECT_NE(v1.message().find("GGUF version 1"), std::string::npos);
  EXPECT_EQ(LoadError("/nonexistent/model.gguf").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace bmad::model
