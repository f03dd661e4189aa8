// Status and Result<T>: expected failures as values.
//
// Every boundary (config, network, files, MPI, CUDA) reports failure through these types; a
// Status carries a code a program can branch on and a message a person can act on. OK costs
// nothing: it holds no allocation.
#pragma once

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace bmad {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,    // the caller's input is wrong; retrying the same input will fail
  kNotFound = 2,           // a named thing (file, request, model) does not exist
  kOutOfRange = 3,         // a value outside its allowed range (e.g. prompt longer than context)
  kFailedPrecondition = 4, // the system is not in a state to do this (e.g. not registered yet)
  kResourceExhausted = 5,  // full: queue, memory, KV blocks; the client may retry later
  kUnavailable = 6,        // a peer is down or unreachable
  kDeadlineExceeded = 7,   // a timeout passed
  kCancelled = 8,          // the work was cancelled by its owner
  kDataLoss = 9,           // corrupt or truncated data (files, messages)
  kUnimplemented = 10,     // valid but not supported (e.g. a tensor type we do not read)
  kInternal = 11,          // a bug or an unexpected failure of a dependency
  kIoError = 12,           // the operating system refused (open, mmap, bind)
  kUnauthenticated = 13,   // the caller gave no valid credentials (an API key)
  // The last code: the wire format refuses any above it (proto::CodeFromWire).
  kLastCode = kUnauthenticated,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The human-readable message; empty for OK.
  const std::string& message() const;
  // "CODE_NAME: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: original message" (code unchanged).
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;  // null means OK; shared so copies are cheap
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status OutOfRange(std::string message);
Status FailedPrecondition(std::string message);
Status ResourceExhausted(std::string message);
Status Unavailable(std::string message);
Status DeadlineExceeded(std::string message);
Status Cancelled(std::string message);
Status DataLoss(std::string message);
Status Unimplemented(std::string message);
Status Internal(std::string message);
Status IoError(std::string message);
Status Unauthenticated(std::string message);

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(data_).ok() && "Result built from an OK status has no value");
    if (std::get<Status>(data_).ok()) data_ = Internal("Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(data_); }

  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Result*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? std::get<T>(data_) : std::move(fallback); }

 private:
  T& checked() {
    if (!ok()) ValueOfErrorResult(std::get<Status>(data_));
    return std::get<T>(data_);
  }
  [[noreturn]] static void ValueOfErrorResult(const Status& status);

  std::variant<T, Status> data_;
};

// Reading the value of a failed Result is a programming error: it aborts with the message.
[[noreturn]] void AbortOnErrorResult(const Status& status);

template <typename T>
void Result<T>::ValueOfErrorResult(const Status& status) {
  AbortOnErrorResult(status);
}

}  // namespace bmad

#define BMAD_STATUS_CONCAT_INNER(a, b) a##b
#define BMAD_STATUS_CONCAT(a, b) BMAD_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` (a Status) is not OK.
#define BMAD_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::bmad::Status bmad_status_tmp_ = (expr);       \
    if (!bmad_status_tmp_.ok()) return bmad_status_tmp_; \
  } while (0)

// `lhs = value of (expr)`, a Result<T>, or returns its Status from the enclosing function.
#define BMAD_ASSIGN_OR_RETURN(lhs, expr) \
  BMAD_ASSIGN_OR_RETURN_IMPL(BMAD_STATUS_CONCAT(bmad_result_, __LINE__), lhs, expr)
#define BMAD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
