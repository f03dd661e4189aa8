#include "worker/parallel/mpi_communicator.h"

#include <climits>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "worker/parallel/mpi_error.h"

namespace bmad::parallel {
namespace {

bool MpiIsUsable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

// How long an abandoned send or receive gets to acknowledge its cancellation.
constexpr std::chrono::milliseconds kCancelGrace{20};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int rank, int size, std::string name)
    : Communicator(rank, size, std::move(name)), comm_(comm) {
  void* tag_ub = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found) == MPI_SUCCESS && found != 0) {
    max_tag_ = *static_cast<int*>(tag_ub);
  }
}

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Adopt(MPI_Comm comm,
                                                                std::string name) {
  int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm, &rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &size);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    return MpiError(rc, "MPI_Comm_rank/size", "communicator " + name);
  }
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(comm, rank, size, std::move(name)));
}

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::World(
    std::chrono::milliseconds timeout) {
  if (!MpiIsUsable()) {
    return FailedPrecondition("MPI is not initialised (or already finalised): start an "
                              "MpiSession before making communicators");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_idup", "world communicator");
  const Deadline deadline = Deadline::After(timeout);
  auto outcome = PollUntil(
      [&]() -> Result<bool> {
        int done = 0;
        const int test_rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (test_rc != MPI_SUCCESS) return MpiError(test_rc, "MPI_Test", "world communicator");
        return done != 0;
      },
      deadline);
  if (!outcome.ok()) return outcome.status();
  if (*outcome == PollOutcome::kTimedOut) {
    return DeadlineExceeded("duplicating the world communicator did not complete within " +
                            std::to_string(timeout.count()) +
                            " ms: not every rank called MpiCommunicator::World()");
  }
  if (*outcome == PollOutcome::kAborted) {
    return Cancelled("duplicating the world communicator: abort requested");
  }
  BMAD_ASSIGN_OR_RETURN(auto world, Adopt(dup, "world"));
  world->set_timeout(timeout);
  return world;
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ == MPI_COMM_NULL || !MpiIsUsable()) return;
  // One last chance for abandoned requests that completed meanwhile; the rest stay with MPI
  // (freeing the communicator with operations pending is allowed: it is freed once they end).
  for (MPI_Request& request : abandoned_) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&comm_);
}

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Split(int color, int key,
                                                                std::string child_name) {
  // The rendezvous: a bounded all-gather of every rank's (colour, key). After it every rank is
  // known to be inside Split, so the blocking MPI_Comm_split that follows can only stall if a
  // rank dies in between (the step watchdog covers that).
  const int mine[2] = {color, key};
  std::vector<int> all(static_cast<size_t>(size()) * 2);
  BMAD_RETURN_IF_ERROR(AllGather(mine, sizeof(mine), all.data()));
  for (int r = 0; r < size(); ++r) {
    if (all[static_cast<size_t>(r) * 2] < 0) {
      return InvalidArgument("splitting " + name() + " into " + child_name + ": rank " +
                             std::to_string(r) + " passed colour " +
                             std::to_string(all[static_cast<size_t>(r) * 2]) +
                             " (colours must be >= 0)");
    }
  }
  MPI_Comm child = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(comm_, color, key, &child);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split", "splitting " + name());
  BMAD_ASSIGN_OR_RETURN(auto result, Adopt(child, std::move(child_name)));
  result->set_timeout(timeout());
  result->set_metrics(metrics(), metrics_replica());
  return result;
}

Status MpiCommunicator::Failed(const Call& call, int error_code, const char* mpi_call) const {
  return MpiRuntimeError(error_code, mpi_call, Describe(call));
}

Status MpiCommunicator::CheckCount(const Call& call, size_t count) const {
  if (count <= static_cast<size_t>(INT_MAX)) return Status::Ok();
  return InvalidArgument(Describe(call) + ": " + std::to_string(count) +
                         " elements exceed MPI's limit of " + std::to_string(INT_MAX));
}

Status MpiCommunicator::Wait(MPI_Request* request, const Call& call, MPI_Status* status) {
  MPI_Status ignored;
  MPI_Status* out = status != nullptr ? status : &ignored;
  auto outcome = PollUntil(
      [&]() -> Result<bool> {
        int done = 0;
        const int rc = MPI_Test(request, &done, out);
        if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Test");
        return done != 0;
      },
      call.deadline);
  if (!outcome.ok()) {
    // MPI reported the failure (Failed: never kInvalidArgument); whether the request is still
    // alive is undefined, so it is neither tested nor freed again.
    return outcome.status();
  }
  if (*outcome == PollOutcome::kDone) return Status::Ok();
  Abandon(*request, call);
  *request = MPI_REQUEST_NULL;
  return *outcome == PollOutcome::kTimedOut ? TimedOut(call) : Aborted(call);
}

void MpiCommunicator::Abandon(MPI_Request request, const Call& call) {
  if (call.op == CommOp::kSend || call.op == CommOp::kRecv) {
    // A cancelled receive (or a send MPI manages to cancel) no longer touches the buffer.
    if (MPI_Cancel(&request) == MPI_SUCCESS) {
      const Deadline grace = Deadline::After(kCancelGrace);
      PollBackoff backoff;
      while (true) {
        int done = 0;
        if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
        if (done != 0) return;
        if (grace.Passed()) break;
        backoff.Pause();
      }
    }
  }
  log::Warn("comm", "abandoning a pending MPI request; its buffers stay in use",
            {{"op", CommOpName(call.op)}, {"comm", name()}});
  abandoned_.push_back(request);
}

Status MpiCommunicator::DoAllReduceSum(float* data, size_t count, const Call& call) {
  BMAD_RETURN_IF_ERROR(CheckCount(call, count));
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Iallreduce");
  return Wait(&request, call);
}

Status MpiCommunicator::DoAllGather(const void* send, size_t bytes_per_rank, void* recv,
                                    const Call& call) {
  BMAD_RETURN_IF_ERROR(CheckCount(call, bytes_per_rank));
  const int count = static_cast<int>(bytes_per_rank);
  // MPI forbids aliased send and receive buffers; our own slot is the in-place form.
  const void* own_slot =
      static_cast<const char*>(recv) + static_cast<size_t>(rank()) * bytes_per_rank;
  const void* send_arg = send == own_slot ? MPI_IN_PLACE : send;
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc =
      MPI_Iallgather(send_arg, count, MPI_BYTE, recv, count, MPI_BYTE, comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Iallgather");
  return Wait(&request, call);
}

Status MpiCommunicator::DoBroadcast(void* data, size_t bytes, int root, const Call& call) {
  BMAD_RETURN_IF_ERROR(CheckCount(call, bytes));
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Ibcast");
  return Wait(&request, call);
}

Status MpiCommunicator::DoBroadcastString(std::string* data, int root, const Call& call) {
  // Two broadcasts under the call's one deadline: the size (so every rank can make room), then
  // the bytes. A root whose string is too large for MPI still sends its size, so the other
  // ranks stop too instead of waiting for bytes that never come.
  uint64_t size = rank() == root ? static_cast<uint64_t>(data->size()) : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Ibcast(&size, 1, MPI_UINT64_T, root, comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Ibcast");
  BMAD_RETURN_IF_ERROR(Wait(&request, call));
  if (size > static_cast<uint64_t>(INT_MAX)) {
    return InvalidArgument(Describe(call) + ": a string of " + std::to_string(size) +
                           " bytes exceeds MPI's limit of " + std::to_string(INT_MAX));
  }
  if (size == 0) {
    data->clear();
    return Status::Ok();
  }
  if (rank() != root) data->resize(static_cast<size_t>(size));
  rc = MPI_Ibcast(data->data(), static_cast<int>(size), MPI_BYTE, root, comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Ibcast");
  return Wait(&request, call);
}

Status MpiCommunicator::DoSend(const void* data, size_t bytes, int dest, int tag,
                               const Call& call) {
  BMAD_RETURN_IF_ERROR(CheckCount(call, bytes));
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, dest, tag, comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Isend");
  return Wait(&request, call);
}

Status MpiCommunicator::DoRecv(void* data, size_t bytes, int src, int tag, const Call& call) {
  BMAD_RETURN_IF_ERROR(CheckCount(call, bytes));
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, src, tag, comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Irecv");
  MPI_Status status;
  BMAD_RETURN_IF_ERROR(Wait(&request, call, &status));
  int received = 0;
  rc = MPI_Get_count(&status, MPI_BYTE, &received);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Get_count");
  if (static_cast<size_t>(received) != bytes) {
    return DataLoss(Describe(call) + ": the message has " + std::to_string(received) +
                    " bytes, not the " + std::to_string(bytes) + " expected");
  }
  return Status::Ok();
}

Status MpiCommunicator::DoBarrier(const Call& call) {
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ibarrier(comm_, &request);
  if (rc != MPI_SUCCESS) return Failed(call, rc, "MPI_Ibarrier");
  return Wait(&request, call);
}

}  // namespace bmad::parallel
