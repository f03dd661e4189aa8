// Deterministic pseudo-random weight matrices for synthesized models.
//
// The values depend only on the seed, the tensor's name and its shape: the same spec gives a
// byte-identical file on every machine and compiler (so no <random> distributions, whose output
// the standard leaves to each library). Values are uniform on (-a, a) with a = stddev * sqrt(3),
// which has the requested standard deviation.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "worker/model/gguf/gguf_types.h"

namespace bmad::synth {

struct RandomMatrixSpec {
  uint64_t seed = 0;    // the tensor's own seed (see TensorSeed)
  int64_t cols = 0;     // inputs: ggml shape[0], contiguous
  int64_t rows = 0;     // outputs: ggml shape[1]
  float stddev = 1.0f;
};

// Mixes the model's seed with the tensor's name, so every tensor draws its own stream and
// adding or reordering tensors never changes another's values.
uint64_t TensorSeed(uint64_t model_seed, std::string_view tensor_name);

// All values in file order (row after row). For tests: the writer never holds a whole matrix
// of floats.
std::vector<float> RandomMatrixValues(const RandomMatrixSpec& spec);

// Writes the matrix into `out` encoded as F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K,
// Q5_K or Q6_K, one row at a time. `out` must be exactly the tensor's size. kInvalidArgument
// for another type, a size mismatch, or rows that are not a whole number of blocks.
Status EncodeRandomMatrix(const RandomMatrixSpec& spec, gguf::TensorType type,
                          std::span<uint8_t> out);

}  // namespace bmad::synth
