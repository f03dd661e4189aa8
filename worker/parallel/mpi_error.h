// MPI error codes as Statuses. Our communicators set MPI_ERRORS_RETURN, so MPI reports a
// failure by returning a code instead of aborting the job; this names it.
#pragma once

#include <string_view>

#include "common/status.h"

namespace bmad::parallel {

// The MPI library's text for `error_code` (MPI_Error_string).
std::string MpiErrorText(int error_code);

// The StatusCode for an MPI error: argument errors (rank, tag, count, root, type, ...) are
// kInvalidArgument, a message longer than its receive buffer is kDataLoss, and anything else
// (a peer or link that is gone, a broken runtime) is kUnavailable.
StatusCode MpiErrorCode(int error_code);

// Status(MpiErrorCode(error_code), "<context>: <call> failed: <MPI's text>").
Status MpiError(int error_code, std::string_view call, std::string_view context);

// MpiError for a call whose arguments were checked before MPI saw them (the communicators'):
// an argument error then means the runtime went wrong on this rank alone, while its peers may
// have posted the same operation and wait for it, so it is kUnavailable, never the
// kInvalidArgument of a refusal every rank made alike (which callers go on after).
Status MpiRuntimeError(int error_code, std::string_view call, std::string_view context);

}  // namespace bmad::parallel
