// A fixed set of compute threads that run one parallel loop at a time. The calling thread takes
// part, so a pool of N threads starts N-1 workers.
//
// Chunks are claimed from one atomic word holding (loop generation, next chunk), and a loop
// that is over is closed (its next chunk set past any count) before the next one is set up, so
// a worker that wakes late can never take a chunk of a loop that is over. The caller never
// waits for a worker that has nothing to do: it waits only for chunks already claimed. On a busy machine,
// where a worker may not be scheduled for milliseconds, the caller simply does the work itself.
// Workers spin briefly between loops (the ops of one engine step follow each other within
// microseconds, and waking a sleeping thread costs far more), then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace bmad::kernels::cpu {

class ThreadPool {
 public:
  // fn(begin, end, thread): handles tasks [begin, end); thread is in [0, size()).
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Runs fn over [0, n_tasks) in chunks of `grain` tasks, handed out dynamically; returns when
  // every task is done. A one-thread pool, or a loop of at most one grain, runs as a single
  // call on the caller's thread. Not reentrant: one loop at a time, from one caller thread.
  // An exception from fn, on any thread, is rethrown here once every other chunk has run (the
  // loop is closed first, so the pool stays usable).
  void ParallelFor(int64_t n_tasks, int64_t grain, const RangeFn& fn);

 private:
  void StopWorkers();  // wakes every worker, tells it to stop, and joins it
  void WorkerLoop(int thread);
  // Claims and runs chunks of the loop of generation `gen` until none are left.
  void RunChunks(uint32_t gen, int thread);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // The current loop; written by the caller before it publishes a new generation.
  const RangeFn* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  int64_t grain_ = 1;
  // Atomic because a worker that woke late reads it before its claim fails (a newer loop may
  // be writing it); the claim (state_) is what orders everything else.
  std::atomic<uint32_t> n_chunks_{0};
  // (generation << 32) | next chunk index.
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> chunks_done_{0};
  // The loop's first exception (set before its chunk counts as done).
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
};

// Cores this process may use (sched affinity), at least 1.
int AvailableCores();

}  // namespace bmad::kernels::cpu
