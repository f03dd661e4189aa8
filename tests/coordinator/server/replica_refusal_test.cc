// Requests a replica refuses as full: offered again in their order as the replica makes room,
// within their queue deadline; and requests held to the context the live replicas registered, migrated ones
// included. An in-process coordinator on 127.0.0.1 (ephemeral ports) with fake replicas and a
// socket client.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "tests/coordinator/server/replica_loss_fixture.h"
#include "tests/support/process.h"

namespace bmad::coord {
namespace {

using namespace std::chrono_literals;

// `replica` refuses the Assign numbered `assignment` of request `id` as full, as a worker whose
// queue is at scheduler.max_waiting does.
void RefuseAsFull(FakeReplica& replica, uint64_t id, uint32_t assignment) {
  proto::ErrorMessage full;
  full.code = StatusCode::kResourceExhausted;
  full.message = "replica queue is full (1 requests waiting)";
  full.request_id = id;
  full.assignment = assignment;
  replica.Send(full);
}

TEST_F(ReplicaLossTest, MaxModelLenIsTheContextTheLiveReplicasServe) {
  // vLLM's max_model_len is the limit it enforces, and clients size requests from it: /v1/models
  // and /tokenize said the model's 512 while prompts were held to the replicas' 64.
  httplib::Client http("127.0.0.1", server_->http_port());
  auto max_model_len = [&](const std::string& path) -> int64_t {
    auto res = path == "/tokenize" ? http.Post(path, R"({"prompt": "Once"})", "application/json") : http.Get(path);
    if (!res || res->status != 200) return -1;
    const std::string key = "\"max_model_len\":";
    const size_t at = res->body.find(key);
    return at == std::string::npos ? -1 : std::stoll(res->body.substr(at + key.size()));
  };
  EXPECT_EQ(max_model_len("/v1/models"), 512) << "no replica yet: the model's context";
  auto small = Replica("small");
  ASSERT_TRUE(small->Register(/*context_length=*/64));
  EXPECT_TRUE(testing::WaitFor([&] { return max_model_len("/v1/models") == 64; }, 5s));
  EXPECT_EQ(max_model_len("/v1/models/stories260K"), 64);
  EXPECT_EQ(max_model_len("/tokenize"), 64);
  // max_tokens past it is refused as it is parsed.
  auto res = http.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 100})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_NE(res->body.find("max_tokens"), std::string::npos) << res->body;
}

TEST_F(ReplicaLossTest, PromptsAreHeldToTheContextTheLiveReplicasRegistered) {
  // A worker whose KV cache holds fewer tokens than the model's context registers that shorter
  // context; the coordinator used to check only the model's (512), accept a longer prompt, and
  // the worker refused it after it was accepted.
  auto small = Replica("small");
  ASSERT_TRUE(small->Register(/*context_length=*/64));
  auto submit = [&](size_t prompt_tokens, uint32_t max_tokens) {
    proto::Submit s;
    s.client_request_id = "c" + std::to_string(prompt_tokens) + "-" + std::to_string(max_tokens);
    s.prompt_is_tokens = true;
    s.prompt_tokens.assign(prompt_tokens, 5);
    s.sampling.max_tokens = max_tokens;
    EXPECT_TRUE(proto::SendMessage(client_, s).ok());
    auto in = proto::ReceiveMessage(client_, false);
    EXPECT_TRUE(in && in->message.ok());
    return in && in->message.ok() ? std::move(*in->message) : proto::Message{};
  };
  proto::Message too_long = submit(100, 4);
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(too_long));
  const auto& error = std::get<proto::ErrorMessage>(too_long);
  EXPECT_EQ(error.code, StatusCode::kOutOfRange);
  EXPECT_NE(error.message.find("the prompt has 100 tokens; the replicas' context length is 64"), std::string::npos)
      << error.message;
  proto::Message over = submit(40, 30);
  ASSERT_TRUE(std::holds_alternative<proto::ErrorMessage>(over));
  EXPECT_NE(std::get<proto::ErrorMessage>(over).message.find("plus max_tokens (30) exceed the context"),
            std::string::npos);
  // What fits is served; a chat request without max_tokens gets the room left in the replicas'
  // context (its answer never comes: the fake replica does not generate).
  EXPECT_TRUE(std::holds_alternative<proto::Accepted>(submit(40, 24)));
  std::jthread chat([&] {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_read_timeout(1, 0);
    EXPECT_FALSE(http.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})",
                           "application/json"));
  });
  chat.join();
  std::vector<uint32_t> lengths;  // prompt plus max_tokens of each assignment
  EXPECT_TRUE(testing::WaitFor([&] {
    small->Receive(50ms);
    return small->Assigned().size() >= 2;
  }, 5s));
  for (const proto::Message& m : small->received()) {
    if (const auto* a = std::get_if<proto::Assign>(&m)) {
      lengths.push_back(static_cast<uint32_t>(a->prompt_tokens.size()) + a->sampling.max_tokens);
    }
  }
  EXPECT_EQ(lengths, (std::vector<uint32_t>{64, 64}));
}

TEST_F(ReplicaLossTest, ARequestGoesOnlyToReplicasWhoseContextHoldsIt) {
  // Pools of different KV caches: a request that only the larger context holds used to be
  // routed anywhere, and a small replica refused it.
  auto small = Replica("small");
  ASSERT_TRUE(small->Register(/*context_length=*/64));
  auto large = Replica("large");
  ASSERT_TRUE(large->Register(/*context_length=*/512));
  std::vector<uint64_t> long_ids, short_ids;
  for (int i = 0; i < 6; ++i) {
    long_ids.push_back(Submit("long" + std::to_string(i), /*prompt_tokens=*/100));
    short_ids.push_back(Submit("short" + std::to_string(i)));
  }
  // The Assigns travel on other connections than the Accepted answers: wait for all of them.
  EXPECT_TRUE(testing::WaitFor([&] {
    small->Receive(50ms);
    large->Receive(50ms);
    return small->Assigned().size() + large->Assigned().size() >= 12;
  }, 5s));
  for (uint64_t id : small->Assigned()) {
    EXPECT_EQ(std::find(long_ids.begin(), long_ids.end(), id), long_ids.end()) << "request " << id << " went to small";
  }
  EXPECT_EQ(small->Assigned().size() + large->Assigned().size(), 12u);
}

class ReplicaRefusalTest : public ReplicaLossTest {
 protected:
  void SetUp() override {
    queue_timeout_ms_ = 1500;
    long_tail_min_samples_ = 1;  // the first prompt length already counts
    ReplicaLossTest::SetUp();
  }

  struct Refused {
    std::optional<proto::ErrorMessage> answer;  // the client's, when one came within 20 s
    size_t offers = 0;
  };
  // `replica` answers every offer of request `id` "full", as a worker whose queue is at
  // scheduler.max_waiting, until the client is answered.
  Refused RefuseEveryOffer(FakeReplica& replica, uint64_t id) {
    Refused refused;
    size_t seen = 0;
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (!refused.answer && std::chrono::steady_clock::now() < give_up) {
      replica.Receive(20ms);
      for (; seen < replica.received().size(); ++seen) {
        const auto* offer = std::get_if<proto::Assign>(&replica.received()[seen]);
        if (offer == nullptr || offer->request_id != id) continue;
        ++refused.offers;
        RefuseAsFull(replica, id, offer->assignment);
      }
      zmq::pollitem_t item{static_cast<void*>(client_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(0));
      if (item.revents & ZMQ_POLLIN) {
        auto in = proto::ReceiveMessage(client_, false);
        if (!in || !in->message.ok() || !std::holds_alternative<proto::ErrorMessage>(*in->message)) {
          ADD_FAILURE() << "the client's answer is not an error";
          return refused;
        }
        refused.answer = std::get<proto::ErrorMessage>(*in->message);
      }
    }
    return refused;
  }
};

TEST_F(ReplicaRefusalTest, ARequestEveryReplicaRefusesBacksOffAndFailsAtItsQueueDeadline) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t id = Submit("x");
  const Refused refused = RefuseEveryOffer(*a, id);
  // Refusals did not restart its wait: it failed at its queue deadline (1.5 s), naming why.
  ASSERT_TRUE(refused.answer) << "no answer in 20 s after " << refused.offers << " offers";
  EXPECT_EQ(refused.answer->code, StatusCode::kUnavailable);
  EXPECT_EQ(refused.answer->client_request_id, "x");
  EXPECT_NE(refused.answer->message.find(
                "no replica accepted the request in 1500 ms (every live one full or draining)"),
            std::string::npos)
      << refused.answer->message;
  // Offered again, but with a back-off (10 ms, doubling): about eight offers in 1.5 s, not one
  // per event-loop turn.
  EXPECT_GE(refused.offers, 2u);
  EXPECT_LE(refused.offers, 12u);
  EXPECT_EQ(Metric("bmad_coordinator_requests_finished_total{status=\"error\"}"), 1.0);
  // Its whole life was a wait in the queue.
  EXPECT_EQ(Metric("bmad_coordinator_queue_wait_seconds_count"), 1.0);
  EXPECT_GE(Metric("bmad_coordinator_queue_wait_seconds_sum"), 1.5);
}

// A full replica's freed slot goes to the request it refused, not to a newer arrival. Each
// refused request used to back off on its own (10 ms, doubling to 1 s) while every new arrival
// was offered at once: under overload the oldest requests lost every race for a freed slot,
// until their queue deadline.
TEST_F(ReplicaLossTest, AFullReplicasFreedSlotGoesToTheRequestItRefusedNotToANewerOne) {
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  const uint64_t held = Submit("held");
  ASSERT_TRUE(WaitForAssigns(*a, held, 1));
  const uint64_t old_id = Submit("old");
  // a is full: it refuses `old` five times (offered again as a probe, a replica's room may
  // grow), holding `held` all along.
  for (size_t offers = 1; offers <= 5; ++offers) {
    ASSERT_TRUE(WaitForAssigns(*a, old_id, offers)) << "offer " << offers;
    RefuseAsFull(*a, old_id, AssignsOf(*a, old_id)[offers - 1].assignment);
    if (offers == 1) {  // dashboards see why requests queue
      EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_replica_full{replica=\"a\"}") == 1.0; }, 5s));
    }
  }
  std::this_thread::sleep_for(20ms);  // the last refusal is read before the new request
  const uint64_t new_id = Submit("new");
  // `held` ends: its slot is `old`'s, then `new` comes.
  proto::TokenChunk last;
  last.request_id = held;
  last.assignment = AssignsOf(*a, held)[0].assignment;
  last.token_offset = 0;
  last.finish_reason = proto::FinishReason::kLength;
  a->Send(last);
  ASSERT_TRUE(WaitForAssigns(*a, new_id, 1));
  std::vector<uint64_t> order;
  for (const proto::Message& m : a->received()) {
    const auto* offer = std::get_if<proto::Assign>(&m);
    if (offer != nullptr && offer->request_id != held) order.push_back(offer->request_id);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{old_id, old_id, old_id, old_id, old_id, old_id, new_id}));
  // Queue waits: `held`'s (it ended without a token: up to its assignment), then `old`'s at its
  // first token, from arrival to the assignment that served it (five refusals later).
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_queue_wait_seconds_count") == 1.0; }, 5s));
  const double held_wait = Metric("bmad_coordinator_queue_wait_seconds_sum");
  proto::TokenChunk token;
  token.request_id = old_id;
  token.assignment = AssignsOf(*a, old_id).back().assignment;
  token.token_ids = {7};
  token.text = "x";
  a->Send(token);
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_queue_wait_seconds_count") == 2.0; }, 5s));
  EXPECT_GE(Metric("bmad_coordinator_queue_wait_seconds_sum") - held_wait, 4 * 0.2) << "five offers, a probe apart";
}

TEST_F(ReplicaRefusalTest, ALongTailRequestOfferedManyTimesCountsOnce) {
  // The counter of long-tail requests used to count every offer of a refused one.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  for (int i = 0; i < 5; ++i) Submit("short" + std::to_string(i));  // the window: five of 3 tokens
  const uint64_t id = Submit("long", /*prompt_tokens=*/10);
  const Refused refused = RefuseEveryOffer(*a, id);
  ASSERT_TRUE(refused.answer);  // its failure at the queue deadline
  ASSERT_GE(refused.offers, 2u);
  EXPECT_EQ(Metric("bmad_coordinator_long_tail_requests_total"), 1.0) << refused.offers << " offers";
  // The long-tail share's denominator counts requests too (the six), not offers; every offer
  // is still a routing decision.
  EXPECT_EQ(Metric("bmad_coordinator_requests_dispatched_total"), 6.0);
  EXPECT_EQ(CoordinatorMetricSum(server_->http_port(), "bmad_coordinator_requests_routed_total"),
            5.0 + refused.offers);
}

// A request offered again keeps the pool its first offer chose. X (15 tokens) is normal while
// the window holds 20-token prompts; both normal replicas refuse it; 40 urgent 2-token prompts
// then go ahead of it (class 0) as n2 makes room, and the window's threshold drops to 2. X was offered again as
// long-tail, to `lt`, a pool of another size of prompts; it stays normal now.
TEST_F(ReplicaRefusalTest, ARequestOfferedAgainKeepsItsPool) {
  auto n1 = Replica("n1");
  auto n2 = Replica("n2");
  auto lt = Replica("lt");
  ASSERT_TRUE(n1->Register());
  ASSERT_TRUE(n2->Register());
  ASSERT_TRUE(lt->Register(512, ReplicaPool::kLongTail));
  for (int i = 0; i < 5; ++i) Submit("twenty" + std::to_string(i), /*prompt_tokens=*/20);
  const auto assigned = [&](FakeReplica& r, uint64_t id) {
    r.Receive(20ms);
    return AssignsOf(r, id).size();
  };
  const uint64_t x = Submit("x", /*prompt_tokens=*/15);
  // Each normal replica refuses it once (the coordinator offers it to the other at once).
  size_t refused = 0;
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  size_t refused_n1 = 0, refused_n2 = 0;
  while (refused < 2 && std::chrono::steady_clock::now() < give_up) {
    for (auto [replica, done] : {std::pair{n1.get(), &refused_n1}, std::pair{n2.get(), &refused_n2}}) {
      if (assigned(*replica, x) <= *done) continue;
      RefuseAsFull(*replica, x, AssignsOf(*replica, x).back().assignment);
      ++*done;
      ++refused;
    }
  }
  ASSERT_EQ(refused, 2u);
  EXPECT_EQ(refused_n1, 1u);
  EXPECT_EQ(refused_n2, 1u);
  std::this_thread::sleep_for(50ms);  // both refusals are read: both replicas are full
  for (int i = 0; i < 40; ++i) Submit("urgent" + std::to_string(i), /*prompt_tokens=*/2, /*priority=*/0);
  // n2's queue empties, heartbeat after heartbeat (each makes room for its 8 sequence slots):
  // the urgent ones go first, then X, to a normal replica.
  proto::Heartbeat room;
  room.replica_id = "n2";
  EXPECT_TRUE(testing::WaitFor([&] {
    n2->Receive(20ms);
    if (const proto::Assign* newest = LastAssign(*n2)) {  // it has read every Assign sent...
      room.has_last_assignment = true;
      room.last_assignment = newest->assignment;
    }
    room.active_request_ids = n2->Assigned();  // ...and holds what it took: X only once offered
    // again after its refusal (a heartbeat leaving out an X it took again would report it lost,
    // and the coordinator would offer it a fourth time)
    if (AssignsOf(*n2, x).size() <= refused_n2) std::erase(room.active_request_ids, x);
    n2->Send(room);
    return assigned(*n1, x) + assigned(*n2, x) + assigned(*lt, x) >= 3;
  }, 10s));
  EXPECT_EQ(assigned(*lt, x), 0u) << "the refused request changed pools";
  EXPECT_EQ(assigned(*n1, x) + assigned(*n2, x), 3u);
}

TEST_F(ReplicaRefusalTest, TheChoicesOfOneLongPromptAllGoToTheLongTail) {
  // Each choice was classified on its own, and n copies of the prompt each added its length to
  // the window: the quantile rose between the choices, so the later ones of one request went to
  // the normal pool. Here one more 10 in the window moves its 80th percentile from 3 to 10.
  auto a = Replica("a");
  ASSERT_TRUE(a->Register());
  for (int i = 0; i < 4; ++i) Submit("short" + std::to_string(i));  // the window: four of 3 tokens
  Submit("long", /*prompt_tokens=*/10);                               // and one of 10: p80 is 3
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_long_tail_requests_total") == 1.0; }, 10s));
  std::jthread waiting([&] {
    httplib::Client http("127.0.0.1", server_->http_port());
    http.set_read_timeout(2, 0);  // no token ever comes: the client gives up
    (void)http.Post("/v1/completions", R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "n": 8, "max_tokens": 4})",
                    "application/json");
  });
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_requests_dispatched_total") == 13.0; }, 10s));
  // Counted right after the dispatch (a scrape may fall between the two).
  EXPECT_TRUE(testing::WaitFor([&] { return Metric("bmad_coordinator_long_tail_requests_total") >= 9.0; }, 5s));
  EXPECT_EQ(Metric("bmad_coordinator_long_tail_requests_total"), 9.0) << "the choices were classified apart";
  waiting.join();
}

TEST_F(ReplicaLossTest, AMigratedRequestGoesOnlyWhereItsTokensSoFarFit) {
  // It used to go to small (its prompt alone fits), which refused it, and the client got that.
  auto m = ChatMigratedPastASmallReplica(ctx_, server_->worker_endpoint(), server_->http_port());
  m->small->Receive(500ms);
  EXPECT_TRUE(m->small->Assigned().empty()) << "the migrated request went to the small replica";
  auto again = Replica("large-2");
  ASSERT_TRUE(again->Register(/*context_length=*/512));
  ASSERT_TRUE(testing::WaitFor([&] {
    again->Receive(50ms);
    return !again->Assigned().empty();
  }, 5s));
  ASSERT_NE(LastAssign(*again), nullptr);
  const proto::Assign moved = *LastAssign(*again);
  EXPECT_EQ(moved.generated_tokens.size(), 60u);
  proto::TokenChunk last;
  last.request_id = moved.request_id;
  last.assignment = moved.assignment;
  last.token_offset = 60;
  last.finish_reason = proto::FinishReason::kLength;
  again->Send(last);
  m->chat.join();
  EXPECT_EQ(m->status, 200) << m->body;
}

TEST_F(ReplicaRefusalTest, AMigratedRequestNoLiveReplicaHoldsFailsNamingTheContext) {
  auto m = ChatMigratedPastASmallReplica(ctx_, server_->worker_endpoint(), server_->http_port());
  m->chat.join();  // at its queue deadline, 1.5 s after it moved
  EXPECT_EQ(m->status, 503) << m->body;
  EXPECT_NE(m->body.find("no live replica's context holds the request's"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tokens (prompt, output so far and the least still to come) for 1500 ms"),
            std::string::npos)
      << m->body;
  m->small->Receive(100ms);
  EXPECT_TRUE(m->small->Assigned().empty());
}

// The migrated chat waits queued (for up to the 60 s queue timeout) for a replica whose context
// holds it. A short request the small replica refused once waits behind it, and is offered again
// while the chat still waits: a dispatch pass skips only the requests that need at least the
// context no replica holds, not every request behind one.
TEST_F(ReplicaLossTest, ARequestThatFitsIsOfferedAgainPastOneNoLiveReplicaHolds) {
  auto m = ChatMigratedPastASmallReplica(ctx_, server_->worker_endpoint(), server_->http_port());
  const uint64_t x = Submit("x");
  ASSERT_TRUE(WaitForAssigns(*m->small, x, 1));
  RefuseAsFull(*m->small, x, AssignsOf(*m->small, x)[0].assignment);
  EXPECT_TRUE(WaitForAssigns(*m->small, x, 2)) << "the refused request was not offered again";
  for (uint64_t id : m->small->Assigned()) EXPECT_EQ(id, x) << "the migrated chat went to small";
  // A replica that holds the chat ends its wait.
  auto large = Replica("large-2");
  ASSERT_TRUE(large->Register(/*context_length=*/512));
  ASSERT_TRUE(testing::WaitFor([&] {
    large->Receive(50ms);
    return LastAssign(*large) != nullptr;
  }, 5s));
  proto::TokenChunk last;
  last.request_id = LastAssign(*large)->request_id;
  last.assignment = LastAssign(*large)->assignment;
  last.token_offset = 60;
  last.finish_reason = proto::FinishReason::kLength;
  large->Send(last);
  m->chat.join();
  EXPECT_EQ(m->status, 200) << m->body;
}

}  // namespace
}  // namespace bmad::coord
