// bmad-attention-bench: decode attention alone, through CpuBackend::AttentionDecode, over a
// cache laid out as the worker lays it out (every layer's keys and values in each block, blocks
// handed to the sequences in turn, as a busy server leaves them). Prints milliseconds per step
// (all layers) and the rate at which the step reads the cache; the best of the repetitions.
//
//   bmad-attention-bench [--seqs 32] [--context 192] [--block-size 8] [--threads 2]
//                        [--layers 12] [--heads 12] [--kv-heads 12] [--head-dim 64] [--reps 30]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/cpu_backend.h"

namespace {

struct Options {
  int64_t seqs = 32, context = 192, block_size = 8, threads = 2, layers = 12, heads = 12,
          kv_heads = 12, head_dim = 64, reps = 30;
};

bool Parse(int argc, char** argv, Options& o) {
  const std::pair<const char*, int64_t*> flags[] = {
      {"--seqs", &o.seqs},         {"--context", &o.context}, {"--block-size", &o.block_size},
      {"--threads", &o.threads},   {"--layers", &o.layers},   {"--heads", &o.heads},
      {"--kv-heads", &o.kv_heads}, {"--head-dim", &o.head_dim}, {"--reps", &o.reps}};
  for (int i = 1; i < argc; i += 2) {
    int64_t* target = nullptr;
    for (const auto& [name, value] : flags) {
      if (std::strcmp(argv[i], name) == 0) target = value;
    }
    char* end = nullptr;
    const long long v = i + 1 < argc ? std::strtoll(argv[i + 1], &end, 10) : 0;
    if (target == nullptr || i + 1 >= argc || *end != '\0' || v <= 0) {
      std::fprintf(stderr, "bmad-attention-bench: bad flag or value at '%s' (flags take a positive integer)\n",
                   argv[i]);
      return false;
    }
    *target = v;
  }
  if (o.heads % o.kv_heads != 0) {
    std::fprintf(stderr, "bmad-attention-bench: --heads must be a multiple of --kv-heads\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace bmad::kernels;
  Options o;
  if (!Parse(argc, argv, o)) return 2;
  CpuBackend backend(CpuBackendOptions{.threads = static_cast<int>(o.threads)});
  const int64_t n = o.context + 1;  // the new token attends to itself too
  const int64_t blocks_per_seq = (n + o.block_size - 1) / o.block_size;
  const int64_t num_blocks = o.seqs * blocks_per_seq + 1;  // block 0 is reserved
  const int64_t per_tensor = o.kv_heads * o.block_size * o.head_dim;
  const int64_t block_stride = 2 * o.layers * per_tensor;
  std::vector<uint16_t> cache(static_cast<size_t>(num_blocks * block_stride));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : cache) x = bmad::FloatToHalf(dist(rng));
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(o.seqs));
  int32_t next = 1;
  for (int64_t b = 0; b < blocks_per_seq; ++b) {
    for (auto& t : tables) t.push_back(next++);
  }
  std::vector<AttentionSequence> seqs;
  for (int64_t s = 0; s < o.seqs; ++s) {
    seqs.push_back({s, 1, static_cast<int32_t>(o.context), tables[static_cast<size_t>(s)]});
  }
  std::vector<float> q(static_cast<size_t>(o.seqs * o.heads * o.head_dim)), out(q.size());
  for (float& x : q) x = dist(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  double best = 1e30;
  for (int64_t rep = 0; rep < o.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < o.layers; ++l) {
      uint16_t* k = cache.data() + 2 * l * per_tensor;
      const KvLayerView view{k, k + per_tensor, num_blocks, o.kv_heads,
                             o.block_size, o.head_dim, block_stride};
      backend.AttentionDecode(view, q.data(), seqs, o.heads, scale, out.data());
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double bytes = static_cast<double>(o.seqs * n * o.layers * 2 * o.kv_heads * o.head_dim * 2);
  std::printf("{\"bench\":\"attention\",\"seqs\":%lld,\"context\":%lld,\"block_size\":%lld,"
              "\"threads\":%lld,\"ms_per_step\":%.3f,\"cache_gb_per_s\":%.2f}\n",
              static_cast<long long>(o.seqs), static_cast<long long>(o.context),
              static_cast<long long>(o.block_size), static_cast<long long>(o.threads), best * 1e3,
              bytes / best / 1e9);
  return 0;
}
