// bmad-coordinator (see coordinator_server.h).
#include <csignal>
#include <cstdio>

#include "common/cli/flags.h"
#include "common/config/server_startup.h"
#include "common/log.h"
#include "common/signal_shared_pointer.h"
#include "common/version.h"
#include "coordinator/server/coordinator_server.h"

namespace {
// The handler may run on any thread, while main sets it and, before the server goes, clears it.
bmad::SignalSharedPointer<bmad::coord::CoordinatorServer> g_server;
void OnSignal(int) {
  g_server.With([](bmad::coord::CoordinatorServer& server) { server.RequestStop(); });
}
}  // namespace

int main(int argc, char** argv) {
  std::string config_path, log_level;
  std::vector<std::string> overrides;
  int64_t max_run_ms = 0;
  bmad::cli::Flags flags("bmad-coordinator --config FILE [--set section.key=value]...");
  flags.AddString("config", &config_path, "The cluster's YAML config file.");
  flags.AddList("set", &overrides, "Override one config key (e.g. coordinator.http_port=0).");
  flags.AddString("log-level", &log_level, "debug, info, warn, error or off (default: log.level).");
  // Bounded so that the deadline in nanoseconds cannot overflow (about 292 years).
  flags.AddInt("max-run-ms", &max_run_ms, "Stop after this many milliseconds (tests; 0: never).", 0,
               INT64_MAX / 1'000'000);
  bool version = false;
  flags.AddBool("version", &version, "Print the version and exit.");
  std::vector<std::string> positional;
  bmad::Status s = flags.Parse(std::vector<std::string>(argv + 1, argv + argc), &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && version) {
    std::printf("bmad-coordinator %.*s\n", static_cast<int>(bmad::Version().size()), bmad::Version().data());
    return 0;
  }
  if (s.ok() && config_path.empty()) s = bmad::InvalidArgument("--config is required");
  if (s.ok() && !positional.empty()) s = bmad::InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (!s.ok()) {
    std::fprintf(stderr, "bmad-coordinator: %s\n", s.message().c_str());
    return 2;
  }
  auto config = bmad::LoadServerConfig(config_path, overrides, log_level);
  if (!config.ok()) {
    std::fprintf(stderr, "bmad-coordinator: %s\n", config.status().message().c_str());
    return 2;
  }
  auto server = bmad::coord::CoordinatorServer::Create(*config, {max_run_ms});
  if (!server.ok()) {
    bmad::log::Error("coordinator", "cannot start", {{"error", server.status()}});
    return 1;
  }
  g_server.Set(server->get());
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  bmad::Status run = (*server)->Run();
  g_server.Clear();  // then the server goes, with main
  return run.ok() ? 0 : 1;
}
