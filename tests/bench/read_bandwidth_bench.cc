// bmad-read-bandwidth-bench: how fast this machine's cores stream memory, the ceiling for
// memory-bound steps (batch-1 and batch-8 decode read every weight once; decode attention reads
// the whole KV cache). Each thread sums its own contiguous slice of a buffer far larger than
// the caches; prints the best rate of the repetitions as one JSON line.
//
//   bmad-read-bandwidth-bench [--threads 2] [--mib 512] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/cli/flags.h"
#include "common/status.h"

namespace {

struct Options {
  int64_t threads = 2, mib = 512, reps = 5;
};

bool Parse(int argc, char** argv, Options& o) {
  bmad::cli::Flags flags("bmad-read-bandwidth-bench [flags]");
  flags.AddInt("threads", &o.threads, "Reading threads (default 2).");
  flags.AddInt("mib", &o.mib, "Buffer size in MiB, split among the threads (default 512).");
  flags.AddInt("reps", &o.reps, "Passes over the buffer; the fastest is reported (default 5).");
  std::vector<std::string> positional;
  bmad::Status status = flags.Parse({argv + 1, argv + argc}, &positional);
  if (status.ok() && !positional.empty()) {
    status = bmad::InvalidArgument("unexpected argument '" + positional[0] + "'");
  }
  if (status.ok() && (o.threads <= 0 || o.threads > 1024)) {
    status = bmad::InvalidArgument("--threads must be between 1 and 1024");
  }
  if (status.ok() && (o.mib <= 0 || o.mib > (1 << 20))) {
    status = bmad::InvalidArgument("--mib must be between 1 and 1048576");
  }
  if (status.ok() && o.reps <= 0) status = bmad::InvalidArgument("--reps must be a positive integer");
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    std::exit(0);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "bmad-read-bandwidth-bench: %s\n", status.ToString().c_str());
    return false;
  }
  return true;
}

// Four independent sums, so the loop is bound by loads rather than by one add chain.
uint64_t SumSlice(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, o)) return 2;
  const size_t words = static_cast<size_t>(o.mib) << 17;  // 8-byte words
  std::vector<uint64_t> buffer(words);
  for (size_t i = 0; i < words; ++i) buffer[i] = i;  // touch every page before timing
  const size_t per_thread = words / static_cast<size_t>(o.threads);
  std::vector<uint64_t> sums(static_cast<size_t>(o.threads));
  double best = 1e30;
  for (int64_t rep = 0; rep < o.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int64_t t = 0; t < o.threads; ++t) {
      threads.emplace_back([&, t] {
        sums[static_cast<size_t>(t)] =
            SumSlice(buffer.data() + static_cast<size_t>(t) * per_thread, per_thread);
      });
    }
    for (std::thread& t : threads) t.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  const double bytes = static_cast<double>(per_thread * static_cast<size_t>(o.threads) * 8);
  std::printf("{\"bench\":\"read_bandwidth\",\"threads\":%lld,\"mib\":%lld,\"gb_per_s\":%.2f,"
              "\"checksum\":%llu}\n",
              static_cast<long long>(o.threads), static_cast<long long>(o.mib), bytes / best / 1e9,
              static_cast<unsigned long long>(check));
  return 0;
}
