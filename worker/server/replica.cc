#include "worker/server/replica.h"

#include <algorithm>
#include <new>
#include <string>

#include "common/log.h"
#include "kernels/cpu/cpu_backend.h"
#if defined(BMAD_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_info.h"
#endif
#include "worker/parallel/mpi_session.h"

namespace bmad::worker {

Replica::~Replica() {
  // The engine first: it waits for a step still running on the device.
  engine_.reset();
  // Overflow chunks of the last step go back to the backend while it still exists.
  if (memory_) memory_->workspace().Reset();
}

namespace {

// Every rank of a replica must number the same KV blocks; ranks with more layers fit fewer.
Result<int64_t> AgreeOnBlocks(parallel::Communicator& replica, int64_t mine) {
  std::vector<int64_t> all(static_cast<size_t>(replica.size()));
  BMAD_RETURN_IF_ERROR(replica.AllGather(&mine, sizeof mine, all.data())
                           .WithContext("agreeing on the replica's KV block count"));
  return *std::min_element(all.begin(), all.end());
}

}  // namespace

Result<std::unique_ptr<kernels::Backend>> MakeBackend(Backend kind, int64_t threads, int device) {
  if (threads < 0 || threads > kMaxComputeThreads) {
    return InvalidArgument("compute threads must be in [0, " + std::to_string(kMaxComputeThreads) +
                           "], got " + std::to_string(threads));
  }
  if (kind != Backend::kCuda) {
    kernels::CpuBackendOptions options;
    options.threads = static_cast<int>(threads);
    BMAD_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CpuBackend> cpu, kernels::CpuBackend::Create(options));
    return std::unique_ptr<kernels::Backend>(std::move(cpu));
  }
#if defined(BMAD_HAVE_CUDA)
  kernels::CudaBackendOptions options;
  // A launcher that shows each rank only its own GPU leaves one visible: that one.
  Result<std::vector<cuda::DeviceInfo>> devices = cuda::ListDevices();
  options.device = devices.ok() && devices->size() == 1 ? 0 : device;
  Result<std::unique_ptr<kernels::CudaBackend>> cuda = kernels::CudaBackend::Create(options);
  if (!cuda.ok()) {
    return Status(cuda.status().code(), "backend cuda: " + cuda.status().message());
  }
  return std::unique_ptr<kernels::Backend>(std::move(*cuda));
#else
  (void)device;
  return Unavailable("backend cuda: this build has no CUDA support (rebuild with -DBMAD_CUDA=ON "
                     "on a machine with the CUDA toolkit)");
#endif
}

Result<std::unique_ptr<Replica>> Replica::Create(const ServerConfig& c, metrics::Registry* registry,
                                                 const Clock& clock, const ReplicaRank& rank,
                                                 std::unique_ptr<kernels::Backend> backend) {
  if (c.model.path.empty()) return InvalidArgument("model.path is not set (the GGUF file to serve)");
  std::unique_ptr<Replica> r(new Replica());
  if (backend) {
    r->backend_ = std::move(backend);
  } else {
    // One GPU per process: a host's ranks take its devices in local-rank order (0 without a
    // launcher; the launcher's CUDA_VISIBLE_DEVICES decides which GPUs a replica sees).
    const int device = parallel::ReadLaunchInfo().local_rank;
    BMAD_ASSIGN_OR_RETURN(r->backend_, MakeBackend(c.worker.backend, c.worker.threads, device));
  }
  const bool on_device = !r->backend_->host_memory();
  model::ModelPlacement placement;
  if (rank.topology) {
    placement.tp = rank.topology->tp();
    placement.tp_rank = rank.topology->tp_rank();
    placement.pp = rank.topology->pp();
    placement.stage = rank.topology->stage();
  }
  placement.stage_layers = c.parallel.stage_layers;
  BMAD_ASSIGN_OR_RETURN(r->model_, model::LlamaModel::Open(c.model.path, *r->backend_, placement));
  const bool leader = !rank.topology || rank.topology->is_leader();
  const model::LlamaConfig& mc = r->model_->config();
  BMAD_ASSIGN_OR_RETURN(const int64_t context, model::ContextLengthToServe(mc, c.model.context_length, c.model.path));
  if (leader) {
    BMAD_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok,
                          tokenizer::LoadModelTokenizer(r->model_->file(), mc.n_vocab, c.model.path));
    r->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  }
  r->model_name_ = c.model.ServedName();

  // One arena for weights, KV blocks, step activations and kernel scratch.
  ReplicaMemorySizes sizes = SizeReplicaMemory(*r->model_, c.scheduler.max_batch_tokens,
                                               c.scheduler.max_logit_rows(), c.cache.block_size);
  const size_t block_bytes = sizes.kv_block_bytes;
  size_t arena_bytes = static_cast<size_t>(c.worker.arena_bytes);
  if (on_device && arena_bytes == 0) {
    BMAD_ASSIGN_OR_RETURN(size_t free_bytes, r->backend_->AvailableDeviceMemory());
    arena_bytes = static_cast<size_t>(static_cast<double>(free_bytes) * c.worker.gpu_memory_fraction);
  }
  if (c.cache.num_blocks > 0) {
    r->num_blocks_ = c.cache.num_blocks;
  } else if (on_device) {
    // The KV cache takes the rest of the device arena, up to twice what max_seqs sequences of
    // the whole context need (beyond that, blocks only cost host bookkeeping).
    const size_t others = sizes.Total();  // with no KV blocks yet
    const int64_t cap =
        2 * c.scheduler.max_seqs * ((context + c.cache.block_size - 1) / c.cache.block_size) + 1;
    r->num_blocks_ = arena_bytes > others ? static_cast<int64_t>((arena_bytes - others) / block_bytes) : 0;
    if (r->num_blocks_ > cap) {
      r->num_blocks_ = cap;
      // Reserve no more than that uses: the rest stays free for cuBLAS, NCCL and fallbacks.
      if (c.worker.arena_bytes == 0) arena_bytes = others + static_cast<size_t>(cap) * block_bytes;
    }
  } else {
    r->num_blocks_ = static_cast<int64_t>(static_cast<size_t>(c.cache.kv_bytes) / block_bytes);
  }
  if (rank.topology && rank.topology->ranks_per_replica() > 1) {
    BMAD_ASSIGN_OR_RETURN(r->num_blocks_, AgreeOnBlocks(*rank.comms->replica, r->num_blocks_));
  }
  if (r->num_blocks_ < 2) {
    if (on_device) {
      return InvalidArgument("the device arena (" + memory::HumanBytes(arena_bytes) +
                             ") holds no KV block after weights, workspace and scratch (" +
                             memory::HumanBytes(sizes.Total()) + "; one block needs " +
                             std::to_string(block_bytes) +
                             " bytes): raise worker.gpu_memory_fraction or worker.arena_bytes");
    }
    if (c.cache.num_blocks > 0) {
      return InvalidArgument("cache.num_blocks is " + std::to_string(c.cache.num_blocks) +
                             ": block 0 is reserved, so a replica needs at least 2");
    }
    return InvalidArgument("cache.kv_bytes " + std::to_string(c.cache.kv_bytes) +
                           " holds no usable KV block (one block needs " +
                           std::to_string(block_bytes) + " bytes, and block 0 is reserved: it "
                           "must hold at least 2)");
  }
  sizes.kv_blocks = r->num_blocks_;
  BMAD_ASSIGN_OR_RETURN(r->memory_, ReplicaMemory::Create(sizes, arena_bytes,
                                                          on_device ? r->backend_.get() : nullptr));
  r->backend_->SetMemoryHooks(r->memory_->BackendHooks());
  r->model_->PrepareWeights();
  // A device backend's uploads report failures here (ops cannot return them).
  BMAD_RETURN_IF_ERROR(r->backend_->Synchronize().WithContext("preparing the weights"));
  if (on_device) log::Info("memory", "device arena " + r->memory_->Describe());
  r->cache_ = std::make_unique<model::KvCache>(r->model_->CacheShape(r->num_blocks_, c.cache.block_size),
                                               r->memory_->KvMemory());
  if (rank.topology && rank.topology->ranks_per_replica() > 1) {
    parallel::ShardStepContext sc;
    sc.model = r->model_.get();
    sc.cache = r->cache_.get();
    sc.workspace = &r->memory_->workspace();
    sc.tp = rank.comms->tp.get();
    // On GPUs the model's all-reduces take device buffers (NCCL, from the worker process);
    // host-memory traffic (logit gathers, step plans, stage hand-offs) stays on MPI.
    if (on_device && rank.device_tp && rank.topology->tp() > 1) {
      BMAD_ASSIGN_OR_RETURN(r->tp_device_, rank.device_tp(*rank.comms->tp, *r->backend_));
    }
    sc.tp_device = r->tp_device_.get();
    sc.pp = rank.comms->pp.get();
    sc.micro_batches = c.parallel.micro_batches;
    sc.max_tokens = c.scheduler.max_batch_tokens;
    sc.max_logit_rows = c.scheduler.max_logit_rows();
    BMAD_RETURN_IF_ERROR(parallel::ShardStepRunner::CheckMessageSizes(sc));
    r->runner_ = std::make_unique<parallel::ShardStepRunner>(sc);
    if (leader) {
      r->leader_executor_ = std::make_unique<parallel::LeaderExecutor>(*rank.comms->replica,
                                                                       *r->runner_, rank.watchdog);
    }
  }
  if (!leader) return r;
  if (registry) {
    r->metrics_ = std::make_unique<engine::EngineMetrics>(*registry, c.worker.replica_id,
                                                          c.cache.block_size, r->num_blocks_);
  }
  engine::EngineOptions eo;
  eo.scheduler = c.scheduler;
  eo.block_size = c.cache.block_size;
  eo.num_blocks = r->num_blocks_;
  eo.prefix_caching = c.cache.prefix_caching;
  eo.context_length = c.model.context_length;
  eo.workspace = &r->memory_->workspace();
  eo.executor = r->leader_executor_.get();
  try {
    r->engine_ = std::make_unique<engine::Engine>(eo, *r->model_, *r->cache_, *r->tokenizer_,
                                                  *r->backend_, clock, r->metrics_.get());
  } catch (const std::bad_alloc&) {
    // The engine sizes its step buffers up front; the largest, the logits of a step, grows with
    // its rows (every sequence's, and the prompt positions') times the vocabulary.
    return ResourceExhausted("cannot allocate the engine's step buffers for scheduler.max_seqs " +
                             std::to_string(c.scheduler.max_seqs) + " + max_prompt_logprob_tokens " +
                             std::to_string(c.scheduler.max_prompt_logprob_tokens) + " rows of logits (" +
                             std::to_string(r->model_->config().n_vocab) +
                             " floats each); lower them");
  }
  return r;
}

}  // namespace bmad::worker
