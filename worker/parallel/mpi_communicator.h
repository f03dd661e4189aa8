// MpiCommunicator: the Communicator over an MPI communicator, for host buffers (the CPU
// backend, and the replica's step-plan broadcasts on any backend; our Open MPI is not
// CUDA-aware, so device pointers never go here).
//
// Each call posts a non-blocking MPI operation (MPI_Iallreduce, MPI_Iallgather, MPI_Ibcast,
// MPI_Isend, MPI_Irecv, MPI_Ibarrier) and polls it with MPI_Test under the bounded wait of
// bounded_poll.h, so no call can block for longer than the timeout, and a raised abort flag
// ends it at once. The communicator has MPI_ERRORS_RETURN, so MPI failures come back as codes.
//
// When a wait ends early the request is left with MPI (a collective cannot be cancelled; a
// send or receive is cancelled when MPI allows it, and then its buffer is free again), and the
// communicator refuses further calls (communicator.h). MPI_Comm_free and MPI_Finalize with
// such a request pending return normally (checked with Open MPI 4.1).
//
// Requires an initialised MPI (MpiSession). Destroying a communicator after MPI_Finalize is
// allowed and frees nothing.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/parallel/communicator.h"

namespace bmad::parallel {

class MpiCommunicator final : public Communicator {
 public:
  // A duplicate of MPI_COMM_WORLD (our messages can never match anyone else's), named "world",
  // with `timeout` for its calls. Collective over the world: every rank calls it; bounded by
  // `timeout` (MPI_Comm_idup). kFailedPrecondition when MPI is not initialised.
  static Result<std::unique_ptr<MpiCommunicator>> World(
      std::chrono::milliseconds timeout = kDefaultTimeout);

  ~MpiCommunicator() override;

  // Splits this group into sub-groups (MPI_Comm_split): ranks passing the same `color` (>= 0)
  // form one, ordered by `key` (ties by rank here). Collective: every rank of this
  // communicator calls it. The colours and keys are first exchanged with a bounded all-gather,
  // so a missing rank gives kDeadlineExceeded rather than a hang, and a negative colour on any
  // rank gives every rank kInvalidArgument. The new communicator is named `child_name` and
  // inherits this one's timeout and metrics registry.
  Result<std::unique_ptr<MpiCommunicator>> Split(int color, int key, std::string child_name);

  MPI_Comm comm() const { return comm_; }

 protected:
  Status DoAllReduceSum(float* data, size_t count, const Call& call) override;
  Status DoAllGather(const void* send, size_t bytes_per_rank, void* recv,
                     const Call& call) override;
  Status DoBroadcast(void* data, size_t bytes, int root, const Call& call) override;
  Status DoBroadcastString(std::string* data, int root, const Call& call) override;
  Status DoSend(const void* data, size_t bytes, int dest, int tag, const Call& call) override;
  Status DoRecv(void* data, size_t bytes, int src, int tag, const Call& call) override;
  Status DoBarrier(const Call& call) override;
  int max_tag() const override { return max_tag_; }

 private:
  // Takes ownership of `comm` (freed by the destructor) and sets MPI_ERRORS_RETURN on it.
  MpiCommunicator(MPI_Comm comm, int rank, int size, std::string name);
  static Result<std::unique_ptr<MpiCommunicator>> Adopt(MPI_Comm comm, std::string name);

  // Waits for `*request` until it completes, the call's deadline passes or the abort flag is
  // raised; in the last two cases the request is abandoned (see above). `status` receives the
  // completed request's status when not null.
  Status Wait(MPI_Request* request, const Call& call, MPI_Status* status = nullptr);
  // Keeps a request that did not complete. Point-to-point requests are cancelled first and
  // forgotten if the cancel completes within a few milliseconds.
  void Abandon(MPI_Request request, const Call& call);
  // kInvalidArgument unless `count` fits MPI's int counts.
  Status CheckCount(const Call& call, size_t count) const;
  Status Failed(const Call& call, int error_code, const char* mpi_call) const;

  MPI_Comm comm_;
  int max_tag_ = 32767;  // MPI guarantees at least this; the constructor reads MPI_TAG_UB
  std::vector<MPI_Request> abandoned_;
};

}  // namespace bmad::parallel
