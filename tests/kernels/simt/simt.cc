#include "tests/kernels/simt/simt.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace bmad::simt {

thread_local Dim3 tls_thread_idx, tls_block_idx, tls_block_dim, tls_grid_dim;

namespace {

constexpr size_t kStackBytes = 256 * 1024;

enum class State { kReady, kBlockWait, kWarpWait, kDone };

struct Fiber {
  ucontext_t context;
  State state = State::kReady;
  unsigned tid = 0;
};

struct BlockRun {
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  size_t current = 0;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> shared;
  std::vector<uint64_t> exchange;  // a shuffle slot per thread
};

BlockRun* g_run = nullptr;
uint64_t g_launches = 0;
std::vector<std::unique_ptr<char[]>> g_stacks;  // reused across launches, never freed

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "simt emulator: %s\n", what.c_str());
  std::abort();
}

Fiber& Current() { return g_run->fibers[g_run->current]; }

void Wait(State s) {
  Fiber& f = Current();
  f.state = s;
  swapcontext(&f.context, &g_run->scheduler);
}

void FiberMain() {
  (*g_run->body)();
  Fiber& f = Current();
  f.state = State::kDone;
  swapcontext(&f.context, &g_run->scheduler);  // never resumed
}

// Releases the barrier every live thread (or every live lane of a warp) waits at; false when
// none can be released.
bool Release(BlockRun& run) {
  bool released = false;
  const size_t n = run.fibers.size();
  for (size_t w = 0; w * 32 < n; ++w) {
    bool any = false, all = true;
    for (size_t t = w * 32; t < std::min(n, w * 32 + 32); ++t) {
      const State s = run.fibers[t].state;
      if (s == State::kDone) continue;
      any = true;
      all = all && s == State::kWarpWait;
    }
    if (!any || !all) continue;
    for (size_t t = w * 32; t < std::min(n, w * 32 + 32); ++t) {
      if (run.fibers[t].state == State::kWarpWait) run.fibers[t].state = State::kReady;
    }
    released = true;
  }
  if (released) return true;
  bool any = false, all = true;
  for (const Fiber& f : run.fibers) {
    if (f.state == State::kDone) continue;
    any = true;
    all = all && f.state == State::kBlockWait;
  }
  if (!any || !all) return false;
  for (Fiber& f : run.fibers) {
    if (f.state == State::kBlockWait) f.state = State::kReady;
  }
  return true;
}

std::string Describe(const BlockRun& run) {
  std::string s = "block (" + std::to_string(tls_block_idx.x) + "," +
                  std::to_string(tls_block_idx.y) + "," + std::to_string(tls_block_idx.z) + "): ";
  int counts[4] = {0, 0, 0, 0};
  for (const Fiber& f : run.fibers) ++counts[static_cast<int>(f.state)];
  return s + std::to_string(counts[1]) + " threads at __syncthreads, " + std::to_string(counts[2]) +
         " at a warp barrier, " + std::to_string(counts[3]) +
         " exited: the barriers do not match (divergent synchronization)";
}

void RunBlock(BlockRun& run, Dim3 block) {
  const size_t n = static_cast<size_t>(block.x) * block.y * block.z;
  while (g_stacks.size() < n) g_stacks.emplace_back(new char[kStackBytes]);
  run.fibers.assign(n, Fiber{});
  run.exchange.assign(n, 0);
  std::memset(run.shared.data(), 0xff, run.shared.size());  // NaN: unwritten reads show
  for (size_t t = 0; t < n; ++t) {
    Fiber& f = run.fibers[t];
    f.tid = static_cast<unsigned>(t);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = g_stacks[t].get();
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, FiberMain, 0);
  }
  while (true) {
    bool ran = false;
    for (size_t t = 0; t < n; ++t) {
      if (run.fibers[t].state != State::kReady) continue;
      run.current = t;
      const unsigned tid = run.fibers[t].tid;
      tls_thread_idx = Dim3(tid % block.x, (tid / block.x) % block.y, tid / (block.x * block.y));
      swapcontext(&run.scheduler, &run.fibers[t].context);
      ran = true;
    }
    if (ran) continue;
    bool done = true;
    for (const Fiber& f : run.fibers) done = done && f.state == State::kDone;
    if (done) return;
    if (!Release(run)) Fail(Describe(run));
  }
}

}  // namespace

void Launch(Dim3 grid, Dim3 block, size_t shared_bytes, const std::function<void()>& body) {
  if (g_run != nullptr) Fail("nested launch");
  if (block.x * block.y * block.z == 0 || block.x * block.y * block.z > 1024) {
    Fail("bad block size " + std::to_string(block.x * block.y * block.z));
  }
  ++g_launches;
  BlockRun run;
  run.body = &body;
  run.shared.resize(shared_bytes);
  g_run = &run;
  tls_block_dim = block;
  tls_grid_dim = grid;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        tls_block_idx = Dim3(x, y, z);
        RunBlock(run, block);
      }
    }
  }
  g_run = nullptr;
}

unsigned char* DynamicShared() { return g_run->shared.data(); }

void SyncThreads() { Wait(State::kBlockWait); }
void SyncWarp() { Wait(State::kWarpWait); }

uint64_t ShuffleXorBits(uint64_t bits, int offset) {
  const unsigned tid = Current().tid;
  g_run->exchange[tid] = bits;
  SyncWarp();
  const unsigned partner = (tid & ~31u) | ((tid & 31u) ^ static_cast<unsigned>(offset));
  const uint64_t out = partner < g_run->exchange.size() ? g_run->exchange[partner] : bits;
  SyncWarp();
  return out;
}

uint64_t launches() { return g_launches; }

void CheckAligned16(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    Fail("a 16-byte vector load from a misaligned address (a GPU would fault)");
  }
}

}  // namespace bmad::simt
