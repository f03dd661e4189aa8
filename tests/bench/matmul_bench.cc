// bmad-matmul-bench: the products of one decode step alone, through CpuBackend::MatMuls and
// MatMul on prepared (packed) weights, shaped as a Llama's: per layer Q/K/V (one shared loop),
// the output projection, gate/up (one shared loop) and down; then the LM head. Prints
// milliseconds per step and multiply-adds per second; the best of the repetitions.
//
//   bmad-matmul-bench [--rows 32] [--dtype f16|f32|q8_0] [--threads 2] [--layers 12]
//                     [--dim 768] [--ffn 2048] [--vocab 32000] [--reps 10] [--system-memory]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "common/half.h"
#include "common/status.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/q8_0.h"
#include "worker/memory/arena.h"

namespace {

struct Options {
  int64_t rows = 32, threads = 2, layers = 12, dim = 768, ffn = 2048, vocab = 32000, reps = 10;
  std::string dtype = "f16";
  bool system_memory = false;
};

bool Parse(int argc, char** argv, Options& o) {
  bmad::cli::Flags flags("bmad-matmul-bench [flags]");
  // Ranges that keep every buffer's size well inside memory and int64 arithmetic.
  flags.AddInt("rows", &o.rows, "Activation rows: sequences decoding together (default 32).", 1, 1024);
  flags.AddInt("threads", &o.threads, "Compute threads (default 2).", 1, 1024);
  flags.AddInt("layers", &o.layers, "Layers per step (default 12).", 1, 256);
  flags.AddInt("dim", &o.dim, "Model width (default 768).", 1, 16384);
  flags.AddInt("ffn", &o.ffn, "Feed-forward width (default 2048).", 1, 65536);
  flags.AddInt("vocab", &o.vocab, "LM head outputs (default 32000).", 1, 262144);
  flags.AddInt("reps", &o.reps, "Steps timed; the best is reported (default 10).", 1, 1000000);
  flags.AddString("dtype", &o.dtype, "Weight type: f16, f32 or q8_0 (default f16).");
  flags.AddBool("system-memory", &o.system_memory,
                "Weights from the system allocator instead of a huge-page arena.");
  std::vector<std::string> positional;
  bmad::Status status = flags.Parse({argv + 1, argv + argc}, &positional);
  if (status.ok() && !positional.empty()) {
    status = bmad::InvalidArgument("unexpected argument '" + positional[0] + "'");
  }
  if (status.ok() && o.dtype != "f16" && o.dtype != "f32" && o.dtype != "q8_0") {
    status = bmad::InvalidArgument("--dtype must be f16, f32 or q8_0, not '" + o.dtype + "'");
  }
  if (status.ok() && o.dtype == "q8_0" && (o.dim % 32 != 0 || o.ffn % 32 != 0)) {
    status = bmad::InvalidArgument("q8_0 needs --dim and --ffn multiples of 32");
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    std::exit(0);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "bmad-matmul-bench: %s\n", status.ToString().c_str());
    return false;
  }
  return true;
}

bmad::kernels::WeightType TypeOf(const Options& o) {
  using bmad::kernels::WeightType;
  return o.dtype == "f32" ? WeightType::kF32 : o.dtype == "f16" ? WeightType::kF16 : WeightType::kQ8_0;
}

// A random matrix of `rows` x `cols` in the bench's type, in `bytes` (reused: the caller packs
// each matrix, which copies it, before asking for the next).
bmad::kernels::WeightMatrix RandomMatrix(const Options& o, int64_t rows, int64_t cols,
                                         std::mt19937& rng, std::vector<uint8_t>& bytes) {
  using namespace bmad::kernels;
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  const WeightType type = TypeOf(o);
  bytes.resize(static_cast<size_t>(rows) * RowBytes(type, cols));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    uint8_t* out = bytes.data() + static_cast<size_t>(r) * RowBytes(type, cols);
    if (type == WeightType::kF32) {
      std::copy(row.begin(), row.end(), reinterpret_cast<float*>(out));
    } else if (type == WeightType::kF16) {
      for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(out)[c] = bmad::FloatToHalf(row[c]);
    } else {
      QuantizeRowQ8_0(row.data(), cols, reinterpret_cast<BlockQ8_0*>(out));
    }
  }
  return MakeWeightMatrix(type, bytes.data(), rows, cols);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace bmad::kernels;
  Options o;
  if (!Parse(argc, argv, o)) return 2;
  CpuBackend backend(CpuBackendOptions{.threads = static_cast<int>(o.threads)});
  // Prepared weights from a host arena, as a worker holds them (worker/memory/arena.h: huge
  // pages where the system allows), or from the system allocator with --system-memory.
  std::unique_ptr<bmad::memory::Arena> arena;
  size_t arena_used = 0;
  if (!o.system_memory) {
    // What the packed copies take, each rounded up to whole pages as the hook below hands out.
    const WeightType type = TypeOf(o);
    auto prepared_bytes = [&](int64_t rows, int64_t cols) {
      return (backend.PreparedBytes(MakeWeightMatrix(type, nullptr, rows, cols)) + 4095) / 4096 * 4096;
    };
    const size_t per_layer = 4 * prepared_bytes(o.dim, o.dim) + 2 * prepared_bytes(o.ffn, o.dim) +
                             prepared_bytes(o.dim, o.ffn);
    const size_t bytes = static_cast<size_t>(o.layers) * per_layer + prepared_bytes(o.vocab, o.dim);
    bmad::Result<std::unique_ptr<bmad::memory::Arena>> reserved = bmad::memory::Arena::ReserveHost(bytes);
    if (!reserved.ok()) {
      std::fprintf(stderr, "bmad-matmul-bench: %s\n", reserved.status().ToString().c_str());
      return 1;
    }
    arena = std::move(reserved).value();
    MemoryHooks hooks;
    hooks.allocate_weights = [&](size_t n) -> void* {
      void* p = static_cast<uint8_t*>(arena->base()) + arena_used;
      arena_used += (n + 4095) / 4096 * 4096;
      return p;
    };
    backend.SetMemoryHooks(hooks);
  }
  std::mt19937 rng(1);
  std::vector<uint8_t> rows_layout;
  std::vector<PreparedWeight> prepared;
  auto make = [&](int64_t rows, int64_t cols) {
    prepared.push_back(backend.PrepareMatMulWeight(RandomMatrix(o, rows, cols, rng, rows_layout)));
    return prepared.size() - 1;
  };
  struct Layer {
    size_t q, k, v, o, gate, up, down;
  };
  std::vector<Layer> layers;
  for (int64_t l = 0; l < o.layers; ++l) {
    Layer w{};
    w.q = make(o.dim, o.dim);
    w.k = make(o.dim, o.dim);
    w.v = make(o.dim, o.dim);
    w.o = make(o.dim, o.dim);
    w.gate = make(o.ffn, o.dim);
    w.up = make(o.ffn, o.dim);
    w.down = make(o.dim, o.ffn);
    layers.push_back(w);
  }
  const size_t head = make(o.vocab, o.dim);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(o.rows * std::max(o.dim, o.ffn)));
  for (float& v : x) v = dist(rng);
  std::vector<float> q(static_cast<size_t>(o.rows * o.dim)), k(q.size()), v(q.size()), out(q.size());
  std::vector<float> gate(static_cast<size_t>(o.rows * o.ffn)), up(gate.size());
  std::vector<float> logits(static_cast<size_t>(o.rows * o.vocab));
  double best = 1e30;
  for (int64_t rep = 0; rep < o.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const Layer& w : layers) {
      const WeightMatrix* qkv[] = {&prepared[w.q].view, &prepared[w.k].view, &prepared[w.v].view};
      float* qkv_out[] = {q.data(), k.data(), v.data()};
      backend.MatMuls(x.data(), o.rows, qkv, qkv_out);
      backend.MatMul(q.data(), o.rows, prepared[w.o].view, out.data());
      const WeightMatrix* gu[] = {&prepared[w.gate].view, &prepared[w.up].view};
      float* gu_out[] = {gate.data(), up.data()};
      backend.MatMuls(out.data(), o.rows, gu, gu_out);
      backend.MatMul(gate.data(), o.rows, prepared[w.down].view, out.data());
    }
    backend.MatMul(out.data(), o.rows, prepared[head].view, logits.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double macs = static_cast<double>(o.rows) *
                      static_cast<double>(o.layers * (4 * o.dim * o.dim + 3 * o.dim * o.ffn) +
                                          o.vocab * o.dim);
  std::printf("{\"bench\":\"matmul\",\"dtype\":\"%s\",\"rows\":%lld,\"threads\":%lld,"
              "\"ms_per_step\":%.3f,\"gmac_per_s\":%.2f}\n",
              o.dtype.c_str(), static_cast<long long>(o.rows), static_cast<long long>(o.threads),
              best * 1e3, macs / best / 1e9);
  return 0;
}
