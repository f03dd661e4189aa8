#include "coordinator/server/api_keys.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/bounded_file.h"
#include "common/log.h"

namespace bmad::coord {
namespace {

constexpr std::string_view kLog = "api_keys";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Equal or not, in time that depends on the lengths only: every byte of `guess` is looked at,
// whatever the first difference (`guess` is at most kMaxKeyBytes long).
bool SameBytes(std::string_view guess, std::string_view key) {
  unsigned diff = guess.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < guess.size(); ++i) {
    const unsigned char k = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
    diff |= static_cast<unsigned char>(guess[i]) ^ k;
  }
  return diff == 0;
}

}  // namespace

Result<ApiKeys::FileIdentity> ApiKeys::Identify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return InvalidArgument("cannot read the API keys file '" + path + "': " + std::strerror(errno));
  }
  // A FIFO or a device would block the reader, or never end.
  if (!S_ISREG(st.st_mode)) return InvalidArgument("the API keys file '" + path + "' is not a regular file");
  return FileIdentity{st.st_dev, st.st_ino, static_cast<int64_t>(st.st_size),
                      int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

Result<ApiKeys::Parsed> ApiKeys::Read(const std::string& path) {
  Parsed parsed;
  BMAD_ASSIGN_OR_RETURN(parsed.identity, Identify(path));
  Result<std::string> text = ReadFileUpTo(path, kMaxFileBytes);
  if (!text.ok()) return Status(text.status().code(), "the API keys file '" + path + "' " + text.status().message());
  std::string_view rest = *text;
  for (size_t line = 1; !rest.empty(); ++line) {
    const size_t end = rest.find('\n');
    const std::string_view key = Trim(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (key.empty() || key.front() == '#') continue;
    const std::string where = "the API keys file '" + path + "', line " + std::to_string(line);
    if (key.size() > kMaxKeyBytes) {
      return InvalidArgument(where + ": a key is at most " + std::to_string(kMaxKeyBytes) + " bytes");
    }
    for (const char c : key) {
      // What a bearer token may hold (RFC 6750's b64token and more), and nothing a header
      // could not carry: no blank, no control character, no byte over 0x7e.
      if (c <= ' ' || c > '~') {
        return InvalidArgument(where + ": a key holds only printable ASCII characters, without spaces");
      }
    }
    parsed.keys.emplace_back(key);
  }
  if (parsed.keys.empty()) {
    return InvalidArgument("the API keys file '" + path +
                           "' holds no key (one per line; '#' starts a comment line)");
  }
  return parsed;
}

Result<std::unique_ptr<ApiKeys>> ApiKeys::Load(std::string path, const Clock& clock,
                                               int64_t recheck_interval_ms) {
  BMAD_ASSIGN_OR_RETURN(Parsed parsed, Read(path));
  return std::unique_ptr<ApiKeys>(new ApiKeys(std::move(path), clock, recheck_interval_ms, std::move(parsed)));
}

ApiKeys::ApiKeys(std::string path, const Clock& clock, int64_t recheck_interval_ms, Parsed parsed)
    : path_(std::move(path)),
      clock_(clock),
      recheck_interval_ns_(recheck_interval_ms * 1'000'000),
      keys_(std::move(parsed.keys)),
      identity_(parsed.identity),
      next_check_ns_(clock.NowNanos() + recheck_interval_ns_) {}

void ApiKeys::RereadIfChanged() {
  const int64_t now = clock_.NowNanos();
  if (now < next_check_ns_) return;
  next_check_ns_ = now + recheck_interval_ns_;
  Result<FileIdentity> identity = Identify(path_);
  if (identity.ok() && *identity == identity_) {
    settling_.reset();
    return;
  }
  // A file rewritten in place (an editor, `echo >`) may be caught half-written, and a line cut
  // short is a prefix of a real key, which must never let a client in. So a changed file is
  // read only once it has looked the same at two checks in a row.
  if (identity.ok() && !(settling_ && *settling_ == *identity)) {
    settling_ = *identity;
    return;
  }
  // Read again at each check while it differs from the file the keys came from: a read that
  // failed for a passing reason (out of file descriptors) must not hold a rotation back.
  Result<Parsed> parsed = Read(path_);
  if (parsed.ok()) {
    // What was read must be the settled file, the same after the read as before it: a writer
    // that began meanwhile, or a file that reappeared since the look found none, settles anew.
    Result<FileIdentity> after = Identify(path_);
    if (!identity.ok() || !after.ok() || !(parsed->identity == *identity) || !(*after == *identity)) {
      settling_.reset();
      if (after.ok()) settling_ = *after;
      return;
    }
  }
  if (!parsed.ok()) {
    // Kept as they were: a file caught half-written, or removed by mistake, must not lock every
    // client out (nor let every client in). Said once per changed file.
    const FileIdentity seen = identity.ok() ? *identity : FileIdentity{};
    if (!refused_ || !(seen == *refused_)) {
      refused_ = seen;
      log::Warn(kLog, "the API keys file changed and cannot be used; the keys read before stay",
                {{"error", parsed.status()}});
    }
    return;
  }
  log::Info(kLog, "API keys read again", {{"path", path_}, {"keys", parsed->keys.size()}});
  keys_ = std::move(parsed->keys);
  identity_ = parsed->identity;
  refused_.reset();
  settling_.reset();
}

void ApiKeys::Recheck() {
  std::lock_guard<std::mutex> lock(mutex_);
  RereadIfChanged();
}

bool ApiKeys::Accepts(std::string_view key) {
  std::lock_guard<std::mutex> lock(mutex_);
  RereadIfChanged();
  // No key is longer: a 64 MiB guess would hold the event loop for the time it takes to compare.
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  bool found = false;
  for (const std::string& k : keys_) found |= SameBytes(key, k);  // no early exit
  return found;
}

std::string_view ApiKeys::BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  return Trim(authorization.substr(kScheme.size()));
}

size_t ApiKeys::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return keys_.size();
}

}  // namespace bmad::coord
