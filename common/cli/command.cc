#include "common/cli/command.h"

#include <cstdio>

namespace bmad::cli {
namespace {

std::string JoinPath(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& p : path) {
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

void PrintHelp(const std::vector<Command>& commands, FILE* to) {
  std::fprintf(to, "usage: bmad COMMAND [args]   (bmad COMMAND --help for its flags)\n\ncommands:\n");
  for (const Command& c : commands) {
    std::string name = JoinPath(c.path);
    if (name.size() < 24) name.append(24 - name.size(), ' ');
    std::fprintf(to, "  %s %s\n", name.c_str(), c.summary.c_str());
  }
}

}  // namespace

int Dispatch(const std::vector<Command>& commands, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    PrintHelp(commands, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const Command* best = nullptr;
  for (const Command& c : commands) {
    if (c.path.size() > args.size()) continue;
    bool match = true;
    for (size_t i = 0; i < c.path.size() && match; ++i) match = c.path[i] == args[i];
    if (match && (!best || c.path.size() > best->path.size())) best = &c;
  }
  if (!best) {
    std::fprintf(stderr, "bmad: unknown command '%s'\n\n", JoinPath(args).c_str());
    PrintHelp(commands, stderr);
    return 2;
  }
  return best->run(std::vector<std::string>(args.begin() + static_cast<long>(best->path.size()),
                                            args.end()));
}

}  // namespace bmad::cli
