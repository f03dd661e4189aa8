// The chat relay tests' fixture: an in-process coordinator on 127.0.0.1 with one fake replica
// that answers each chat request with the test's own pieces of text, so that what the
// coordinator makes of an answer's text (reasoning, tool calls) is checked exactly.
#pragma once

#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordinator/server/replica_loss_fixture.h"
#include "tests/support/process.h"

namespace bmad::coord {

class ChatRelayTest : public ReplicaLossTest {
 protected:
  using ReplyJson = nlohmann::json;

  // Posts `body` to the chat endpoint from another thread, answers its one request with `pieces`
  // (the last one finishing it) from the test's one replica, and returns the HTTP body. (One
  // replica for all: a replica object gone is still live to the coordinator, which would offer
  // it the next request.)
  std::string Answered(const ReplyJson& body, const std::vector<std::string>& pieces) {
    if (!replica_) {
      replica_ = Replica("r");
      EXPECT_TRUE(replica_->Register(512, ReplicaPool::kNormal, replica_model_));
    }
    FakeReplica* replica = replica_.get();
    const size_t assigned_before = replica->Assigned().size();
    std::string answer;
    std::thread client([&] {
      httplib::Client http("127.0.0.1", server_->http_port());
      http.set_read_timeout(20, 0);
      auto res = http.Post("/v1/chat/completions", body.dump(), "application/json");
      answer = res ? res->body : "no answer";
      EXPECT_TRUE(res && res->status == 200) << answer;
    });
    EXPECT_TRUE(testing::WaitFor([&] {
      replica->Receive(std::chrono::milliseconds(50));
      return replica->Assigned().size() > assigned_before;
    }, std::chrono::seconds(5)));
    const proto::Assign* assign = LastAssign(*replica);
    last_assign_.reset();
    if (assign != nullptr) last_assign_ = *assign;
    if (assign != nullptr) {
      for (size_t i = 0; i < pieces.size(); ++i) {
        proto::TokenChunk chunk;
        chunk.request_id = assign->request_id;
        chunk.assignment = assign->assignment;
        chunk.sequence = static_cast<uint32_t>(i);
        chunk.token_offset = static_cast<uint32_t>(i);
        chunk.token_ids = {static_cast<uint32_t>(10 + i)};
        chunk.text = pieces[i];
        if (i + 1 == pieces.size()) {
          chunk.finish_reason = proto::FinishReason::kStop;
          chunk.usage.prompt_tokens = static_cast<uint32_t>(assign->prompt_tokens.size());
          chunk.usage.completion_tokens = static_cast<uint32_t>(pieces.size());
        }
        replica->Send(chunk);
      }
    }
    client.join();
    return answer;
  }

  std::string replica_model_ = "stories260K";  // the model the replica says it serves
  std::unique_ptr<FakeReplica> replica_;
  std::optional<proto::Assign> last_assign_;  // the last request's, as its replica received it
};

}  // namespace bmad::coord
