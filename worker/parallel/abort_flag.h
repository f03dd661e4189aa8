// The process-wide stop flag that every communicator wait checks.
//
// When one rank of a replica dies, mpirun sends SIGTERM to the survivors; a survivor blocked in
// a collective must then give up at once rather than wait out its timeout. A signal handler
// can do nothing but set a flag, so this is that flag: RequestAbort() raises it (safe inside a
// signal handler), and every bounded wait in this library returns kCancelled once it is up.
#pragma once

#include "common/status.h"

namespace bmad::parallel {

// Raises the flag. Async-signal-safe: call it from a SIGTERM handler.
void RequestAbort();
// True once RequestAbort() was called (and ClearAbortRequest() was not called since).
bool AbortRequested();
// Lowers the flag: for tests, and for a process that decides to carry on.
void ClearAbortRequest();

// Installs a handler for `signal` (e.g. SIGTERM) whose only action is RequestAbort(); it
// replaces any handler installed before. A process that needs to do more on the signal (the
// worker drains on SIGTERM) installs its own handler and calls RequestAbort() from it instead.
// Returns kInvalidArgument when the signal cannot be caught (SIGKILL, SIGSTOP, out of range).
Status InstallAbortSignalHandler(int signal);

}  // namespace bmad::parallel
