// The checks and measurements tests/gpu/run.sh makes on a GPU, each appending a Markdown section
// to a report: greedy parity of the CUDA backend with the CPU on real models, decode attention
// bandwidth, GEMM throughput against cuBLAS, and end-to-end decode tokens/s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace bmad::gpu_tests {

// H200 SXM's HBM3e bandwidth by NVIDIA's datasheet; the share reported is against this.
inline constexpr double kHbmBytesPerSecond = 4.8e12;

struct ParityOptions {
  std::string model;
  std::vector<int32_t> prompt;    // token ids (BOS included)
  std::vector<int32_t> expected;  // llama.cpp's greedy continuation of `prompt`, if known
  int64_t tokens = 32;            // greedy tokens per sequence
  int64_t strict = 32;            // leading tokens that must match (near-ties flip later ones)
  int64_t batch = 4;              // sequences decoded together (prompt, then longer variants)
};
// kFailedPrecondition when the GPU's greedy tokens differ from the CPU's (or llama.cpp's)
// within `strict`; the report says where.
Status RunParity(const ParityOptions& o, std::string* report);

// Decode attention (the CUDA backend's AttentionDecode) over a random paged KV cache: bytes of
// keys and values read per second, against HBM bandwidth.
Status RunAttentionBench(std::string* report);

// y = x · Wᵀ through the CUDA backend's MatMul (F16 via cuBLAS, Q8_0 via its own kernels) against
// cublasGemmEx F16 × F16 → F16 with F32 accumulation at the same shape.
Status RunGemmBench(std::string* report);

struct DecodeBenchOptions {
  std::string model;  // a GGUF file; made with the synthesizer when missing
  std::vector<int64_t> batches = {1, 32, 256};
  int64_t prompt_len = 128;
  int64_t gen_len = 64;
};
Status RunDecodeBench(const DecodeBenchOptions& o, std::string* report);

}  // namespace bmad::gpu_tests
