// The CPU backend: every op of kernels/backend.h, vectorized (AVX-512 when the CPU has it) and
// spread over a pool of threads. OpenBLAS provides sgemm for prefill-sized matrix products.
#pragma once

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/scratch_buffers.h"
#include "kernels/cpu/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace bmad::kernels {

struct CpuBackendOptions {
  int threads = 0;                          // 0: every core this process may use
  const cpu::SimdKernels* simd = nullptr;   // nullptr: the best the CPU supports
  // Prefill-sized products of unprepared (kRows) weights through OpenBLAS sgemm on
  // dequantized tiles. Off by default: prepared (packed) weights are faster and batch
  // invariant; sgemm's summation order depends on the batch.
  bool sgemm_for_rows_layout = false;
};

class CpuBackend final : public Backend {
 public:
  // Throws std::system_error when the system refuses a compute thread; Create says so instead.
  explicit CpuBackend(const CpuBackendOptions& options = {});
  // kResourceExhausted "cannot start N compute threads: ..." under a process limit.
  static Result<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options = {});
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  PreparedWeight PrepareMatMulWeight(const WeightMatrix& w) override;
  int threads() const { return pool_.size(); }
  // On the compute threads.
  void ParallelForOnHost(int64_t n, const std::function<void(int64_t i)>& body) override;
  const char* isa() const { return simd_.isa; }
  uint64_t buffer_allocations() const override;
  void SetMemoryHooks(MemoryHooks hooks) override;
  size_t PreparedBytes(const WeightMatrix& w) const override;

  void Embedding(const WeightMatrix& table, std::span<const int32_t> ids, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int64_t n_heads, int64_t head_dim,
            const RopeConfig& rope) override;
  void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) override;
  void MatMuls(const float* x, int64_t m, std::span<const WeightMatrix* const> ws,
               std::span<float* const> ys) override;
  void SwiGlu(const float* gate, const float* up, int64_t n, float* out) override;
  void Add(float* x, const float* y, int64_t n) override;
  void Softmax(float* x, int64_t rows, int64_t n) override;
  void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) override;
  void SampleRows(const float* x, int64_t rows, int64_t n, std::span<const RowSampling> params,
                  int32_t* out) override;
  void StoreKv(const KvLayerView& cache, const float* k, const float* v,
               std::span<const AttentionSequence> sequences) override;
  void AttentionPrefill(const KvLayerView& cache, const float* q,
                        std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                        float* out) override;
  void AttentionDecode(const KvLayerView& cache, const float* q,
                       std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                       float* out) override;

 private:
  struct AttentionTask;
  // Attention through SimdKernels::attend_rows_f16, in tasks of up to `kv_heads_per_task` KV
  // heads and `max_rows_per_task` rows of one sequence.
  void RunAttention(const KvLayerView& cache, const float* q,
                    std::span<const AttentionSequence> sequences, int64_t n_heads, float scale,
                    int64_t kv_heads_per_task, int64_t max_rows_per_task, float* out);
  // cos and sin of every rotated pair at each of `positions` ([row][pair][cos, sin]); the table
  // of the previous call when positions and config are the same (the queries and keys of every
  // layer of a step rotate by the same angles).
  const float* RopeAngles(std::span<const int32_t> positions, const RopeConfig& rope);
  const cpu::SimdKernels& simd_;
  cpu::ThreadPool pool_;
  cpu::ScratchBuffers scratch_;  // one slot per thread, plus the matmul's input slot
  std::vector<int32_t> sample_order_;  // SampleRows' scratch
  cpu::MatMulEngine matmul_;
  MemoryHooks hooks_;
  std::vector<AttentionTask> tasks_;
  std::vector<double> rope_inv_freq_;
  std::vector<float> rope_angles_;
  std::vector<int32_t> rope_positions_;  // what rope_angles_ holds
  RopeConfig rope_config_;
  std::vector<float> rope_freq_factors_;  // rope_config_'s, copied (the span may be reused)
};

}  // namespace bmad::kernels
