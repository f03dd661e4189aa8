#include "worker/model/tokenizer/tokenize_command.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "common/cli/flags.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/model/tokenizer/utf8.h"

namespace bmad {
namespace {

constexpr const char* kUsage =
    "bmad tokenize --model FILE.gguf --text TEXT [--no-special] [--pieces]";

int Fail(int exit_code, const std::string& message) {
  std::fprintf(stderr, "bmad tokenize: %s\n", message.c_str());
  return exit_code;
}

int RunTokenize(const std::vector<std::string>& args) {
  std::string model_path;
  std::string text;
  bool no_special = false;
  bool pieces = false;
  cli::Flags flags(kUsage);
  flags.AddString("model", &model_path, "GGUF file whose vocabulary to use.");
  flags.AddString("text", &text, "The text to tokenize.");
  flags.AddBool("no-special", &no_special,
                "No BOS/EOS, and special token texts such as </s> are plain text.");
  flags.AddBool("pieces", &pieces, "Print each id with the text it stands for.");
  std::vector<std::string> positional;
  if (Status s = flags.Parse(args, &positional); !s.ok()) return Fail(2, s.message());
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!positional.empty())
    return Fail(2, "unexpected argument '" + positional[0] + "'; usage: " + kUsage);
  if (!flags.Seen("model")) return Fail(2, std::string("--model is required; usage: ") + kUsage);
  if (!flags.Seen("text")) return Fail(2, std::string("--text is required; usage: ") + kUsage);

  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(model_path);
  if (!file.ok()) return Fail(1, file.status().ToString());
  Result<tokenizer::Tokenizer> tok = tokenizer::LoadTokenizer(**file);
  if (!tok.ok()) return Fail(1, tok.status().ToString());

  const std::vector<int32_t> ids = tok->Encode(text, !no_special, !no_special);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    if (pieces) {
      out += "{\"id\": " + std::to_string(ids[i]) +
             ", \"piece\": " + tokenizer::JsonString(tok->TokenPiece(ids[i])) + "}";
    } else {
      out += std::to_string(ids[i]);
    }
  }
  out += "]\n";
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return Fail(1, std::string("cannot write the output: ") + std::strerror(errno));
  }
  return 0;
}

}  // namespace

std::vector<cli::Command> TokenizeCommands() {
  return {
      {{"tokenize"}, "Print the token ids of a text for a GGUF model's vocabulary.", RunTokenize}};
}

}  // namespace bmad
