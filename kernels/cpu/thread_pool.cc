#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#define BMAD_CPU_RELAX() _mm_pause()
#else
#define BMAD_CPU_RELAX() std::this_thread::yield()
#endif

namespace bmad::kernels::cpu {
namespace {

// How long a worker spins for the next loop before it sleeps.
constexpr auto kSpinTime = std::chrono::microseconds(2000);

uint32_t Generation(uint64_t state) { return static_cast<uint32_t>(state >> 32); }
uint32_t NextChunk(uint64_t state) { return static_cast<uint32_t>(state); }

// The next-chunk index of a loop that is over: above every chunk count, so nothing can be
// claimed from it.
constexpr uint32_t kClosed = 0xffffffffu;

}  // namespace

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  try {
    for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
  } catch (...) {
    // The system refused a thread (a process limit). No destructor runs for a constructor that
    // throws: the threads already started must be stopped here, or destroying them terminates
    // the process instead of the caller reporting the error.
    StopWorkers();
    throw;
  }
}

ThreadPool::~ThreadPool() { StopWorkers(); }

void ThreadPool::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void ThreadPool::RunChunks(uint32_t gen, int thread) {
  uint64_t s = state_.load(std::memory_order_acquire);
  while (Generation(s) == gen) {
    const uint32_t chunk = NextChunk(s);
    // Read after observing `gen`. A count written for a newer loop is read only after that
    // loop's caller closed this one (acquire pairs with its release), so the claim below fails.
    if (chunk >= n_chunks_.load(std::memory_order_acquire)) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;
    }
    // The chunk is ours; the caller waits for it, so the loop's fields stay valid.
    const int64_t begin = int64_t{chunk} * grain_;
    try {
      (*fn_)(begin, std::min(n_tasks_, begin + grain_), thread);
    } catch (...) {
      // Counted done all the same: the caller must not wait for it, nor return while other
      // chunks run (an escaped exception left the loop open and its count short). Kept for the
      // caller to rethrow; on a worker it would end the process.
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    chunks_done_.fetch_add(1, std::memory_order_acq_rel);
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelFor(int64_t n_tasks, int64_t grain, const RangeFn& fn) {
  if (n_tasks <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n_tasks <= grain) {
    fn(0, n_tasks, 0);
    return;
  }
  // Chunk indices stay below kClosed (and a claim's increment inside the low word).
  grain = std::max(grain, n_tasks / (int64_t{kClosed} - 1) + 1);
  // The previous loop is closed (see the end of this function): a worker that still holds its
  // generation cannot claim a chunk while the fields below change.
  fn_ = &fn;
  n_tasks_ = n_tasks;
  grain_ = grain;
  const auto n_chunks = static_cast<uint32_t>((n_tasks + grain - 1) / grain);
  n_chunks_.store(n_chunks, std::memory_order_release);
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint32_t gen = Generation(state_.load(std::memory_order_relaxed)) + 1;
  state_.store(uint64_t{gen} << 32, std::memory_order_release);
  // A worker about to sleep counts itself, then checks the state; we store the state, then
  // check the count. Without a full fence the store could still sit in this core's store buffer
  // when the count is read: both would miss the other and the worker would sleep through this
  // loop (slower, not wrong: the caller runs every chunk that nobody claims).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed) > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }  // orders the store before sleepers re-check
    wake_.notify_all();
  }
  RunChunks(gen, 0);
  while (chunks_done_.load(std::memory_order_acquire) != n_chunks) BMAD_CPU_RELAX();
  // Close this loop before the next one writes its fields. Every chunk is claimed, so the
  // state is (gen, n_chunks); but a worker that read it could otherwise check that index
  // against the next loop's larger count, claim "chunk n_chunks" of this loop, run it with the
  // next loop's function before that loop began, and add its count to the next loop's: the
  // caller then returned with a chunk still running, or waited for ever (seen on two cores).
  state_.store((uint64_t{gen} << 32) | kClosed, std::memory_order_relaxed);
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::WorkerLoop(int thread) {
  uint32_t seen = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    uint32_t gen = Generation(state_.load(std::memory_order_acquire));
    const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 1; gen == seen; ++i) {
      BMAD_CPU_RELAX();
      gen = Generation(state_.load(std::memory_order_acquire));
      if (i % 256 == 0 && std::chrono::steady_clock::now() > spin_until) break;
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);  // pairs with ParallelFor's fence
      wake_.wait(lock, [&] {
        return stop_.load() || Generation(state_.load(std::memory_order_seq_cst)) != seen;
      });
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      if (stop_.load()) return;
      gen = Generation(state_.load(std::memory_order_acquire));
    }
    seen = gen;
    RunChunks(gen, thread);
  }
}

}  // namespace bmad::kernels::cpu
