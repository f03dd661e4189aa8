// Running a piece of a test where the system refuses threads: in a child process made an
// unprivileged user (a process limit binds no root process) whose RLIMIT_NPROC leaves room for
// `threads_allowed` threads beside its own.
#pragma once

#include <functional>

namespace bmad::testing {

// What UnderAProcessLimit returns besides `body`'s own code.
inline constexpr int kProcessLimitNotSet = 3;    // could not become user 65534 with the limit
inline constexpr int kChildDiedOrHung = -1;      // a signal ended the child, or 30 s passed

// Runs `body` in such a child and returns its code (keep it in 0..2, 4..125 for your outcomes),
// or one of the two above. Needs root; with user 65534 already running processes here, the
// limit may bind earlier than asked.
int UnderAProcessLimit(int threads_allowed, const std::function<int()>& body);

}  // namespace bmad::testing
