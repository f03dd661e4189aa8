#include "worker/parallel/abort_flag.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace bmad::parallel {
namespace {

// Only a lock-free atomic may be touched from a signal handler.
static_assert(std::atomic<bool>::is_always_lock_free);
std::atomic<bool> g_abort_requested{false};

extern "C" void RaiseAbortFlag(int) { RequestAbort(); }

}  // namespace

void RequestAbort() { g_abort_requested.store(true, std::memory_order_relaxed); }

bool AbortRequested() { return g_abort_requested.load(std::memory_order_relaxed); }

void ClearAbortRequest() { g_abort_requested.store(false, std::memory_order_relaxed); }

Status InstallAbortSignalHandler(int signal) {
  struct sigaction action {};
  action.sa_handler = RaiseAbortFlag;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read() or write() elsewhere in the process is not failed by the signal; our
  // waits poll the flag, so they notice it without being interrupted.
  action.sa_flags = SA_RESTART;
  if (sigaction(signal, &action, nullptr) != 0) {
    return InvalidArgument("cannot install the abort handler for signal " +
                           std::to_string(signal) + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace bmad::parallel
