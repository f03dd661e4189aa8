// ApiKeys: the file's format and its errors, bearer tokens, and keys rotated by rewriting the
// file (time driven by a ManualClock).
#include "coordinator/server/api_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/log.h"
#include "tests/support/paths.h"

namespace bmad::coord {
namespace {

class ApiKeysTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("api_keys"); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }
  // Replaces the file the way a Kubernetes Secret update does: a new file renamed over it.
  void Replace(const std::string& path, const std::string& text) {
    const std::string fresh = Write("fresh.tmp", text);
    ASSERT_EQ(std::rename(fresh.c_str(), path.c_str()), 0);
  }

  std::string dir_;
  ManualClock clock_{1'000'000'000};
};

TEST_F(ApiKeysTest, TakesOneKeyPerLineSkippingBlankAndCommentLines) {
  const std::string path = Write("keys", "# team A\nsk-alpha\n\n  sk-beta \r\n#sk-commented\n\tsk-gamma");
  Result<std::unique_ptr<ApiKeys>> keys = ApiKeys::Load(path, clock_);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->size(), 3u);
  for (const char* good : {"sk-alpha", "sk-beta", "sk-gamma"}) EXPECT_TRUE((*keys)->Accepts(good)) << good;
  // Longer than any key may be: refused without comparing its bytes.
  EXPECT_FALSE((*keys)->Accepts("sk-alpha" + std::string(ApiKeys::kMaxKeyBytes, 'x')));
  for (const char* bad : {"", "sk-alph", "sk-alphaa", "SK-ALPHA", "#sk-commented", "sk-commented", " sk-beta",
                          "team A"}) {
    EXPECT_FALSE((*keys)->Accepts(bad)) << bad;
  }
}

TEST_F(ApiKeysTest, AFileThatCannotServeIsRefusedNamingItAndTheLine) {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", "holds no key"},
      {"# only a comment\n\n", "holds no key"},
      {"sk-ok\nsk with space\n", "line 2: a key holds only printable ASCII"},
      {"sk-\x01\n", "line 1: a key holds only printable ASCII"},
      {"sk-caf\xc3\xa9\n", "line 1: a key holds only printable ASCII"},
      {std::string(ApiKeys::kMaxKeyBytes + 1, 'k') + "\n", "line 1: a key is at most 512 bytes"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("bad", c.text);
    Result<std::unique_ptr<ApiKeys>> keys = ApiKeys::Load(path, clock_);
    ASSERT_FALSE(keys.ok()) << c.says;
    EXPECT_EQ(keys.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(keys.status().message().find(path), std::string::npos) << keys.status().message();
    EXPECT_NE(keys.status().message().find(c.says), std::string::npos) << keys.status().message();
  }
  Result<std::unique_ptr<ApiKeys>> missing = ApiKeys::Load(dir_ + "/absent", clock_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos) << missing.status().message();
  Result<std::unique_ptr<ApiKeys>> directory = ApiKeys::Load(dir_, clock_);
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);
  // A FIFO would block the reader until someone writes to it.
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<std::unique_ptr<ApiKeys>> pipe = ApiKeys::Load(fifo, clock_);
  ASSERT_FALSE(pipe.ok());
  EXPECT_NE(pipe.status().message().find("not a regular file"), std::string::npos);
}

TEST_F(ApiKeysTest, BearerTokenIsTheKeyOfABearerAuthorizationHeader) {
  EXPECT_EQ(ApiKeys::BearerToken("Bearer sk-1"), "sk-1");
  EXPECT_EQ(ApiKeys::BearerToken("bearer sk-1"), "sk-1");
  EXPECT_EQ(ApiKeys::BearerToken("BEARER   sk-1  "), "sk-1");
  EXPECT_EQ(ApiKeys::BearerToken("Basic dXNlcjpwYXNz"), "");
  EXPECT_EQ(ApiKeys::BearerToken("Bearer"), "");
  EXPECT_EQ(ApiKeys::BearerToken("Bearer "), "");
  EXPECT_EQ(ApiKeys::BearerToken("sk-1"), "");
  EXPECT_EQ(ApiKeys::BearerToken(""), "");
}

TEST_F(ApiKeysTest, ARewrittenFileRotatesTheKeysOnceTheRecheckIntervalHasPassed) {
  const std::string path = Write("keys", "sk-old\n");
  Result<std::unique_ptr<ApiKeys>> loaded = ApiKeys::Load(path, clock_, /*recheck_interval_ms=*/1000);
  ASSERT_TRUE(loaded.ok());
  ApiKeys& keys = **loaded;
  Replace(path, "sk-new\nsk-newer\n");
  EXPECT_TRUE(keys.Accepts("sk-old"));  // not looked at again yet
  EXPECT_FALSE(keys.Accepts("sk-new"));
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-old"));  // changed: read once it looks the same a check later
  EXPECT_FALSE(keys.Accepts("sk-new"));
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-new"));
  EXPECT_TRUE(keys.Accepts("sk-newer"));
  EXPECT_FALSE(keys.Accepts("sk-old"));
  EXPECT_EQ(keys.size(), 2u);
}

TEST_F(ApiKeysTest, AChangedFileThatCannotServeLeavesTheKeysAsTheyWere) {
  const std::string path = Write("keys", "sk-kept\n");
  Result<std::unique_ptr<ApiKeys>> loaded = ApiKeys::Load(path, clock_, 1000);
  ASSERT_TRUE(loaded.ok());
  ApiKeys& keys = **loaded;
  std::vector<std::string> logged;
  log::SetSink([&](std::string_view line) { logged.emplace_back(line); });
  // Emptied (caught half-written), then removed: neither locks clients out nor lets all in.
  Replace(path, "");
  clock_.AdvanceMillis(1000);  // changed, settling
  EXPECT_TRUE(keys.Accepts("sk-kept"));
  clock_.AdvanceMillis(1000);  // settled: read, and refused
  EXPECT_TRUE(keys.Accepts("sk-kept"));
  EXPECT_FALSE(keys.Accepts(""));
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-kept"));  // the same refused file: not logged again
  ASSERT_EQ(::unlink(path.c_str()), 0);
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-kept"));
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-kept"));
  log::SetSink(nullptr);
  size_t warnings = 0;
  for (const std::string& line : logged) warnings += line.find("cannot be used") != std::string::npos;
  EXPECT_EQ(warnings, 2u);  // once for the empty file, once for the missing one
  // Fixed: the new keys are taken.
  Replace(path, "sk-fixed\n");
  clock_.AdvanceMillis(1000);
  EXPECT_FALSE(keys.Accepts("sk-fixed"));  // settling
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-fixed"));
  EXPECT_FALSE(keys.Accepts("sk-kept"));
}

TEST_F(ApiKeysTest, ARecheckWithoutRequestsTakesAChangeOnTime) {
  // The file was looked at only when a request came: on an idle server the first request after
  // a key's removal made the first look, and was let in with the removed key.
  const std::string path = Write("keys", "sk-removed\nsk-kept\n");
  Result<std::unique_ptr<ApiKeys>> loaded = ApiKeys::Load(path, clock_, 1000);
  ASSERT_TRUE(loaded.ok());
  ApiKeys& keys = **loaded;
  Replace(path, "sk-kept\n");
  clock_.AdvanceMillis(1000);
  keys.Recheck();  // the event loop's ticks, no request
  clock_.AdvanceMillis(1000);
  keys.Recheck();
  EXPECT_FALSE(keys.Accepts("sk-removed"));
  EXPECT_TRUE(keys.Accepts("sk-kept"));
}

TEST_F(ApiKeysTest, AFileCaughtWhileBeingWrittenInPlaceIsNotTaken) {
  // Rewritten in place, the file can be read with its last line cut short: "sk-abc" of
  // "sk-abcdef", a key nobody was given, would have let a guesser in.
  const std::string path = Write("keys", "sk-old\n");
  Result<std::unique_ptr<ApiKeys>> loaded = ApiKeys::Load(path, clock_, 1000);
  ASSERT_TRUE(loaded.ok());
  ApiKeys& keys = **loaded;
  Write("keys", "sk-old\nsk-abc");  // the writer is part way through
  clock_.AdvanceMillis(1000);
  EXPECT_FALSE(keys.Accepts("sk-abc"));
  Write("keys", "sk-old\nsk-abcdef\n");  // ...and done before the next check
  clock_.AdvanceMillis(1000);
  EXPECT_FALSE(keys.Accepts("sk-abc"));
  EXPECT_FALSE(keys.Accepts("sk-abcdef"));  // changed since the last check: not settled yet
  EXPECT_TRUE(keys.Accepts("sk-old"));
  clock_.AdvanceMillis(1000);
  EXPECT_TRUE(keys.Accepts("sk-abcdef"));
  EXPECT_FALSE(keys.Accepts("sk-abc"));
  EXPECT_TRUE(keys.Accepts("sk-old"));
}

}  // namespace
}  // namespace bmad::coord
