// NcclCommunicator: the Communicator over NCCL, for device buffers (the CUDA backend's
// tensor-parallel all-reduces and pipeline sends). Built only with BMAD_HAVE_CUDA.
//
// Every pointer passed to it is device memory on the current CUDA device. Each call enqueues
// the NCCL operation on the communicator's stream and then polls, under the bounded wait of
// bounded_poll.h, ncclCommGetAsyncError (a peer or network failure) and cudaStreamQuery (the
// operation's completion, and so that of everything enqueued on the stream before it: a call
// returns with the stream drained, like a synchronous one). The NCCL communicator is non-blocking (ncclConfig_t.blocking = 0),
// so creating it is bounded the same way. When a wait ends early the NCCL communicator is
// aborted (ncclCommAbort), which also releases the kernels stuck on the GPU; this communicator
// is then unusable (communicator.h).
//
// NCCL has no tags: Send/Recv check the tag's range but match messages between two ranks in
// call order only. BroadcastString is kUnimplemented: host strings (step plans) go over the
// MPI replica communicator.
//
// Not run in CI (no GPU there): it compiles wherever CUDA does.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/parallel/communicator.h"
#include "worker/parallel/mpi_communicator.h"

namespace bmad::parallel {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap` (every rank calls it, with its CUDA device already set): rank 0
  // creates the NCCL unique id and broadcasts it over `bootstrap`, then every rank joins. The
  // NCCL group has bootstrap's ranks, size, timeout and metrics. Operations run on `stream`
  // (not owned; it must outlive this communicator), or on a non-blocking stream of its own when
  // `stream` is null.
  static Result<std::unique_ptr<NcclCommunicator>> Create(MpiCommunicator& bootstrap,
                                                          std::string name,
                                                          cudaStream_t stream = nullptr);

  // ncclCommDestroy when healthy, ncclCommAbort after a failure (never blocks on a dead peer).
  ~NcclCommunicator() override;

  cudaStream_t stream() const { return stream_; }

 protected:
  Status DoAllReduceSum(float* data, size_t count, const Call& call) override;
  Status DoAllGather(const void* send, size_t bytes_per_rank, void* recv,
                     const Call& call) override;
  Status DoBroadcast(void* data, size_t bytes, int root, const Call& call) override;
  Status DoBroadcastString(std::string* data, int root, const Call& call) override;
  Status DoSend(const void* data, size_t bytes, int dest, int tag, const Call& call) override;
  Status DoRecv(void* data, size_t bytes, int src, int tag, const Call& call) override;
  Status DoBarrier(const Call& call) override;
  int max_tag() const override { return 1 << 30; }

 private:
  NcclCommunicator(int rank, int size, std::string name);

  // Checks what enqueuing returned (ncclInProgress is fine on a non-blocking communicator),
  // then waits for the stream; aborts the NCCL communicator when the wait ends early.
  Status Complete(ncclResult_t enqueued, const char* nccl_call, const Call& call);
  // One poll: true when the stream's work is done, an error when NCCL or CUDA failed.
  Result<bool> PollOnce(const Call& call);
  void AbortNccl();

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  float* barrier_scratch_ = nullptr;  // one device float: a barrier is a 1-element all-reduce
};

}  // namespace bmad::parallel
