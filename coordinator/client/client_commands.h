// The client-side subcommands of `bmad`:
//   bmad generate --coordinator ENDPOINT --prompt TEXT [...]   stream a completion from a cluster
//   bmad status [--coordinator ENDPOINT] [--json]              the cluster's replicas and load
//   bmad bench http --url URL --requests N (--rate R | --concurrency C) --prompt-len DIST
//                   --output-len DIST [...]                    load any OpenAI-compatible server
//
// Each takes the arguments after its command path and returns the process exit code: 0 done,
// 1 the server, the network or the run failed (one line on stderr says why), 2 a usage error
// (one line on stderr; --help prints the flags).
#pragma once

#include <string>
#include <vector>

#include "common/cli/command.h"

namespace bmad::client {

// `bmad generate --coordinator ...`: streams text to stdout as chunks arrive, then one summary
// line on stderr (tokens, time to first token, tokens/s, finish reason). Ctrl-C cancels the
// request on the coordinator and exits with 130.
int RunRemoteGenerate(const std::vector<std::string>& args);

// `bmad status`: a table of replicas with totals, or the ClusterStatus as JSON (--json).
int RunStatusCommand(const std::vector<std::string>& args);

// `bmad bench http`: the report on stdout, its last line one JSON object; progress on stderr.
// Exits 1 when no request succeeded.
int RunBenchHttpCommand(const std::vector<std::string>& args);

// True when `bmad generate` was given --coordinator (so the remote path should run it).
bool WantsRemoteGenerate(const std::vector<std::string>& args);

// {"status"} and {"bench", "http"}. `generate` belongs to the local tools' command, which
// hands its arguments to RunRemoteGenerate when they contain --coordinator.
std::vector<cli::Command> ClientCommands();

}  // namespace bmad::client
