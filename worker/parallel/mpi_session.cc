#include "worker/parallel/mpi_session.h"

#include <mpi.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/log.h"
#include "worker/parallel/bounded_poll.h"
#include "worker/parallel/mpi_error.h"

namespace bmad::parallel {
namespace {

std::atomic<bool> g_session_alive{false};

std::optional<int> IntFromEnvironment(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  int value = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, error] = std::from_chars(text, end, value);
  if (error != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

}  // namespace

LaunchInfo ReadLaunchInfo() {
  LaunchInfo info;
  const std::pair<const char*, const char*> kRankAndSize[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"PMIX_RANK", nullptr}};
  for (const auto& [rank_name, size_name] : kRankAndSize) {
    const auto rank = IntFromEnvironment(rank_name);
    if (!rank) continue;
    info.world_rank = *rank;
    info.launched = true;
    if (size_name != nullptr) info.world_size = IntFromEnvironment(size_name).value_or(1);
    break;
  }
  // PMIX_RANK alone does not give the size; the rank must still lie inside the world.
  if (info.world_size <= info.world_rank) info.world_size = info.world_rank + 1;
  info.local_rank = IntFromEnvironment("OMPI_COMM_WORLD_LOCAL_RANK")
                        .value_or(IntFromEnvironment("MPI_LOCALRANKID").value_or(0));
  return info;
}

Result<std::unique_ptr<MpiSession>> MpiSession::Start(int* argc, char*** argv) {
  if (g_session_alive.exchange(true)) {
    return FailedPrecondition("an MpiSession already exists in this process");
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized != 0) {
    g_session_alive = false;
    return FailedPrecondition("MPI was already finalised in this process; it cannot start again");
  }
  int level = MPI_THREAD_SINGLE;
  const bool owns = initialized == 0;
  if (owns) {
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &level);
    if (rc != MPI_SUCCESS) {
      g_session_alive = false;
      return Unavailable("MPI_Init_thread failed with code " + std::to_string(rc));
    }
  } else {
    MPI_Query_thread(&level);
  }
  if (level < MPI_THREAD_FUNNELED) {
    log::Warn("mpi", "MPI granted less than MPI_THREAD_FUNNELED", {{"level", level}});
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  int rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rc != MPI_SUCCESS) {
    if (owns) MPI_Finalize();
    g_session_alive = false;
    return MpiError(rc, "MPI_Comm_rank/size", "starting MPI");
  }
  return std::unique_ptr<MpiSession>(new MpiSession(owns, rank, size, level));
}

MpiSession::MpiSession(bool owns_mpi, int world_rank, int world_size, int thread_level)
    : owns_mpi_(owns_mpi),
      world_rank_(world_rank),
      world_size_(world_size),
      thread_level_(thread_level) {}

MpiSession::~MpiSession() {
  if (!finalize_called_) {
    const Status status = Finalize();
    if (!status.ok()) log::Error("mpi", "MPI left unfinalised", {{"error", status}});
  }
  g_session_alive = false;
}

Status MpiSession::Finalize(std::chrono::milliseconds timeout) {
  if (finalize_called_) return Status::Ok();
  finalize_called_ = true;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!owns_mpi_ || finalized != 0) return Status::Ok();
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ibarrier", "finalising MPI");
  auto outcome = PollUntil(
      [&]() -> Result<bool> {
        int done = 0;
        const int test_rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (test_rc != MPI_SUCCESS) return MpiError(test_rc, "MPI_Test", "finalising MPI");
        return done != 0;
      },
      Deadline::After(timeout));
  if (!outcome.ok()) return outcome.status();
  if (*outcome == PollOutcome::kTimedOut) {
    return DeadlineExceeded("finalising MPI: not every rank arrived within " +
                            std::to_string(timeout.count()) + " ms (a peer is hung or dead)");
  }
  if (*outcome == PollOutcome::kAborted) return Cancelled("finalising MPI: abort requested");
  rc = MPI_Finalize();
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Finalize", "finalising MPI");
  return Status::Ok();
}

}  // namespace bmad::parallel
