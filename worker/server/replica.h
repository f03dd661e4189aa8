// Everything one replica runs on, built from the config: the compute backend, the arena, the
// model with its prepared weights, the tokenizer, the KV cache and the engine. The worker
// process and the in-process tools (`bmad bench serve`) build replicas the same way.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/config/config.h"
#include "common/metrics/registry.h"
#include "common/status.h"
#include "kernels/backend.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_metrics.h"
#include "worker/model/kv_cache.h"
#include "worker/model/llama/llama_model.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/parallel/leader_executor.h"
#include "worker/parallel/replica_communicators.h"
#include "worker/parallel/shard_step_runner.h"
#include "worker/parallel/topology.h"
#include "worker/parallel/watchdog.h"
#include "worker/server/replica_memory.h"

namespace bmad::worker {

// Makes a communicator over the ranks of `tp` that takes device memory (NCCL), for the model's
// all-reduces on a device backend; a null result means none (all-reduces then go through host
// memory). The worker process supplies it, so that only it links NCCL.
using DeviceCommunicatorFactory = std::function<Result<std::unique_ptr<parallel::Communicator>>(
    parallel::MpiCommunicator& tp, kernels::Backend& backend)>;

// Where this process stands in a replica split over MPI ranks (parallel.tp × parallel.pp).
struct ReplicaRank {
  const parallel::ReplicaTopology* topology = nullptr;   // null: the replica is this process
  parallel::ReplicaCommunicators* comms = nullptr;       // with a topology
  parallel::Watchdog* watchdog = nullptr;                // optional
  DeviceCommunicatorFactory device_tp;                   // optional
};

// The compute backend `kind` names (worker.backend), or a start-up error saying why it cannot be
// had: kUnavailable for cuda on a machine without a usable GPU or in a build without CUDA.
// `device`: the GPU for cuda (a replica's ranks use their local rank).
Result<std::unique_ptr<kernels::Backend>> MakeBackend(Backend kind, int64_t threads, int device = 0);

class Replica {
 public:
  // `registry` may be null (no metrics). Errors name what is wrong: the model file, the
  // backend, the memory sizes.
  // With a `rank`, this process computes its shard of the model; only the leader builds the
  // engine (and the tokenizer), the other ranks run `runner()` under parallel::RunFollower.
  // The backend is MakeBackend(worker.backend) unless one is given (tests).
  //
  // Memory: a host backend's arena is sized from the model and the cache (cache.kv_bytes or
  // cache.num_blocks) unless worker.arena_bytes is set. A device backend's arena is
  // worker.arena_bytes, or worker.gpu_memory_fraction of the device's free memory, reserved at
  // once; the KV cache takes what weights, workspace and scratch leave (cache.num_blocks, when
  // set, asks for an exact count instead; a count derived from the arena is capped at twice
  // what max_seqs sequences of the full context need, and the arena then shrinks to fit). Each
  // process takes the GPU of its local rank (the only one, when it sees one); split over ranks,
  // tensor-parallel all-reduces use rank.device_tp's communicator.
  static Result<std::unique_ptr<Replica>> Create(const ServerConfig& config,
                                                 metrics::Registry* registry, const Clock& clock,
                                                 const ReplicaRank& rank = {},
                                                 std::unique_ptr<kernels::Backend> backend = nullptr);
  ~Replica();

  bool is_leader() const { return engine_ != nullptr; }
  engine::Engine& engine() { return *engine_; }
  parallel::ShardStepRunner* runner() { return runner_.get(); }
  // The leader's executor when the replica spans ranks; null otherwise.
  parallel::LeaderExecutor* leader_executor() { return leader_executor_.get(); }
  const model::LlamaModel& model() const { return *model_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& model_name() const { return model_name_; }
  int64_t num_blocks() const { return num_blocks_; }
  std::string MemorySummary() const { return memory_->Describe(); }
  size_t memory_capacity() const { return memory_->capacity(); }

 private:
  Replica() = default;

  // Declaration order is destruction order in reverse: the memory outlives its users.
  std::unique_ptr<ReplicaMemory> memory_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<parallel::Communicator> tp_device_;  // NCCL over the tp ranks, on GPUs
  std::unique_ptr<model::LlamaModel> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<model::KvCache> cache_;
  std::unique_ptr<engine::EngineMetrics> metrics_;
  std::unique_ptr<parallel::ShardStepRunner> runner_;
  std::unique_ptr<parallel::LeaderExecutor> leader_executor_;
  std::unique_ptr<engine::Engine> engine_;
  std::string model_name_;
  int64_t num_blocks_ = 0;
};

}  // namespace bmad::worker
