// A process that exports known metrics through common/metrics, for the Prometheus end-to-end
// test: a counter at 41, a labelled gauge at 7, and a latency histogram of 1000 observations
// spread evenly over (0, 1] s (so its median is 0.5 s). Prints "port=N" once serving, then
// serves until SIGTERM/SIGINT or --lifetime-s passes.
#include <csignal>
#include <cstdio>
#include <thread>

#include "common/metrics/metrics_server.h"
#include "common/metrics/registry.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  int lifetime_s = 120;
  if (argc == 3 && std::string(argv[1]) == "--lifetime-s") lifetime_s = std::atoi(argv[2]);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  bmad::metrics::Registry registry;
  registry.GetCounter("bmad_test_requests_total", "Requests (test exporter).").Increment(41);
  registry.GetGauge("bmad_test_queue_depth", "Queue depth (test exporter).", {{"replica", "r1"}})
      .Set(7);
  registry.GetGauge("bmad_test_queue_depth", "Queue depth (test exporter).", {{"replica", "r2"}})
      .Set(3);
  auto& latency = registry.GetHistogram("bmad_test_latency_seconds", "Latency (test exporter).",
                                        {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0});
  for (int i = 1; i <= 1000; ++i) latency.Observe(i / 1000.0);

  bmad::metrics::MetricsServer server(registry);
  if (bmad::Status s = server.Start("127.0.0.1", 0); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("port=%d\n", server.port());
  std::fflush(stdout);
  for (int i = 0; i < lifetime_s * 10 && !g_stop; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  server.Stop();
  return 0;
}
