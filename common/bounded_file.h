// Reads a whole file that a user named, up to a size that fits its purpose: a config, a JSON
// schema. Reading with no bound takes /dev/zero, or a model given by mistake, into memory.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace bmad {

// The file's bytes. Errors (the caller names the file): kInvalidArgument for a directory or a
// file that cannot be opened or read, kResourceExhausted for one over `max_bytes` (read no
// further).
Result<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes);

}  // namespace bmad
