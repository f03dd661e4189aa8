// MpiSession: MPI's lifetime in a process (MPI_Init_thread ... MPI_Finalize), and where the
// launcher says this process stands before MPI is up.
//
// A worker creates one session first thing in main and keeps it until it returns. It works
// in a program that mpirun did not start: MPI then runs as a "singleton", a world of size 1.
// MPI can be initialised only once per process: a second session while one is alive, or a new
// one after the first finalised MPI, is kFailedPrecondition. If something else initialised MPI
// already, the session uses it and leaves finalising to its owner.
//
// MPI_THREAD_FUNNELED is requested: only the thread that created the session calls MPI (the
// communicators are single-threaded; the watchdog thread never calls MPI).
#pragma once

#include <chrono>
#include <memory>

#include "common/status.h"

namespace bmad::parallel {

// What the launcher put in the environment (Open MPI's OMPI_COMM_WORLD_*, else PMI_RANK /
// PMI_SIZE, else PMIX_RANK): readable before MPI_Init, e.g. to name a log file or pick a GPU by
// local rank. Without a launcher: rank 0 of 1, launched = false.
struct LaunchInfo {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank among the ranks on this host
  bool launched = false;
};
LaunchInfo ReadLaunchInfo();

class MpiSession {
 public:
  // Initialises MPI with `argc`/`argv` (both may be null) and sets MPI_ERRORS_RETURN on
  // MPI_COMM_WORLD, so MPI failures come back as codes instead of aborting the job.
  static Result<std::unique_ptr<MpiSession>> Start(int* argc = nullptr, char*** argv = nullptr);

  // Finalize(kFinalizeTimeout) unless it was called.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  static constexpr std::chrono::milliseconds kFinalizeTimeout{30'000};
  // For Finalize: wait for every rank however long they take (only the abort flag ends it).
  static constexpr std::chrono::milliseconds kNoTimeout = std::chrono::milliseconds::max();

  // Ends MPI, when this session initialised it; a second call does nothing. MPI_Finalize waits
  // for every rank, so a hung peer would hang it: first a barrier over the world, bounded by
  // `timeout` and the abort flag, and only when every rank arrived, MPI_Finalize. Otherwise MPI
  // is left running and the barrier's Status is returned; the process should then exit
  // (mpirun reports a rank that exits without finalising, which is the truth). Communicators
  // should be destroyed first (one destroyed after this frees nothing).
  Status Finalize(std::chrono::milliseconds timeout = kFinalizeTimeout);

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // The MPI_THREAD_* level MPI granted.
  int thread_level() const { return thread_level_; }

 private:
  MpiSession(bool owns_mpi, int world_rank, int world_size, int thread_level);

  bool owns_mpi_;
  bool finalize_called_ = false;
  int world_rank_;
  int world_size_;
  int thread_level_;
};

}  // namespace bmad::parallel
