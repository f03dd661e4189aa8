#include "worker/parallel/communicator.h"

#include <utility>

namespace bmad::parallel {
namespace {

constexpr std::array<std::string_view, kNumCommOps> kOpNames = {
    "all_reduce", "all_gather", "broadcast", "send", "recv", "barrier"};

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

bool BreaksCommunicator(const Status& status) {
  return !status.ok() && status.code() != StatusCode::kInvalidArgument &&
         status.code() != StatusCode::kUnimplemented;
}

}  // namespace

std::string_view CommOpName(CommOp op) { return kOpNames[static_cast<size_t>(op)]; }

const std::vector<double>& CommSecondsBuckets() {
  static const std::vector<double> kBuckets = {0.00001, 0.00003, 0.0001, 0.0003, 0.001,
                                               0.003,   0.01,    0.03,   0.1,    0.3,
                                               1.0,     3.0,     10.0,   30.0};
  return kBuckets;
}

Communicator::Communicator(int rank, int size, std::string name)
    : rank_(rank), size_(size), name_(std::move(name)) {}

metrics::Histogram& CommSeconds(metrics::Registry& registry, CommOp op, const std::string& replica) {
  metrics::Labels labels = {{"op", std::string(CommOpName(op))}};
  if (!replica.empty()) labels["replica"] = replica;
  return registry.GetHistogram("bmad_comm_seconds",
                               "Duration of one communicator call (tensor/pipeline parallelism), "
                               "failed calls included.",
                               CommSecondsBuckets(), labels);
}

void Communicator::set_metrics(metrics::Registry* registry, const std::string& replica) {
  metrics_ = registry;
  metrics_replica_ = replica;
  for (int i = 0; i < kNumCommOps; ++i) {
    seconds_[i] = registry == nullptr ? nullptr : &CommSeconds(*registry, static_cast<CommOp>(i), replica);
  }
}

template <typename Body>
Status Communicator::Run(Call call, Body&& body) {
  if (!failure_.ok()) {
    return FailedPrecondition(Describe(call) + ": the communicator is unusable after an earlier "
                                               "failure: " + failure_.ToString());
  }
  // Nothing has been posted yet, so refusing leaves the communicator consistent.
  if (AbortRequested()) {
    return Cancelled(Describe(call) + ": not started: the process is stopping (abort requested)");
  }
  const auto start = SteadyClock::now();
  call.deadline = Deadline::After(timeout_);
  Status status = body(call);
  // A call refused for its arguments never reached the peers: it is not a communication.
  auto* histogram = seconds_[static_cast<size_t>(call.op)];
  if (histogram != nullptr && status.code() != StatusCode::kInvalidArgument) {
    histogram->Observe(SecondsSince(start));
  }
  if (BreaksCommunicator(status)) failure_ = status;
  return status;
}

Status Communicator::CheckPeer(const Call& call, int peer, std::string_view role) const {
  if (peer >= 0 && peer < size_) return Status::Ok();
  return InvalidArgument(Describe(call) + ": " + std::string(role) + " " + std::to_string(peer) +
                         " is not a rank of this communicator (size " + std::to_string(size_) +
                         ")");
}

Status Communicator::CheckBuffer(const Call& call, const void* p, size_t bytes,
                                 std::string_view what) const {
  if (p != nullptr || bytes == 0) return Status::Ok();
  return InvalidArgument(Describe(call) + ": " + std::string(what) + " is null");
}

Status Communicator::AllReduceSum(float* data, size_t count) {
  return Run(Call{CommOp::kAllReduce, Call::kAllRanks, -1, count * sizeof(float), {}},
             [&](const Call& call) {
               BMAD_RETURN_IF_ERROR(CheckBuffer(call, data, count, "data"));
               return DoAllReduceSum(data, count, call);
             });
}

Status Communicator::AllGather(const void* send, size_t bytes_per_rank, void* recv) {
  return Run(Call{CommOp::kAllGather, Call::kAllRanks, -1, bytes_per_rank, {}},
             [&](const Call& call) {
               BMAD_RETURN_IF_ERROR(CheckBuffer(call, send, bytes_per_rank, "send"));
               BMAD_RETURN_IF_ERROR(CheckBuffer(call, recv, bytes_per_rank, "recv"));
               return DoAllGather(send, bytes_per_rank, recv, call);
             });
}

Status Communicator::Broadcast(void* data, size_t bytes, int root) {
  return Run(Call{CommOp::kBroadcast, root, -1, bytes, {}}, [&](const Call& call) {
    BMAD_RETURN_IF_ERROR(CheckPeer(call, root, "root"));
    BMAD_RETURN_IF_ERROR(CheckBuffer(call, data, bytes, "data"));
    return DoBroadcast(data, bytes, root, call);
  });
}

Status Communicator::BroadcastString(std::string* data, int root) {
  const size_t bytes = data != nullptr && root == rank_ ? data->size() : 0;
  return Run(Call{CommOp::kBroadcast, root, -1, bytes, {}}, [&](const Call& call) {
    BMAD_RETURN_IF_ERROR(CheckPeer(call, root, "root"));
    if (data == nullptr) return InvalidArgument(Describe(call) + ": the string is null");
    return DoBroadcastString(data, root, call);
  });
}

Status Communicator::Send(const void* data, size_t bytes, int dest, int tag) {
  return Run(Call{CommOp::kSend, dest, tag, bytes, {}}, [&](const Call& call) {
    BMAD_RETURN_IF_ERROR(CheckPeer(call, dest, "destination"));
    BMAD_RETURN_IF_ERROR(CheckBuffer(call, data, bytes, "data"));
    if (tag < 0 || tag > max_tag()) {
      return InvalidArgument(Describe(call) + ": tag must be in [0, " + std::to_string(max_tag()) +
                             "]");
    }
    return DoSend(data, bytes, dest, tag, call);
  });
}

Status Communicator::Recv(void* data, size_t bytes, int src, int tag) {
  return Run(Call{CommOp::kRecv, src, tag, bytes, {}}, [&](const Call& call) {
    BMAD_RETURN_IF_ERROR(CheckPeer(call, src, "source"));
    BMAD_RETURN_IF_ERROR(CheckBuffer(call, data, bytes, "data"));
    if (tag < 0 || tag > max_tag()) {
      return InvalidArgument(Describe(call) + ": tag must be in [0, " + std::to_string(max_tag()) +
                             "]");
    }
    return DoRecv(data, bytes, src, tag, call);
  });
}

Status Communicator::Barrier() {
  return Run(Call{CommOp::kBarrier, Call::kAllRanks, -1, 0, {}},
             [&](const Call& call) { return DoBarrier(call); });
}

std::string Communicator::Describe(const Call& call) const {
  std::string text(CommOpName(call.op));
  if (call.op != CommOp::kBarrier) text += " of " + std::to_string(call.bytes) + " bytes";
  text += " on " + name_ + " [rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
          "]";
  switch (call.op) {
    case CommOp::kSend:
      text += " to rank " + std::to_string(call.peer) + " (tag " + std::to_string(call.tag) + ")";
      break;
    case CommOp::kRecv:
      text += " from rank " + std::to_string(call.peer) + " (tag " + std::to_string(call.tag) + ")";
      break;
    case CommOp::kBroadcast:
      text += " from root " + std::to_string(call.peer) + " to all " + std::to_string(size_) +
              " ranks";
      break;
    default:
      text += " with all " + std::to_string(size_) + " ranks";
  }
  return text;
}

Status Communicator::TimedOut(const Call& call) const {
  return DeadlineExceeded(Describe(call) + ": did not complete within " +
                          std::to_string(call.deadline.timeout.count()) +
                          " ms (a peer rank is slow, hung or dead)");
}

Status Communicator::Aborted(const Call& call) const {
  return Cancelled(Describe(call) + ": abandoned: the process is stopping (abort requested)");
}

Status Communicator::TransportFailed(const Call& call, std::string_view detail) const {
  return Unavailable(Describe(call) + ": " + std::string(detail));
}

}  // namespace bmad::parallel
