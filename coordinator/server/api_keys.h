// The API keys a client must present when coordinator.api_keys_file names a file: the HTTP API
// takes one as a bearer token (`Authorization: Bearer KEY`, what every OpenAI SDK sends), the
// client socket in Submit.api_key. The file is read again when it changes, so keys rotate
// without a restart (a Kubernetes Secret mounted as a volume is updated in place).
//
// Thread-safe: HTTP handler threads and the event loop ask at once.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace bmad::coord {

class ApiKeys {
 public:
  // The most bytes of one key, and of the file.
  static constexpr size_t kMaxKeyBytes = 512;
  static constexpr size_t kMaxFileBytes = 1 << 20;

  // Reads `path`: one key per line, surrounding blanks trimmed; empty lines and lines starting
  // with '#' are skipped. Errors name the file and the line: not a regular file, unreadable, no
  // key, a key over kMaxKeyBytes or holding a character outside printable ASCII. The file is
  // looked at again at most every `recheck_interval_ms` (by `clock`).
  static Result<std::unique_ptr<ApiKeys>> Load(std::string path, const Clock& clock,
                                               int64_t recheck_interval_ms = 1000);

  // Whether `key` is one of the keys. Compares against every key in time that depends on the
  // keys' lengths only, not on where a guess first differs. When the file has changed since it
  // was last read, and looked the same at the check before (it is not being written: a line cut
  // short would be a prefix of a key), it is read again first; a changed file that cannot be read or holds no valid
  // key leaves the keys as they were (and says so in the log, once per change), and is tried
  // again at the next check. A key over kMaxKeyBytes is refused without a comparison.
  bool Accepts(std::string_view key);

  // Looks at the file as Accepts does, without a key: the event loop calls it every tick, so
  // that a change is taken (and a removed key stops working) on time however rarely requests
  // come (the two looks a change needs are made by requests otherwise).
  void Recheck();

  // KEY of an Authorization header "Bearer KEY" (the scheme in any case); empty otherwise.
  static std::string_view BearerToken(std::string_view authorization);

  size_t size();
  const std::string& path() const { return path_; }

 private:
  // What tells a rewritten (or replaced, as a Secret's symlink swap does) file from the one read.
  struct FileIdentity {
    dev_t device = 0;
    ino_t inode = 0;
    int64_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const FileIdentity&) const = default;
  };
  struct Parsed {
    FileIdentity identity;
    std::vector<std::string> keys;
  };

  ApiKeys(std::string path, const Clock& clock, int64_t recheck_interval_ms, Parsed parsed);
  static Result<Parsed> Read(const std::string& path);
  static Result<FileIdentity> Identify(const std::string& path);
  void RereadIfChanged();  // holds mutex_

  const std::string path_;
  const Clock& clock_;
  const int64_t recheck_interval_ns_;
  std::mutex mutex_;
  std::vector<std::string> keys_;
  FileIdentity identity_;       // of the file the keys came from
  std::optional<FileIdentity> refused_;  // of the last changed file refused (logged once)
  std::optional<FileIdentity> settling_;  // a changed file seen at the last check, not read yet
  int64_t next_check_ns_ = 0;
};

}  // namespace bmad::coord
