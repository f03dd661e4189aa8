// TokenizerThread: results equal Encode's, in the order given, on the thread; destruction with
// jobs queued returns (the job in hand finishes, the rest are dropped).
#include "coordinator/server/tokenizer_thread.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "tests/support/paths.h"
#include "worker/model/gguf/gguf_file.h"

namespace bmad::coord {
namespace {

std::optional<tokenizer::Tokenizer> Stories() {
  auto file = gguf::GgufFile::Open(testing::SharedModelsDir() + "/stories260K.gguf");
  if (!file.ok()) {
    ADD_FAILURE() << file.status().ToString();
    return std::nullopt;
  }
  auto tok = tokenizer::LoadTokenizer(**file);
  if (!tok.ok()) {
    ADD_FAILURE() << tok.status().ToString();
    return std::nullopt;
  }
  return std::move(*tok);
}

TEST(TokenizerThread, ResultsEqualEncodeInOrderOnItsOwnThread) {
  const std::optional<tokenizer::Tokenizer> loaded = Stories();
  ASSERT_TRUE(loaded.has_value());
  const tokenizer::Tokenizer& tok = *loaded;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint64_t, std::vector<uint32_t>>> results;
  std::thread::id worker;
  {
    TokenizerThread thread(tok, [&](uint64_t job, std::vector<uint32_t> tokens) {
      std::lock_guard<std::mutex> lock(mu);
      worker = std::this_thread::get_id();
      results.emplace_back(job, std::move(tokens));
      cv.notify_all();
    });
    const std::vector<std::string> texts = {"Once upon a time", "", std::string(5000, 'a') + " end",
                                            "Lily liked to play."};
    for (size_t i = 0; i < texts.size(); ++i) thread.Submit(10 + i, texts[i]);
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return results.size() == texts.size(); }));
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(results[i].first, 10 + i);
      const std::vector<int32_t> want = tok.Encode(texts[i]);
      EXPECT_EQ(results[i].second, std::vector<uint32_t>(want.begin(), want.end())) << i;
    }
    EXPECT_NE(worker, std::this_thread::get_id());
  }
}

TEST(TokenizerThread, GoesAwayWithJobsQueued) {
  const std::optional<tokenizer::Tokenizer> loaded = Stories();
  ASSERT_TRUE(loaded.has_value());
  const tokenizer::Tokenizer& tok = *loaded;
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool entered = false, open = false;
  int done = 0;
  {
    TokenizerThread thread(
        tok, [&](uint64_t, std::vector<uint32_t>) { ++done; },
        [&] {
          std::unique_lock<std::mutex> lock(gate_mu);
          entered = true;
          gate_cv.notify_all();
          gate_cv.wait(lock, [&] { return open; });
        });
    for (uint64_t j = 1; j <= 3; ++j) thread.Submit(j, "Once upon a time");
    bool was_entered;
    {
      std::unique_lock<std::mutex> lock(gate_mu);
      was_entered = gate_cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered; });
      open = true;  // also on failure: the destructor joins the thread
    }
    gate_cv.notify_all();
    EXPECT_TRUE(was_entered);
  }  // joins: the first job finishes; the two queued behind it may be dropped
  EXPECT_GE(done, 1);
  EXPECT_LE(done, 3);
}

}  // namespace
}  // namespace bmad::coord
