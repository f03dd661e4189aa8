#include "tests/gpu/gpu_bench.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>

#include "common/half.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch_params.h"
#include "kernels/q8_0.h"
#include "tests/gpu/device_model.h"
#include "worker/model/synth/model_synth.h"

namespace bmad::gpu_tests {
namespace {

std::string Format(const char* fmt, double a, double b = 0, double c = 0, double d = 0,
                   double e = 0, double f = 0) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d, e, f);
  return buf;
}

template <typename T>
cudaError_t DeviceAlloc(T** p, size_t bytes) {
  void* v = nullptr;
  const cudaError_t e = cudaMalloc(&v, bytes);
  *p = static_cast<T*>(v);
  return e;
}

Result<std::unique_ptr<kernels::CudaBackend>> MakeGpu() { return kernels::CudaBackend::Create(); }

// Milliseconds per call of `fn` on the backend's stream: 3 warm-up calls, then `iters` timed.
Result<double> TimeMs(kernels::CudaBackend& gpu, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  BMAD_RETURN_IF_ERROR(gpu.Synchronize());
  cudaEvent_t start = nullptr, stop = nullptr;
  BMAD_CUDA_CHECK(cudaEventCreate(&start));
  BMAD_CUDA_CHECK(cudaEventCreate(&stop));
  BMAD_CUDA_CHECK(cudaEventRecord(start, gpu.compute_stream()));
  for (int i = 0; i < iters; ++i) fn();
  BMAD_CUDA_CHECK(cudaEventRecord(stop, gpu.compute_stream()));
  BMAD_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  BMAD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  BMAD_RETURN_IF_ERROR(gpu.Synchronize());
  return static_cast<double>(ms) / iters;
}

// Greedy generation for `prompts`, all decoded together; `forward` runs one step and returns
// the greedy token of each sequence that sampled, in order.
using StepFn = std::function<Result<std::vector<int32_t>>(std::span<const model::SequenceStep>)>;

Result<std::vector<std::vector<int32_t>>> Generate(const std::vector<std::vector<int32_t>>& prompts,
                                                   int64_t tokens, int64_t block_size,
                                                   const StepFn& forward) {
  const size_t n = prompts.size();
  std::vector<std::vector<int32_t>> seqs = prompts, tables(n);
  int32_t next_block = 1;
  for (size_t s = 0; s < n; ++s) {
    const int64_t blocks =
        (static_cast<int64_t>(prompts[s].size()) + tokens + block_size) / block_size;
    for (int64_t b = 0; b < blocks; ++b) tables[s].push_back(next_block++);
  }
  std::vector<int32_t> done(n, 0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<model::SequenceStep> steps;
    for (size_t s = 0; s < n; ++s) {
      const auto take = static_cast<size_t>(static_cast<int32_t>(seqs[s].size()) - done[s]);
      steps.push_back(
          {std::span<const int32_t>(seqs[s]).subspan(static_cast<size_t>(done[s]), take), done[s],
           tables[s], true});
    }
    BMAD_ASSIGN_OR_RETURN(std::vector<int32_t> next, forward(steps));
    for (size_t s = 0; s < n; ++s) {
      done[s] = static_cast<int32_t>(seqs[s].size());
      seqs[s].push_back(next[s]);
    }
  }
  for (size_t s = 0; s < n; ++s)
    seqs[s].erase(seqs[s].begin(), seqs[s].begin() + static_cast<long>(prompts[s].size()));
  return seqs;
}

std::string Ids(const std::vector<int32_t>& ids, size_t count) {
  std::string s;
  for (size_t i = 0; i < std::min(count, ids.size()); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

size_t MatchingPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

Status RunParity(const ParityOptions& o, std::string* report) {
  const int64_t bs = 16;
  kernels::CpuBackend cpu;
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> ref,
                        model::LlamaModel::Load(o.model, cpu));
  const int64_t vocab = ref->config().n_vocab;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < o.batch; ++i) {
    std::vector<int32_t> p = o.prompt;
    for (int64_t j = 0; j < 5 * i; ++j)
      p.push_back(static_cast<int32_t>((37 * (i + j) + 11) % vocab));
    prompts.push_back(p);
  }
  int64_t blocks = 1;
  for (const auto& p : prompts) blocks += (static_cast<int64_t>(p.size()) + o.tokens + bs) / bs;
  model::KvCache cache(ref->CacheShape(blocks, bs));
  std::vector<float> logits(static_cast<size_t>(o.batch * vocab));
  std::vector<float> cpu_first, gpu_first;
  BMAD_ASSIGN_OR_RETURN(
      auto cpu_ids,
      Generate(prompts, o.tokens, bs, [&](auto steps) -> Result<std::vector<int32_t>> {
        BMAD_RETURN_IF_ERROR(ref->Forward(steps, cache, logits.data()));
        if (cpu_first.empty()) cpu_first = logits;
        std::vector<int32_t> next;
        for (size_t s = 0; s < steps.size(); ++s) {
          const float* row = logits.data() + s * static_cast<size_t>(vocab);
          next.push_back(static_cast<int32_t>(std::max_element(row, row + vocab) - row));
        }
        return next;
      }));

  kernels::CudaBackendOptions go;
  go.debug_checks = true;  // parity runs are small: name the failing op if there is one
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CudaBackend> gpu,
                        kernels::CudaBackend::Create(go));
  DeviceModelOptions dopt;
  dopt.max_tokens = 0;
  for (const auto& p : prompts) dopt.max_tokens += static_cast<int64_t>(p.size());
  dopt.max_seqs = o.batch;
  dopt.num_blocks = blocks;
  dopt.block_size = bs;
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceModel> dev,
                        DeviceModel::Load(o.model, std::move(gpu), dopt));
  BMAD_ASSIGN_OR_RETURN(
      auto gpu_ids,
      Generate(prompts, o.tokens, bs, [&](auto steps) -> Result<std::vector<int32_t>> {
        BMAD_ASSIGN_OR_RETURN(std::span<const float> got, dev->Forward(steps));
        if (gpu_first.empty()) gpu_first.assign(got.begin(), got.end());
        return dev->Greedy();
      }));
  BMAD_RETURN_IF_ERROR(dev->backend().Synchronize());

  double worst = 0;
  for (size_t i = 0; i < cpu_first.size() && i < gpu_first.size(); ++i) {
    worst = std::max(
        worst, std::fabs(double(cpu_first[i]) - gpu_first[i]) / (1.0 + std::fabs(cpu_first[i])));
  }
  *report += "### Greedy parity: " + std::filesystem::path(o.model).filename().string() + "\n\n";
  *report += "Model: " + ref->config().Summary() + "; " + std::to_string(o.batch) +
             " sequences decoded together, " + std::to_string(o.tokens) + " greedy tokens each.\n";
  *report += Format("First-step logits, worst |gpu - cpu| / (1 + |cpu|): %.3g\n\n", worst);
  *report +=
      "| seq | prompt tokens | matching leading tokens (GPU vs CPU) | first GPU ids "
      "|\n|---|---|---|---|\n";
  bool ok = true;
  for (size_t s = 0; s < prompts.size(); ++s) {
    const size_t same = MatchingPrefix(cpu_ids[s], gpu_ids[s]);
    ok = ok && same >= static_cast<size_t>(o.strict);
    *report += "| " + std::to_string(s) + " | " + std::to_string(prompts[s].size()) + " | " +
               std::to_string(same) + " / " + std::to_string(o.tokens) + " | " +
               Ids(gpu_ids[s], 8) + " |\n";
  }
  if (!o.expected.empty()) {
    const size_t same = MatchingPrefix(o.expected, gpu_ids[0]);
    ok = ok && same >= std::min<size_t>(static_cast<size_t>(o.strict), o.expected.size());
    *report += "\nSequence 0 against llama.cpp's greedy reference: " + std::to_string(same) +
               " / " + std::to_string(o.expected.size()) + " leading tokens match.\n";
  }
  *report += std::string("\nResult: ") + (ok ? "PASS" : "FAIL") + " (first " +
             std::to_string(o.strict) + " tokens must match)\n\n";
  if (!ok) return FailedPrecondition("greedy parity failed for " + o.model);
  return Status::Ok();
}

Status RunAttentionBench(std::string* report) {
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CudaBackend> gpu, MakeGpu());
  const int64_t n_heads = 32, n_kv = 8, hd = 128, bs = 16;
  *report +=
      "### Decode attention bandwidth (32 query / 8 KV heads, head_dim 128, F16 KV, "
      "blocks of 16, shuffled block tables)\n\n"
      "| sequences | context | splits | µs per call | GB/s (K+V read) | share of 4.8 TB/s |\n"
      "|---|---|---|---|---|---|\n";
  struct Case {
    int64_t seqs, ctx;
  };
  for (const Case c : {Case{1, 32768}, Case{16, 8192}, Case{64, 4096}, Case{256, 1024}}) {
    const int64_t blocks = c.seqs * (c.ctx / bs) + 1;
    const int64_t per = n_kv * bs * hd;
    const size_t cache_bytes = static_cast<size_t>(blocks * 2 * per) * 2;
    void* cache = nullptr;
    BMAD_CUDA_CHECK(cudaMalloc(&cache, cache_bytes));
    BMAD_CUDA_CHECK(cudaMemset(cache, 0x3c, cache_bytes));  // F16 0x3c3c: about 1.06
    const kernels::KvLayerView kv{static_cast<uint16_t*>(cache),
                                  static_cast<uint16_t*>(cache) + per,
                                  blocks,
                                  n_kv,
                                  bs,
                                  hd,
                                  2 * per};
    std::vector<int32_t> pool(static_cast<size_t>(blocks - 1));
    std::iota(pool.begin(), pool.end(), 1);
    std::shuffle(pool.begin(), pool.end(), std::mt19937(1));
    std::vector<kernels::AttentionSequence> seqs;
    for (int64_t s = 0; s < c.seqs; ++s) {
      seqs.push_back({s, 1, static_cast<int32_t>(c.ctx - 1),
                      std::span<const int32_t>(pool).subspan(static_cast<size_t>(s * (c.ctx / bs)),
                                                             static_cast<size_t>(c.ctx / bs))});
    }
    float *q = nullptr, *out = nullptr;
    BMAD_CUDA_CHECK(DeviceAlloc(&q, static_cast<size_t>(c.seqs * n_heads * hd) * 4));
    BMAD_CUDA_CHECK(DeviceAlloc(&out, static_cast<size_t>(c.seqs * n_heads * hd) * 4));
    BMAD_CUDA_CHECK(cudaMemset(q, 0, static_cast<size_t>(c.seqs * n_heads * hd) * 4));
    BMAD_CUDA_CHECK(cudaDeviceSynchronize());  // the backend's stream does not wait for memsets
    BMAD_ASSIGN_OR_RETURN(double ms, TimeMs(*gpu, 20, [&] {
                            gpu->AttentionDecode(kv, q, seqs, n_heads, 0.088f, out);
                          }));
    const double bytes = double(c.seqs) * c.ctx * n_kv * hd * 2 /*K,V*/ * 2 /*F16*/;
    const cuda::DecodeLaunch plan =
        cuda::DecodeLaunchFor(c.seqs, n_heads, n_kv, hd, c.ctx, gpu->sm_count());
    *report += Format("| %.0f | %.0f | %.0f | %.1f | %.0f | %.1f%% |\n", double(c.seqs),
                      double(c.ctx), double(plan.splits), ms * 1e3, bytes / (ms * 1e-3) / 1e9,
                      100.0 * bytes / (ms * 1e-3) / kHbmBytesPerSecond);
    cudaFree(q);
    cudaFree(out);
    cudaFree(cache);
  }
  *report += "\n";
  return gpu->Synchronize();
}

Status RunGemmBench(std::string* report) {
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CudaBackend> gpu, MakeGpu());
  cublasHandle_t handle = nullptr;
  BMAD_CUBLAS_CHECK(cublasCreate(&handle));
  BMAD_CUBLAS_CHECK(cublasSetStream(handle, gpu->compute_stream()));
  *report +=
      "### GEMM y = x · Wᵀ (TFLOP/s; cuBLAS reference: cublasGemmEx F16 × F16 → F16, F32 "
      "accumulation, same shape, input already F16)\n\n"
      "| m | rows (out) | cols (in) | ours F16 (incl. F32→F16 of x) | ours Q8_0 | cuBLAS F16 | "
      "F16 share | Q8_0 share |\n|---|---|---|---|---|---|---|---|\n";
  struct Shape {
    int64_t m, rows, cols;
  };
  for (const Shape s : {Shape{4096, 2048, 2048}, Shape{4096, 5632, 2048}, Shape{4096, 2048, 5632},
                        Shape{256, 32000, 2048}, Shape{32, 5632, 2048}}) {
    std::vector<uint16_t> w16(static_cast<size_t>(s.rows * s.cols));
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
    std::vector<float> wf(w16.size());
    for (size_t i = 0; i < w16.size(); ++i) {
      wf[i] = dist(rng);
      w16[i] = FloatToHalf(wf[i]);
    }
    std::vector<uint8_t> w8(kernels::RowBytes(kernels::WeightType::kQ8_0, s.cols) *
                            static_cast<size_t>(s.rows));
    for (int64_t r = 0; r < s.rows; ++r) {
      kernels::QuantizeRowQ8_0(
          wf.data() + r * s.cols, s.cols,
          reinterpret_cast<kernels::BlockQ8_0*>(
              w8.data() + r * kernels::RowBytes(kernels::WeightType::kQ8_0, s.cols)));
    }
    const kernels::PreparedWeight p16 = gpu->PrepareMatMulWeight(
        kernels::MakeWeightMatrix(kernels::WeightType::kF16, w16.data(), s.rows, s.cols));
    const kernels::PreparedWeight p8 = gpu->PrepareMatMulWeight(
        kernels::MakeWeightMatrix(kernels::WeightType::kQ8_0, w8.data(), s.rows, s.cols));
    float *x = nullptr, *y = nullptr;
    void *x16 = nullptr, *y16 = nullptr;
    BMAD_CUDA_CHECK(DeviceAlloc(&x, static_cast<size_t>(s.m * s.cols) * 4));
    BMAD_CUDA_CHECK(DeviceAlloc(&y, static_cast<size_t>(s.m * s.rows) * 4));
    BMAD_CUDA_CHECK(cudaMalloc(&x16, static_cast<size_t>(s.m * s.cols) * 2));
    BMAD_CUDA_CHECK(cudaMalloc(&y16, static_cast<size_t>(s.m * s.rows) * 2));
    BMAD_CUDA_CHECK(cudaMemset(x, 0, static_cast<size_t>(s.m * s.cols) * 4));
    BMAD_CUDA_CHECK(cudaMemset(x16, 0, static_cast<size_t>(s.m * s.cols) * 2));
    BMAD_CUDA_CHECK(cudaDeviceSynchronize());  // the backend's stream does not wait for memsets
    BMAD_ASSIGN_OR_RETURN(double ms16, TimeMs(*gpu, 10, [&] { gpu->MatMul(x, s.m, p16.view, y); }));
    BMAD_ASSIGN_OR_RETURN(double ms8, TimeMs(*gpu, 10, [&] { gpu->MatMul(x, s.m, p8.view, y); }));
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    BMAD_ASSIGN_OR_RETURN(double ms_ref, TimeMs(*gpu, 10, [&] {
                            st = cublasGemmEx(
                                handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.rows),
                                static_cast<int>(s.m), static_cast<int>(s.cols), &one,
                                p16.view.data, CUDA_R_16F, static_cast<int>(s.cols), x16,
                                CUDA_R_16F, static_cast<int>(s.cols), &zero, y16, CUDA_R_16F,
                                static_cast<int>(s.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                          }));
    BMAD_CUBLAS_CHECK(st);
    const double flop = 2.0 * s.m * s.rows * s.cols;
    auto tflops = [&](double ms) { return flop / (ms * 1e-3) / 1e12; };
    *report += Format("| %.0f | %.0f | %.0f | ", double(s.m), double(s.rows), double(s.cols)) +
               Format("%.1f | %.1f | %.1f | %.0f%% | %.0f%% |\n", tflops(ms16), tflops(ms8),
                      tflops(ms_ref), 100.0 * ms_ref / ms16, 100.0 * ms_ref / ms8);
    cudaFree(x);
    cudaFree(y);
    cudaFree(x16);
    cudaFree(y16);
  }
  cublasDestroy(handle);
  *report += "\n";
  return gpu->Synchronize();
}

Status RunDecodeBench(const DecodeBenchOptions& o, std::string* report) {
  if (!std::filesystem::exists(o.model)) {
    synth::SynthSpec spec;
    spec.layers = 16;
    spec.dim = 2048;
    spec.heads = 16;
    spec.kv_heads = 8;
    spec.ffn = 5632;
    spec.vocab = 32000;
    spec.ctx = 2048;
    spec.dtype = synth::SynthDtype::kF16;
    const auto start = std::chrono::steady_clock::now();
    BMAD_RETURN_IF_ERROR(synth::SynthesizeModel(spec, o.model));
    std::fprintf(stderr, "synthesized %s in %.1f s\n", o.model.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CudaBackend> gpu, MakeGpu());
  const int64_t bs = 16, max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const int64_t blocks_per_seq = (o.prompt_len + o.gen_len + bs - 1) / bs;
  DeviceModelOptions dopt;
  dopt.max_tokens = std::max<int64_t>(4096, max_batch);
  dopt.max_seqs = std::max<int64_t>(max_batch, 4096 / o.prompt_len + 1);
  dopt.num_blocks = max_batch * blocks_per_seq + 1;
  dopt.block_size = bs;
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceModel> dev,
                        DeviceModel::Load(o.model, std::move(gpu), dopt));
  const model::LlamaConfig& c = dev->config();
  const double weight_ms = double(dev->weight_bytes()) / kHbmBytesPerSecond * 1e3;
  *report += "### End-to-end decode (synthetic F16 Llama, " + c.Summary() + ")\n\n" +
             Format(
                 "Prompt %.0f tokens, %.0f greedy tokens per sequence; the worker's model, each "
                 "step copying its logits to the host for the sampler (as the engine does). Reading the %.2f GB of matrices once takes "
                 "%.3f ms at 4.8 TB/s: the batch-1 ceiling is %.0f tokens/s.\n\n",
                 double(o.prompt_len), double(o.gen_len), dev->weight_bytes() / 1e9, weight_ms,
                 1e3 / weight_ms) +
             "| batch | prefill tokens/s | decode tokens/s | ms per decode step | step time vs "
             "weight-read bound |\n"
             "|---|---|---|---|---|\n";
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(c.n_vocab - 1));
  for (int64_t batch : o.batches) {
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch)),
        tables(static_cast<size_t>(batch));
    for (int64_t s = 0; s < batch; ++s) {
      for (int64_t t = 0; t < o.prompt_len; ++t)
        prompts[static_cast<size_t>(s)].push_back(tok(rng));
      for (int64_t b = 0; b < blocks_per_seq; ++b)
        tables[static_cast<size_t>(s)].push_back(static_cast<int32_t>(1 + s * blocks_per_seq + b));
    }
    auto start = std::chrono::steady_clock::now();
    std::vector<int32_t> next(static_cast<size_t>(batch));
    for (int64_t s0 = 0; s0 < batch;) {  // whole prompts, up to max_tokens per step
      std::vector<model::SequenceStep> steps;
      int64_t tokens = 0;
      while (s0 < batch && tokens + o.prompt_len <= dopt.max_tokens) {
        steps.push_back(
            {prompts[static_cast<size_t>(s0)], 0, tables[static_cast<size_t>(s0)], true});
        tokens += o.prompt_len;
        ++s0;
      }
      BMAD_RETURN_IF_ERROR(dev->Forward(steps).status());
      const std::vector<int32_t> got = dev->Greedy();
      std::copy(got.begin(), got.end(), next.begin() + (s0 - static_cast<int64_t>(got.size())));
    }
    BMAD_RETURN_IF_ERROR(dev->backend().Synchronize());
    const double prefill_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    start = std::chrono::steady_clock::now();
    for (int64_t g = 0; g < o.gen_len; ++g) {
      std::vector<model::SequenceStep> steps;
      for (int64_t s = 0; s < batch; ++s) {
        steps.push_back({std::span<const int32_t>(&next[static_cast<size_t>(s)], 1),
                         static_cast<int32_t>(o.prompt_len + g), tables[static_cast<size_t>(s)],
                         true});
      }
      BMAD_RETURN_IF_ERROR(dev->Forward(steps).status());
      next = dev->Greedy();
    }
    const double decode_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double step_ms = decode_s / double(o.gen_len) * 1e3;
    *report += Format("| %.0f | %.0f | %.0f | %.2f | %.2f× |\n", double(batch),
                      double(batch * o.prompt_len) / prefill_s,
                      double(batch * o.gen_len) / decode_s, step_ms, step_ms / weight_ms);
    std::fprintf(stderr, "decode batch %lld: %.2f ms/step\n", static_cast<long long>(batch),
                 step_ms);
  }
  *report += "\n";
  return dev->backend().Synchronize();
}

}  // namespace bmad::gpu_tests
