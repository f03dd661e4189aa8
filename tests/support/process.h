// A child process for integration tests: started with posix_spawn, its output captured in a
// file, and always stopped (SIGTERM, then SIGKILL) when the object goes away, so a failing test
// never leaves a server behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bmad::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (looked up in PATH when it has no slash) with `env` added to this process's
  // environment; stdout and stderr go to `log_path`. Returns false (with errno text in
  // error()) when it cannot start.
  bool Start(const std::vector<std::string>& argv, const std::string& log_path,
             const std::map<std::string, std::string>& env = {});

  bool running();
  // Waits up to `timeout` for exit; returns the exit status (128+signal when killed).
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status.
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  void Signal(int sig);

  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  std::string ReadLog() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::string log_path_;
  std::string error_;
};

// Polls `predicate` every `interval` until it is true or `timeout` passes.
template <typename Predicate>
bool WaitFor(Predicate predicate, std::chrono::milliseconds timeout,
             std::chrono::milliseconds interval = std::chrono::milliseconds(50));

}  // namespace bmad::testing

#include <thread>

template <typename Predicate>
bool bmad::testing::WaitFor(Predicate predicate, std::chrono::milliseconds timeout,
                            std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (predicate()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}
