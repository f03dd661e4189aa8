#include "worker/parallel/nccl_communicator.h"

#include <utility>

#include "kernels/cuda/cuda_status.h"

namespace bmad::parallel {
namespace {

// What rank 0 broadcasts: the id, or the news that it could not make one (so the other ranks
// stop at once instead of joining a group that will never form).
struct UniqueIdMessage {
  int ok = 0;
  ncclUniqueId id{};
};

std::string NcclText(ncclResult_t result) { return ncclGetErrorString(result); }

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int size, std::string name)
    : Communicator(rank, size, std::move(name)) {}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(MpiCommunicator& bootstrap,
                                                                   std::string name,
                                                                   cudaStream_t stream) {
  UniqueIdMessage message;
  Status id_status;
  if (bootstrap.rank() == 0) {
    id_status = [&]() -> Status {
      BMAD_NCCL_CHECK(ncclGetUniqueId(&message.id));
      return Status::Ok();
    }();
    message.ok = id_status.ok() ? 1 : 0;
  }
  BMAD_RETURN_IF_ERROR(bootstrap.Broadcast(&message, sizeof(message), 0));
  if (message.ok == 0) {
    return id_status.ok() ? Unavailable(name + ": rank 0 could not create the NCCL unique id")
                          : id_status;
  }

  std::unique_ptr<NcclCommunicator> nccl(
      new NcclCommunicator(bootstrap.rank(), bootstrap.size(), std::move(name)));
  nccl->set_timeout(bootstrap.timeout());
  nccl->set_metrics(bootstrap.metrics(), bootstrap.metrics_replica());
  if (stream == nullptr) {
    BMAD_CUDA_CHECK(cudaStreamCreateWithFlags(&nccl->stream_, cudaStreamNonBlocking));
    nccl->owns_stream_ = true;
  } else {
    nccl->stream_ = stream;
  }
  BMAD_CUDA_CHECK(cudaMalloc(&nccl->barrier_scratch_, sizeof(float)));
  BMAD_CUDA_CHECK(cudaMemset(nccl->barrier_scratch_, 0, sizeof(float)));

  // Non-blocking: init returns at once (ncclInProgress) and we poll, so a rank that never
  // joins costs a timeout, not a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t init = ncclCommInitRankConfig(&nccl->comm_, bootstrap.size(), message.id,
                                                   bootstrap.rank(), &config);
  if (init != ncclSuccess && init != ncclInProgress) {
    nccl->AbortNccl();
    return Unavailable(nccl->name() + ": ncclCommInitRankConfig failed: " + NcclText(init));
  }
  auto outcome = PollUntil(
      [&]() -> Result<bool> {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t rc = ncclCommGetAsyncError(nccl->comm_, &state);
        if (rc != ncclSuccess) return Unavailable("ncclCommGetAsyncError: " + NcclText(rc));
        if (state == ncclInProgress) return false;
        if (state != ncclSuccess) return Unavailable("joining the NCCL group: " + NcclText(state));
        return true;
      },
      Deadline::After(bootstrap.timeout()));
  if (!outcome.ok() || *outcome != PollOutcome::kDone) {
    nccl->AbortNccl();
    if (!outcome.ok()) return outcome.status().WithContext(nccl->name());
    if (*outcome == PollOutcome::kAborted) {
      return Cancelled(nccl->name() + ": joining the NCCL group: abort requested");
    }
    return DeadlineExceeded(nccl->name() + ": joining the NCCL group of " +
                            std::to_string(bootstrap.size()) + " ranks did not complete within " +
                            std::to_string(bootstrap.timeout().count()) + " ms");
  }
  return nccl;
}

NcclCommunicator::~NcclCommunicator() {
  // Every operation was waited for, so destroying a healthy communicator does not wait on a
  // peer; one that failed was aborted already.
  if (comm_ != nullptr) ncclCommDestroy(comm_);
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (owns_stream_ && stream_ != nullptr) cudaStreamDestroy(stream_);
}

void NcclCommunicator::AbortNccl() {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
}

Result<bool> NcclCommunicator::PollOnce(const Call& call) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
  if (rc != ncclSuccess) return TransportFailed(call, "ncclCommGetAsyncError: " + NcclText(rc));
  // On a non-blocking communicator the operation may still be being enqueued.
  if (state == ncclInProgress) return false;
  if (state != ncclSuccess) {
    return TransportFailed(call, "NCCL: " + NcclText(state) + " (" + ncclGetLastError(comm_) +
                                     ")");
  }
  const cudaError_t query = cudaStreamQuery(stream_);
  if (query == cudaSuccess) return true;
  if (query == cudaErrorNotReady) return false;
  return cuda::CudaStatus(query, "cudaStreamQuery", __FILE__, __LINE__)
      .WithContext(Describe(call));
}

Status NcclCommunicator::Complete(ncclResult_t enqueued, const char* nccl_call,
                                  const Call& call) {
  if (enqueued != ncclSuccess && enqueued != ncclInProgress) {
    AbortNccl();
    return cuda::NcclStatus(enqueued, nccl_call, __FILE__, __LINE__).WithContext(Describe(call));
  }
  auto outcome = PollUntil([&] { return PollOnce(call); }, call.deadline);
  if (outcome.ok() && *outcome == PollOutcome::kDone) return Status::Ok();
  AbortNccl();
  if (!outcome.ok()) return outcome.status();
  return *outcome == PollOutcome::kTimedOut ? TimedOut(call) : Aborted(call);
}

Status NcclCommunicator::DoAllReduceSum(float* data, size_t count, const Call& call) {
  return Complete(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_),
                  "ncclAllReduce", call);
}

Status NcclCommunicator::DoAllGather(const void* send, size_t bytes_per_rank, void* recv,
                                     const Call& call) {
  // NCCL treats send == recv + rank × bytes as in place, matching our contract.
  return Complete(ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm_, stream_),
                  "ncclAllGather", call);
}

Status NcclCommunicator::DoBroadcast(void* data, size_t bytes, int root, const Call& call) {
  return Complete(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_),
                  "ncclBroadcast", call);
}

Status NcclCommunicator::DoBroadcastString(std::string*, int, const Call& call) {
  return Unimplemented(Describe(call) +
                       ": NCCL moves device buffers; broadcast host strings over the MPI "
                       "replica communicator");
}

Status NcclCommunicator::DoSend(const void* data, size_t bytes, int dest, int /*tag*/,
                                const Call& call) {
  return Complete(ncclSend(data, bytes, ncclUint8, dest, comm_, stream_), "ncclSend", call);
}

Status NcclCommunicator::DoRecv(void* data, size_t bytes, int src, int /*tag*/,
                                const Call& call) {
  return Complete(ncclRecv(data, bytes, ncclUint8, src, comm_, stream_), "ncclRecv", call);
}

Status NcclCommunicator::DoBarrier(const Call& call) {
  return Complete(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat, ncclSum,
                                comm_, stream_),
                  "ncclAllReduce (barrier)", call);
}

}  // namespace bmad::parallel
