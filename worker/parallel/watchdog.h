// Watchdog: ends a rank whose step never finishes.
//
// The communicators bound every wait, but a rank can still be stuck where no timeout reaches:
// inside a blocking library call (MPI_Comm_split, a CUDA sync, NCCL init) or in its own
// code. The engine arms the watchdog at the start of each step and disarms it at the end; if a
// step stays armed longer than the step timeout, the watchdog's thread logs one error line
//   replica <id> rank <r>: step <n> did not finish within <ms> ms; a peer rank is hung or dead; exiting
// runs the caller's best-effort callback (the leader tells the coordinator) for at most a
// grace period, and ends the process with _exit(3). mpirun then stops the other ranks, and
// the coordinator migrates the replica's requests.
//
// Arm and Disarm are cheap (a mutex and a notify) and may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace bmad::parallel {

class Watchdog {
 public:
  static constexpr int kExitCode = 3;

  struct Options {
    std::string replica_id;
    int rank = 0;
    std::chrono::milliseconds step_timeout{30'000};  // parallel.step_timeout_ms
    // Run once, on a thread of its own, before the process ends; exceptions are swallowed.
    // The exit does not wait for it longer than `on_fire_grace`.
    std::function<void()> on_fire;
    std::chrono::milliseconds on_fire_grace{2'000};
    // Ends the process with the given status. Default: _exit (no destructors, no atexit
    // handlers: a stuck thread must not be able to block the exit). Tests inject a recorder;
    // if it returns, the watchdog stays quiet until armed again.
    std::function<void(int status)> exit;
  };

  explicit Watchdog(Options options);
  // Stops the thread without firing.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts timing `step_id` from now, replacing any step still armed.
  void Arm(uint64_t step_id);
  // Stops timing; nothing happens when nothing is armed.
  void Disarm();

  // How many times it has fired (0 or 1 in a real process, which does not survive it).
  int fire_count() const;

 private:
  void Run();
  void Fire(uint64_t step_id);

  Options options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool stopping_ = false;
  uint64_t step_id_ = 0;
  uint64_t generation_ = 0;  // bumped by every Arm and Disarm: a wait for an older one is void
  std::chrono::steady_clock::time_point armed_at_;
  int fire_count_ = 0;
  std::thread thread_;  // last: starts after every other member is ready
};

}  // namespace bmad::parallel
