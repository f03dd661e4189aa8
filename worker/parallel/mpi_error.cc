#include "worker/parallel/mpi_error.h"

#include <mpi.h>

#include <string>

namespace bmad::parallel {

std::string MpiErrorText(int error_code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(error_code, text, &length) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(error_code);
  }
  return std::string(text, static_cast<size_t>(length));
}

StatusCode MpiErrorCode(int error_code) {
  int error_class = MPI_ERR_OTHER;
  if (MPI_Error_class(error_code, &error_class) != MPI_SUCCESS) return StatusCode::kUnavailable;
  switch (error_class) {
    case MPI_ERR_ARG:
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_OP:
    case MPI_ERR_COMM:
    case MPI_ERR_GROUP:
      return StatusCode::kInvalidArgument;
    case MPI_ERR_TRUNCATE:
      return StatusCode::kDataLoss;
    default:
      return StatusCode::kUnavailable;
  }
}

Status MpiError(int error_code, std::string_view call, std::string_view context) {
  std::string message(context);
  if (!message.empty()) message += ": ";
  message += std::string(call) + " failed: " + MpiErrorText(error_code);
  return Status(MpiErrorCode(error_code), std::move(message));
}

Status MpiRuntimeError(int error_code, std::string_view call, std::string_view context) {
  Status s = MpiError(error_code, call, context);
  return s.code() == StatusCode::kInvalidArgument ? Unavailable(s.message()) : s;
}

}  // namespace bmad::parallel
