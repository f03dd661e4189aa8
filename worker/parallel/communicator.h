// Communicator: collectives and point-to-point messages among one group of ranks.
//
// A replica is tp × pp ranks; tensor parallelism all-reduces inside a stage, pipeline
// parallelism sends activations from stage to stage, and the leader broadcasts each step's plan
// to the whole replica. All of it goes through this interface: MpiCommunicator (host buffers)
// on the CPU backend, NcclCommunicator (device buffers) on CUDA.
//
// Every call is bounded. It returns, as a Status:
//   - kDeadlineExceeded when it has not completed within timeout() (a peer is slow, hung or
//     dead); the message names the operation, the communicator, the peer(s) and the timeout;
//   - kCancelled when the process-wide abort flag is raised (abort_flag.h) while it waits;
//   - kUnavailable when the transport reports an error (a peer or link is gone);
//   - kInvalidArgument for a bad argument (root or peer out of range, null buffer), detected
//     before anything is sent: the communicator stays usable.
// After any other failure the communicator is unusable and every later call returns
// kFailedPrecondition naming the first failure. The failed call's operation may still be
// pending in the transport, which may read or write its buffers if a late peer ever completes
// it, even after the communicator is destroyed: keep those buffers alive, or better, do what a
// replica does with such a failure, which is to exit.
//
// Collectives must be called by every rank of the group in the same order with matching sizes.
// Send returns when `data` may be reused, which for a large message can mean the receiver has
// posted its Recv: a cycle of Sends (every rank sends first) can wait until the timeout.
//
// Each call's duration, failures included, is observed in the histogram
// bmad_comm_seconds{op=...} when a metrics registry is set (BroadcastString counts as
// "broadcast"; calls refused as kInvalidArgument are not observed).
//
// Thread-safety: none. One thread uses a communicator (MPI is initialised FUNNELED).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics/registry.h"
#include "common/status.h"
#include "worker/parallel/bounded_poll.h"

namespace bmad::parallel {

enum class CommOp { kAllReduce = 0, kAllGather, kBroadcast, kSend, kRecv, kBarrier };
inline constexpr int kNumCommOps = 6;

// The `op` label: "all_reduce", "all_gather", "broadcast", "send", "recv", "barrier".
std::string_view CommOpName(CommOp op);

// The bucket bounds of bmad_comm_seconds: 10 µs .. 30 s.
const std::vector<double>& CommSecondsBuckets();

// The bmad_comm_seconds{op, replica} series (created at zero on first use). A replica of one
// rank registers them all, so its dashboards show zero communication rather than no data.
metrics::Histogram& CommSeconds(metrics::Registry& registry, CommOp op, const std::string& replica);

class Communicator {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{30'000};

  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // A label for messages and logs, e.g. "tp group (replica 0, stage 1)".
  const std::string& name() const { return name_; }

  // The bound on each call from now on (the replica sets parallel.step_timeout_ms). A negative
  // timeout counts as zero: a call then fails unless it completes at its first poll.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Where call durations go; nullptr (the default) records nothing. The registry must outlive
  // this communicator. A non-empty `replica` adds a replica label, as on every worker series.
  void set_metrics(metrics::Registry* registry, const std::string& replica = "");
  metrics::Registry* metrics() const { return metrics_; }
  const std::string& metrics_replica() const { return metrics_replica_; }

  // OK while usable; else the failure that made this communicator unusable.
  const Status& failure() const { return failure_; }

  // Replaces data[0..count) on every rank with its elementwise sum over the ranks.
  Status AllReduceSum(float* data, size_t count);
  // Every rank contributes `bytes_per_rank` bytes from `send`; `recv` (size() × bytes_per_rank
  // bytes) receives them in rank order on every rank. `send` may point at this rank's own slot
  // in `recv` (recv + rank() × bytes_per_rank); it must not overlap `recv` otherwise.
  Status AllGather(const void* send, size_t bytes_per_rank, void* recv);
  // Copies `bytes` bytes from rank `root`'s `data` into every other rank's `data`.
  Status Broadcast(void* data, size_t bytes, int root);
  // Copies `root`'s string into every other rank's *data, whatever their sizes were (the size
  // travels first, then the bytes). Host memory only: NcclCommunicator returns kUnimplemented.
  Status BroadcastString(std::string* data, int root);
  // Point to point; a Recv matches the Send from `src` with the same tag, and two messages
  // with the same (source, tag) arrive in the order they were sent. A Recv of a message whose
  // size differs from `bytes` returns kDataLoss.
  Status Send(const void* data, size_t bytes, int dest, int tag);
  Status Recv(void* data, size_t bytes, int src, int tag);
  // Returns once every rank has entered it.
  Status Barrier();

 protected:
  Communicator(int rank, int size, std::string name);

  // One call in progress, for the implementations' waits and messages.
  struct Call {
    CommOp op;
    int peer = kAllRanks;  // the root of a broadcast, the other end of a send or recv
    int tag = -1;          // point to point only
    size_t bytes = 0;      // this rank's payload (the string's size is unknown to a non-root)
    Deadline deadline;
    static constexpr int kAllRanks = -1;
  };

  // The implementations; arguments are already checked against size() and for null buffers.
  virtual Status DoAllReduceSum(float* data, size_t count, const Call& call) = 0;
  virtual Status DoAllGather(const void* send, size_t bytes_per_rank, void* recv,
                             const Call& call) = 0;
  virtual Status DoBroadcast(void* data, size_t bytes, int root, const Call& call) = 0;
  virtual Status DoBroadcastString(std::string* data, int root, const Call& call) = 0;
  virtual Status DoSend(const void* data, size_t bytes, int dest, int tag, const Call& call) = 0;
  virtual Status DoRecv(void* data, size_t bytes, int src, int tag, const Call& call) = 0;
  virtual Status DoBarrier(const Call& call) = 0;
  // The largest tag the transport accepts.
  virtual int max_tag() const = 0;

  // "all_reduce of 4096 bytes on tp group (replica 0, stage 1) [rank 1 of 2] with all 2 ranks"
  std::string Describe(const Call& call) const;
  // The Statuses of a wait that ended early, with the description and the timeout.
  Status TimedOut(const Call& call) const;
  Status Aborted(const Call& call) const;
  // kUnavailable: the transport reported `detail` (an error string) during `call`.
  Status TransportFailed(const Call& call, std::string_view detail) const;

 private:
  // Checks that the communicator is usable and the flag is down, runs `body` and records its
  // duration (unless it was refused as kInvalidArgument); a failure of any kind other than
  // kInvalidArgument or kUnimplemented makes the communicator unusable.
  template <typename Body>
  Status Run(Call call, Body&& body);
  Status CheckPeer(const Call& call, int peer, std::string_view role) const;
  Status CheckBuffer(const Call& call, const void* p, size_t bytes, std::string_view what) const;

  int rank_;
  int size_;
  std::string name_;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
  metrics::Registry* metrics_ = nullptr;
  std::string metrics_replica_;
  std::array<metrics::Histogram*, kNumCommOps> seconds_{};  // by CommOp; null without metrics
  Status failure_;
};

}  // namespace bmad::parallel
