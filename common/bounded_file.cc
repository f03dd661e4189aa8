#include "common/bounded_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace bmad {

Result<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  // An ifstream opens a directory and reads nothing: that would pass as an empty file.
  if (std::filesystem::is_directory(path, ec)) return InvalidArgument("is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(std::string("cannot open the file: ") + std::strerror(errno));
  std::string text;
  char chunk[64 * 1024];
  while (in) {
    in.read(chunk, sizeof chunk);
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return ResourceExhausted("is larger than " + std::to_string(max_bytes) + " bytes, the most read");
    }
  }
  if (in.bad()) return InvalidArgument("cannot read the file");
  return text;
}

}  // namespace bmad
