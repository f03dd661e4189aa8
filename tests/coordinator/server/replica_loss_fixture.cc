#include "tests/coordinator/server/replica_loss_fixture.h"

#include <httplib.h>

#include "tests/support/process.h"

namespace bmad::coord {

using namespace std::chrono_literals;

std::vector<proto::Assign> AssignsOf(const FakeReplica& replica, uint64_t id) {
  std::vector<proto::Assign> out;
  for (const proto::Message& m : replica.received()) {
    if (const auto* a = std::get_if<proto::Assign>(&m); a && a->request_id == id) out.push_back(*a);
  }
  return out;
}

bool WaitForAssigns(FakeReplica& replica, uint64_t id, size_t count) {
  return testing::WaitFor([&] {
    replica.Receive(50ms);
    return AssignsOf(replica, id).size() >= count;
  }, 5s);
}

proto::Heartbeat Beat(const std::string& replica, std::vector<uint64_t> held, std::optional<uint32_t> taken,
                      std::vector<uint32_t> numbers, std::optional<uint32_t> seen) {
  return proto::Heartbeat{replica,           {}, std::move(held), taken.value_or(0), taken.has_value(), std::move(numbers),
                          seen.value_or(0), seen.has_value()};
}

const proto::Assign* LastAssign(const FakeReplica& replica) {
  const proto::Assign* last = nullptr;
  for (const proto::Message& m : replica.received()) {
    if (const auto* a = std::get_if<proto::Assign>(&m)) last = a;
  }
  return last;
}

std::unique_ptr<MigratedChat> ChatMigratedPastASmallReplica(zmq::context_t& ctx, const std::string& workers,
                                                            int http_port) {
  auto m = std::make_unique<MigratedChat>();  // on the heap: the client's thread writes into it
  m->large = std::make_unique<FakeReplica>(ctx, workers, "large");
  m->small = std::make_unique<FakeReplica>(ctx, workers, "small");
  EXPECT_TRUE(m->large->Register(/*context_length=*/512));
  m->chat = std::thread([http_port, chat = m.get()] {
    httplib::Client http("127.0.0.1", http_port);
    http.set_read_timeout(20, 0);
    auto res = http.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})",
                         "application/json");
    chat->status = res ? res->status : -1;
    chat->body = res ? res->body : "";
  });
  FakeReplica& large = *m->large;
  EXPECT_TRUE(testing::WaitFor([&] {
    large.Receive(50ms);
    return !large.Assigned().empty();
  }, 5s));
  const proto::Assign* first = LastAssign(large);
  if (first == nullptr) {
    ADD_FAILURE() << "no Assign on the large replica";
    return m;
  }
  EXPECT_GT(first->prompt_tokens.size() + 61, 64u) << "the prompt is too short for the case";
  EXPECT_LT(first->prompt_tokens.size() + 1, 64u) << "the prompt is too long for the case";
  proto::TokenChunk chunk;
  chunk.request_id = first->request_id;
  chunk.assignment = first->assignment;
  chunk.token_ids.assign(60, 5);
  chunk.text = std::string(60, 'x');
  large.Send(chunk);
  EXPECT_TRUE(m->small->Register(/*context_length=*/64));
  large.Send(proto::Shutdown{"replica large stopped"});
  return m;
}

}  // namespace bmad::coord
