#include "common/cli/command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/version.h"

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

bool IsHelp(const std::string& arg) { return arg == "-h" || arg == "--help" || arg == "help"; }

// Commands under `group` (every command when it is empty).
void PrintHelp(const std::vector<Command>& commands, FILE* to, const std::string& group = "") {
  const std::string usage = group.empty() ? "bmad COMMAND" : "bmad " + group + " COMMAND";
  std::fprintf(to, "usage: %s [args]   (bmad COMMAND --help for its flags; bmad --version)\n\ncommands:\n",
               usage.c_str());
  for (const Command& c : commands) {
    if (!group.empty() && c.path[0] != group) continue;
    std::string name = JoinPath(c.path);
    if (name.size() < 24) name.append(24 - name.size(), ' ');
    std::fprintf(to, "  %s %s\n", name.c_str(), c.summary.c_str());
  }
}

}  // namespace

int Dispatch(const std::vector<Command>& commands, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--version") {
    std::printf("bmad %.*s\n", static_cast<int>(Version().size()), Version().data());
    return 0;
  }
  if (args.empty() || IsHelp(args[0])) {
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
    // A group's name alone ("bmad bench") or with --help lists the group's commands.
    bool group = false;
    for (const Command& c : commands) group = group || (c.path.size() > 1 && c.path[0] == args[0]);
    if (group && (args.size() == 1 || IsHelp(args[1]))) {
      const bool help = args.size() > 1;
      if (!help) std::fprintf(stderr, "bmad %s: which one?\n\n", args[0].c_str());
      PrintHelp(commands, help ? stdout : stderr, args[0]);
      return help ? 0 : 2;
    }
    std::fprintf(stderr, "bmad: unknown command '%s'\n\n", JoinPath(args).c_str());
    PrintHelp(commands, stderr);
    return 2;
  }
  // Output that did not reach its file (a full disk, an I/O error) is a failure, whichever
  // command printed it: a script must not take a half-written result for a whole one. (A
  // closed pipe ends the process by SIGPIPE first, which a script sees too.) A write that
  // failed while the command printed left its reason in errno.
  errno = 0;
  const int code = best->run(std::vector<std::string>(args.begin() + static_cast<long>(best->path.size()),
                                                      args.end()));
  if (code == 0 && (std::fflush(stdout) != 0 || std::ferror(stdout))) {
    std::fprintf(stderr, "bmad %s: cannot write the output: %s\n", JoinPath(best->path).c_str(),
                 errno != 0 ? std::strerror(errno) : "write error");
    return 1;
  }
  return code;
}

}  // namespace bmad::cli
