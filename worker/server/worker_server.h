// The worker replica process: loads the model, runs the engine, and talks to the coordinator
// over one ZeroMQ DEALER socket (register, heartbeat with load, take assignments and cancels,
// stream token chunks back, drain, shut down). Serves its Prometheus metrics on its own port.
//
// One thread runs the event loop: handle every message that is waiting, run one engine step if
// there is work (or block on the socket until the next heartbeat if there is none), send the
// step's chunks, heartbeat when due. A coordinator that restarts is handled by registering again
// when it answers a heartbeat with "unknown replica".
//
// When the replica spans ranks, this is its leader: each step goes to the other ranks as a plan,
// keepalives go out while idle, and a shutdown plan when it stops. If a rank fails (a step or
// collective past parallel.step_timeout_ms, a dead peer), the leader tells the coordinator
// (Shutdown with the reason, so its requests move at once) and Run returns the error.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/config/config.h"
#include "common/status.h"
#include "worker/server/replica.h"

namespace bmad::worker {

struct WorkerRunOptions {
  int replica_index = 0;        // this replica's index among the cluster's (metrics port offset)
  int64_t max_run_ms = 0;       // stop by itself after this long (tests); 0: run until told
  ReplicaRank rank;             // set when the replica spans MPI ranks (this is its leader)
};

class WorkerServer {
 public:
  // Loads the model and builds the engine; errors name what is wrong (model file, backend,
  // memory, ports).
  static Result<std::unique_ptr<WorkerServer>> Create(const ServerConfig& config,
                                                      const WorkerRunOptions& options);
  ~WorkerServer();

  // Runs until shutdown, a finished drain, RequestStop(), or max_run_ms. Returns the exit
  // status (OK for a clean stop).
  Status Run();
  // Thread- and signal-safe: begin draining (finish running requests, accept none) then stop.
  void RequestStop();
  // Thread- and signal-safe: stop after the step in progress without finishing the running
  // requests; the coordinator is told the replica is going down (proto::Shutdown) and moves
  // them to other replicas, which continue after the tokens already streamed. (A second
  // SIGTERM, for an operator who cannot wait for a drain.)
  void RequestStopNow();

  int metrics_port() const;
  // Whether Run's error was the coordinator's refusal of this replica: a clean stop of its
  // ranks (they were told to stop), not a failure.
  bool refused() const;

 private:
  struct Impl;
  explicit WorkerServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bmad::worker
