#include "worker/model/synth/synth_weights.h"

#include <cmath>
#include <cstring>
#include <string>

#include "common/bfloat16.h"
#include "common/half.h"
#include "kernels/k_quants.h"
#include "kernels/legacy_quants.h"
#include "kernels/q8_0.h"

namespace bmad::synth {
namespace {

// SplitMix64 (Steele, Lea and Flood, 2014): tiny, fast, and fully specified by its arithmetic.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Fills one row with uniform values on (-amplitude, amplitude): the top 24 bits select one of
// 2^24 evenly spaced points, centred so the distribution is symmetric around zero.
void NextRow(SplitMix64& rng, float amplitude, std::span<float> row) {
  constexpr float kStep = 2.0f / 16777216.0f;  // 2 / 2^24
  for (float& v : row) {
    const auto k = static_cast<float>(rng.Next() >> 40);
    v = ((k + 0.5f) * kStep - 1.0f) * amplitude;
  }
}

float Amplitude(const RandomMatrixSpec& spec) { return spec.stddev * std::sqrt(3.0f); }

}  // namespace

uint64_t TensorSeed(uint64_t model_seed, std::string_view tensor_name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : tensor_name) h = (h ^ c) * 0x100000001b3ull;
  return SplitMix64(model_seed ^ h).Next();
}

std::vector<float> RandomMatrixValues(const RandomMatrixSpec& spec) {
  std::vector<float> values(static_cast<size_t>(spec.rows * spec.cols));
  SplitMix64 rng(spec.seed);
  NextRow(rng, Amplitude(spec), values);
  return values;
}

Status EncodeRandomMatrix(const RandomMatrixSpec& spec, gguf::TensorType type,
                          std::span<uint8_t> out) {
  const std::string what = "random " + std::to_string(spec.cols) + "x" +
                           std::to_string(spec.rows) + " matrix";
  if (spec.cols <= 0 || spec.rows <= 0) return InvalidArgument(what + ": empty shape");
  const auto cols = static_cast<size_t>(spec.cols);
  size_t row_bytes = 0;
  switch (type) {
    case gguf::TensorType::kF32: row_bytes = cols * sizeof(float); break;
    case gguf::TensorType::kF16:
    case gguf::TensorType::kBF16: row_bytes = cols * sizeof(uint16_t); break;
    case gguf::TensorType::kQ8_0:
    case gguf::TensorType::kQ4_0:
    case gguf::TensorType::kQ5_0:
    case gguf::TensorType::kQ4_1:
    case gguf::TensorType::kQ5_1:
      if (cols % kernels::kQ8_0Block != 0) {
        return InvalidArgument(what + ": Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1 rows must be a multiple of 32");
      }
      row_bytes = cols / kernels::kQ8_0Block *
                  static_cast<size_t>(gguf::GetTensorTypeTraits(static_cast<uint32_t>(type))->block_bytes);
      break;
    case gguf::TensorType::kQ4_K:
    case gguf::TensorType::kQ5_K:
    case gguf::TensorType::kQ6_K:
      if (cols % kernels::kQK_K != 0) {
        return InvalidArgument(what + ": K-quant rows must be a multiple of 256");
      }
      row_bytes = cols / kernels::kQK_K *
                  (type == gguf::TensorType::kQ4_K   ? sizeof(kernels::BlockQ4_K)
                   : type == gguf::TensorType::kQ5_K ? sizeof(kernels::BlockQ5_K)
                                                     : sizeof(kernels::BlockQ6_K));
      break;
    default:
      return InvalidArgument(what + ": can only be written as f32, f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K or q6_K");
  }
  if (out.size() != row_bytes * static_cast<size_t>(spec.rows)) {
    return InvalidArgument(what + ": output holds " + std::to_string(out.size()) +
                           " bytes, expected " +
                           std::to_string(row_bytes * static_cast<size_t>(spec.rows)));
  }
  SplitMix64 rng(spec.seed);
  const float amplitude = Amplitude(spec);
  std::vector<float> row(cols);
  std::vector<uint16_t> halves(type == gguf::TensorType::kF16 || type == gguf::TensorType::kBF16 ? cols : 0);
  std::vector<kernels::BlockQ8_0> blocks(
      type == gguf::TensorType::kQ8_0 ? cols / kernels::kQ8_0Block : 0);
  for (int64_t r = 0; r < spec.rows; ++r) {
    NextRow(rng, amplitude, row);
    uint8_t* dst = out.data() + static_cast<size_t>(r) * row_bytes;
    if (type == gguf::TensorType::kF32) {
      std::memcpy(dst, row.data(), row_bytes);
    } else if (type == gguf::TensorType::kF16) {
      for (size_t i = 0; i < cols; ++i) halves[i] = FloatToHalf(row[i]);
      std::memcpy(dst, halves.data(), row_bytes);
    } else if (type == gguf::TensorType::kBF16) {
      for (size_t i = 0; i < cols; ++i) halves[i] = FloatToBf16(row[i]);
      std::memcpy(dst, halves.data(), row_bytes);
    } else if (type == gguf::TensorType::kQ4_0) {
      kernels::QuantizeRowQ4_0(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ4_0*>(dst));
    } else if (type == gguf::TensorType::kQ5_0) {
      kernels::QuantizeRowQ5_0(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ5_0*>(dst));
    } else if (type == gguf::TensorType::kQ4_1) {
      kernels::QuantizeRowQ4_1(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ4_1*>(dst));
    } else if (type == gguf::TensorType::kQ5_1) {
      kernels::QuantizeRowQ5_1(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ5_1*>(dst));
    } else if (type == gguf::TensorType::kQ8_0) {
      kernels::QuantizeRowQ8_0(row.data(), spec.cols, blocks.data());
      std::memcpy(dst, blocks.data(), row_bytes);
    } else if (type == gguf::TensorType::kQ4_K) {
      kernels::QuantizeRowQ4_K(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ4_K*>(dst));
    } else if (type == gguf::TensorType::kQ5_K) {
      kernels::QuantizeRowQ5_K(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ5_K*>(dst));
    } else {
      kernels::QuantizeRowQ6_K(row.data(), spec.cols, reinterpret_cast<kernels::BlockQ6_K*>(dst));
    }
  }
  return Status::Ok();
}

}  // namespace bmad::synth
