#include "tests/support/process_limit.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bmad::testing {

int UnderAProcessLimit(int threads_allowed, const std::function<int()>& body) {
  const pid_t child = fork();
  if (child < 0) return kChildDiedOrHung;
  if (child == 0) {
    // The limit counts every process and thread of the user: this one and the threads allowed.
    const rlim_t n = static_cast<rlim_t>(threads_allowed) + 1;
    const rlimit few{n, n};
    if (setgid(65534) != 0 || setuid(65534) != 0 || setrlimit(RLIMIT_NPROC, &few) != 0) {
      _exit(kProcessLimitNotSet);
    }
    _exit(body());
  }
  // Bounded: what the test checks may also hang (a pool that mishandles the refusal).
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 3000 && (done = waitpid(child, &status, WNOHANG)) == 0; ++i) usleep(10'000);
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    return kChildDiedOrHung;
  }
  return done == child && WIFEXITED(status) ? WEXITSTATUS(status) : kChildDiedOrHung;
}

}  // namespace bmad::testing
