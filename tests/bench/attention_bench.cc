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
#include <random>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "common/half.h"
#include "common/status.h"
#include "kernels/cpu/cpu_backend.h"

namespace {

struct Options {
  int64_t seqs = 32, context = 192, block_size = 8, threads = 2, layers = 12, heads = 12,
          kv_heads = 12, head_dim = 64, reps = 30;
};

// Flags as every bmad command takes them; a bad value is a message naming it and exit 2.
bool Parse(int argc, char** argv, Options& o) {
  bmad::cli::Flags flags("bmad-attention-bench [flags]");
  struct IntFlag {
    const char* name;
    int64_t* value;
    const char* help;
  };
  const IntFlag ints[] = {
      {"seqs", &o.seqs, "Sequences decoding together (default 32)."},
      {"context", &o.context, "Cached tokens per sequence before the new one (default 192)."},
      {"block-size", &o.block_size, "Tokens per KV block (default 8)."},
      {"threads", &o.threads, "Compute threads (default 2)."},
      {"layers", &o.layers, "Layers per step (default 12)."},
      {"heads", &o.heads, "Query heads (default 12)."},
      {"kv-heads", &o.kv_heads, "KV heads, dividing --heads (default 12)."},
      {"head-dim", &o.head_dim, "Dimensions per head (default 64)."},
      {"reps", &o.reps, "Steps timed; the best is reported (default 30)."}};
  for (const IntFlag& f : ints) flags.AddInt(f.name, f.value, f.help);
  std::vector<std::string> positional;
  bmad::Status status = flags.Parse({argv + 1, argv + argc}, &positional);
  if (status.ok() && !positional.empty()) {
    status = bmad::InvalidArgument("unexpected argument '" + positional[0] + "'");
  }
  for (const IntFlag& f : ints) {
    if (status.ok() && *f.value <= 0) {
      status = bmad::InvalidArgument(std::string("--") + f.name + " must be a positive integer");
    }
  }
  if (status.ok() && o.heads % o.kv_heads != 0) {
    status = bmad::InvalidArgument("--heads must be a multiple of --kv-heads");
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    std::exit(0);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "bmad-attention-bench: %s\n", status.ToString().c_str());
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
