#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define BMAD_CPU_RELAX() _mm_pause()
#else
#define BMAD_CPU_RELAX() std::this_thread::yield()
#endif

namespace bmad::kernels::cpu {
namespace {
// About 50-100 µs of spinning before a worker sleeps.
constexpr int kSpinIterations = 20000;
}  // namespace

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::RunChunks(int thread) {
  while (true) {
    const int64_t begin = next_task_.fetch_add(grain_, std::memory_order_relaxed);
    if (begin >= n_tasks_) break;
    (*fn_)(begin, std::min(n_tasks_, begin + grain_), thread);
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks, int64_t grain, const RangeFn& fn) {
  if (n_tasks <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n_tasks <= grain) {
    fn(0, n_tasks, 0);
    return;
  }
  fn_ = &fn;
  n_tasks_ = n_tasks;
  grain_ = grain;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // The lock orders the job fields before the generation bump for sleeping workers.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  RunChunks(0);
  while (busy_workers_.load(std::memory_order_acquire) != 0) BMAD_CPU_RELAX();
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; i < kSpinIterations && gen == seen; ++i) {
      BMAD_CPU_RELAX();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    RunChunks(thread);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace bmad::kernels::cpu
