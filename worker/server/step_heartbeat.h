// Heartbeats while a step runs.
//
// The worker's loop sends its heartbeat between steps, but one step can outlast the
// coordinator's liveness timeout (a full prefill chunk of a slow model), and a replica that is
// busy is not dead: taken for dead, its requests would be moved and then come back to it as
// duplicates. So while a step runs, this class's thread owns the replica's ZeroMQ socket and
// sends the heartbeat the loop prepared before the step (load and request ids as of the step's
// start) whenever a period has passed since the last one; it looks every quarter period, so the
// gap between two heartbeats stays under 1.25 periods. The loop does not touch the socket between Begin and End; the mutex
// that hands it over is the full memory barrier ZeroMQ asks for when a socket changes threads.
//
// Heartbeats stop once one step has run for `limit` (parallel.step_timeout_ms): a step stuck
// that long is a hang, and the coordinator must then be free to declare the replica dead.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <zmq.hpp>

#include "common/proto/messages.h"

namespace bmad::worker {

class StepHeartbeat {
 public:
  // period_ms, limit_ms > 0. `on_hang(true)` is called (from this object's thread) once a step
  // has run past the limit, and `on_hang(false)` when that step ends.
  StepHeartbeat(zmq::socket_t& socket, int64_t period_ms, int64_t limit_ms,
                std::function<void(bool hung)> on_hang = {});
  ~StepHeartbeat();
  StepHeartbeat(const StepHeartbeat&) = delete;
  StepHeartbeat& operator=(const StepHeartbeat&) = delete;

  // A step starts: from now until End() the socket is this object's. `last_sent_ns` is when the
  // loop last sent a heartbeat (steady clock, as SystemClock::NowNanos).
  void Begin(proto::Heartbeat beat, int64_t last_sent_ns);
  // The step ended: the socket is the caller's again (no send is under way when this returns).
  // Returns when the last heartbeat was sent: during the step, or `last_sent_ns` of Begin.
  int64_t End();

  // Heartbeats sent during steps since construction.
  uint64_t sent() const;

 private:
  void Run();

  zmq::socket_t& socket_;
  const int64_t period_ns_;
  const int64_t limit_ns_;
  const std::function<void(bool)> on_hang_;
  bool hang_reported_ = false;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<proto::Heartbeat> beat_;  // set between Begin and End
  int64_t step_start_ns_ = 0;
  int64_t last_sent_ns_ = 0;
  uint64_t sent_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bmad::worker
