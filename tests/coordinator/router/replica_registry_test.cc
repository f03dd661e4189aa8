// The replica registry with fake replicas (hand-built Register and Heartbeat messages) and a
// ManualClock: registration, validation, heartbeats, liveness and routing-id bookkeeping.
#include "coordinator/router/replica_registry.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::coord {
namespace {

constexpr int64_t kTimeoutMs = 2000;

CoordinatorConfig Config() {
  CoordinatorConfig config;
  config.liveness_timeout_ms = kTimeoutMs;
  return config;
}

proto::Register RegisterMessage(const std::string& id, uint64_t incarnation = 1,
                                ReplicaPool pool = ReplicaPool::kNormal) {
  proto::Register message;
  message.incarnation = incarnation;
  proto::ReplicaInfo& info = message.info;
  info.replica_id = id;
  info.pool = pool;
  info.kv_blocks = 1000;
  info.block_size = 16;
  info.max_seqs = 64;
  info.model_name = "tiny";
  info.context_length = 2048;
  return message;
}

proto::Heartbeat HeartbeatMessage(const std::string& id, uint32_t running = 0,
                                  float kv_usage = 0.0f) {
  proto::Heartbeat message;
  message.replica_id = id;
  message.load.running = running;
  message.load.kv_usage = kv_usage;
  message.load.utilization = 0.5f;
  message.active_request_ids = {7, 9};
  return message;
}

class ReplicaRegistryTest : public ::testing::Test {
 protected:
  ManualClock clock_{1'000'000'000};
  ReplicaRegistry registry_{Config(), clock_, "tiny"};

  const ReplicaState* MustRegister(const std::string& id, const std::string& routing_id,
                                   uint64_t incarnation = 1) {
    Result<const ReplicaState*> r =
        registry_.Register(RegisterMessage(id, incarnation), routing_id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nullptr;
  }
};

TEST_F(ReplicaRegistryTest, RegistersAndFindsByIdAndRoutingId) {
  const ReplicaState* a = MustRegister("a", "a/1");
  const ReplicaState* b = MustRegister("b", "b/1");
  ASSERT_NE(a, nullptr);

  EXPECT_EQ(registry_.Find("a"), a);
  EXPECT_EQ(registry_.Find("b"), b);
  EXPECT_EQ(registry_.Find("c"), nullptr);
  EXPECT_EQ(registry_.FindByRoutingId("a/1"), a);
  EXPECT_EQ(registry_.FindByRoutingId("b/1"), b);
  EXPECT_EQ(registry_.FindByRoutingId("a"), nullptr);
  const ReplicaRegistry& const_registry = registry_;
  EXPECT_EQ(const_registry.Find("a"), a);
  EXPECT_EQ(const_registry.FindByRoutingId("b/1"), b);

  const ReplicaState& state = *a;
  EXPECT_TRUE(state.live);
  EXPECT_TRUE(state.info.live);
  EXPECT_EQ(state.routing_id, "a/1");
  EXPECT_EQ(state.incarnation, 1u);
  EXPECT_EQ(state.last_heartbeat_ms, clock_.NowMillis());
  EXPECT_EQ(state.info.max_seqs, 64u);
  EXPECT_EQ(registry_.LiveCount(), 2u);
  EXPECT_EQ(registry_.size(), 2u);
}

TEST_F(ReplicaRegistryTest, IgnoresThePeersOwnBookkeepingFields) {
  proto::Register message = RegisterMessage("a");
  message.info.live = false;
  message.info.in_flight = 99;
  message.info.routed_total = 12345;
  message.info.load.kv_usage = std::nanf("");
  message.info.load.utilization = 7.0f;
  Result<const ReplicaState*> r = registry_.Register(message, "a/1");
  ASSERT_TRUE(r.ok());
  const ReplicaState& a = **r;
  EXPECT_TRUE(a.live);
  EXPECT_TRUE(a.info.live);
  EXPECT_EQ(a.info.in_flight, 0u);
  EXPECT_EQ(a.info.routed_total, 0u);
  EXPECT_EQ(a.info.load.kv_usage, 1.0f);  // garbage looks busy
  EXPECT_EQ(a.info.load.utilization, 1.0f);
}

TEST_F(ReplicaRegistryTest, HeartbeatStoresSanitisedLoadAndActiveIds) {
  MustRegister("a", "a/1");
  clock_.AdvanceMillis(100);
  proto::Heartbeat hb = HeartbeatMessage("a", 5, 0.25f);
  ASSERT_TRUE(registry_.Heartbeat(hb, "a/1").ok());
  const ReplicaState* a = registry_.Find("a");
  EXPECT_EQ(a->info.load.running, 5u);
  EXPECT_FLOAT_EQ(a->info.load.kv_usage, 0.25f);
  EXPECT_EQ(a->active_request_ids, (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(a->last_heartbeat_ms, clock_.NowMillis());

  hb.load.kv_usage = -3.0f;
  hb.load.utilization = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(registry_.Heartbeat(hb, "a/1").ok());
  EXPECT_EQ(a->info.load.kv_usage, 0.0f);
  EXPECT_EQ(a->info.load.utilization, 1.0f);
}

TEST_F(ReplicaRegistryTest, DiesAfterTheTimeoutReportedOnceAndComesBackOnHeartbeat) {
  MustRegister("a", "a/1");
  MustRegister("b", "b/1");
  clock_.AdvanceMillis(kTimeoutMs - 1);
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("b"), "b/1").ok());
  EXPECT_TRUE(registry_.ExpireDead().empty());

  clock_.AdvanceMillis(1);  // a silent for exactly the timeout
  EXPECT_EQ(registry_.ExpireDead(), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(registry_.Find("a")->live);
  EXPECT_FALSE(registry_.Find("a")->info.live);
  EXPECT_TRUE(registry_.Find("b")->live);
  EXPECT_EQ(registry_.LiveCount(), 1u);
  clock_.AdvanceMillis(10);
  EXPECT_TRUE(registry_.ExpireDead().empty());  // reported once

  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").ok());
  EXPECT_TRUE(registry_.Find("a")->live);
  EXPECT_TRUE(registry_.Find("a")->info.live);
  clock_.AdvanceMillis(kTimeoutMs);
  // b's last heartbeat is older still, so both die now, reported in registration order.
  EXPECT_EQ(registry_.ExpireDead(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(ReplicaRegistryTest, ComesBackOnReRegister) {
  MustRegister("a", "a/1");
  clock_.AdvanceMillis(kTimeoutMs);
  EXPECT_EQ(registry_.ExpireDead().size(), 1u);
  const ReplicaState* again = MustRegister("a", "a/1", 1);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->live);
  EXPECT_EQ(again, registry_.Find("a"));  // same state, not a second entry
  EXPECT_EQ(registry_.size(), 1u);
  clock_.AdvanceMillis(kTimeoutMs - 1);
  EXPECT_TRUE(registry_.ExpireDead().empty());  // registering counts as a heartbeat
}

TEST_F(ReplicaRegistryTest, UnknownHeartbeatIsNotFound) {
  EXPECT_EQ(registry_.Heartbeat(HeartbeatMessage("ghost"), "ghost/1").code(),
            StatusCode::kNotFound);
  MustRegister("a", "a/1");
  // Right id, wrong connection: the peer must register again.
  EXPECT_EQ(registry_.Heartbeat(HeartbeatMessage("a"), "a/2").code(), StatusCode::kNotFound);
  EXPECT_EQ(registry_.Find("a")->info.load.running, 0u);  // nothing stored
}

TEST_F(ReplicaRegistryTest, RefusesAnotherModel) {
  proto::Register message = RegisterMessage("a");
  message.info.model_name = "huge";
  Result<const ReplicaState*> r = registry_.Register(message, "a/1");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("huge"), std::string::npos);
  EXPECT_EQ(registry_.size(), 0u);

  ReplicaRegistry any_model(Config(), clock_);  // no expected model: anything goes
  EXPECT_TRUE(any_model.Register(message, "a/1").ok());
}

TEST_F(ReplicaRegistryTest, RefusesUnusableInfo) {
  struct Case {
    const char* name;
    void (*spoil)(proto::ReplicaInfo&);
  };
  const Case cases[] = {
      {"empty id", [](proto::ReplicaInfo& i) { i.replica_id.clear(); }},
      {"long id", [](proto::ReplicaInfo& i) { i.replica_id.assign(1000, 'x'); }},
      {"tp", [](proto::ReplicaInfo& i) { i.tp = 0; }},
      {"pp", [](proto::ReplicaInfo& i) { i.pp = 0; }},
      {"kv_blocks", [](proto::ReplicaInfo& i) { i.kv_blocks = 0; }},
      {"block_size", [](proto::ReplicaInfo& i) { i.block_size = 0; }},
      {"max_seqs", [](proto::ReplicaInfo& i) { i.max_seqs = 0; }},
      {"pool", [](proto::ReplicaInfo& i) { i.pool = static_cast<ReplicaPool>(7); }},
  };
  for (const Case& c : cases) {
    proto::Register message = RegisterMessage("a");
    c.spoil(message.info);
    EXPECT_EQ(registry_.Register(message, "a/1").status().code(), StatusCode::kInvalidArgument)
        << c.name;
  }
  EXPECT_EQ(registry_.Register(RegisterMessage("a"), "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.size(), 0u);
  EXPECT_EQ(registry_.FindByRoutingId("a/1"), nullptr);
}

TEST_F(ReplicaRegistryTest, RestartResetsInFlightKeepsRoutedTotalAndMovesTheRoutingId) {
  MustRegister("a", "a/1", 1);
  ASSERT_TRUE(registry_.AddInFlight("a", 1));
  ASSERT_TRUE(registry_.AddInFlight("a", 1));
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").ok());
  clock_.AdvanceMillis(kTimeoutMs);  // the old process went silent (it was killed)

  const ReplicaState* a = MustRegister("a", "a/2", 2);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->incarnation, 2u);
  EXPECT_EQ(a->in_flight, 0u);          // the old process's requests are gone
  EXPECT_EQ(a->info.in_flight, 0u);
  EXPECT_EQ(a->routed_total, 2u);       // a counter: never goes back
  EXPECT_EQ(a->info.routed_total, 2u);
  EXPECT_TRUE(a->active_request_ids.empty());
  EXPECT_EQ(a->routing_id, "a/2");
  EXPECT_EQ(registry_.FindByRoutingId("a/2"), a);
  EXPECT_EQ(registry_.FindByRoutingId("a/1"), nullptr);
  EXPECT_EQ(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").code(), StatusCode::kNotFound);
  EXPECT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/2").ok());
}

TEST_F(ReplicaRegistryTest, ANewProcessWaitsWhileTheIdsCurrentOneIsHeardFrom) {
  MustRegister("a", "a/1", 1);
  ASSERT_TRUE(registry_.AddInFlight("a", 1));
  // A second process with the same id (a copied config), while the first heartbeats.
  for (int i = 0; i < 5; ++i) {
    Result<const ReplicaState*> second = registry_.Register(RegisterMessage("a", 2), "a/2");
    ASSERT_EQ(second.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(second.status().message().find("replica id 'a' is held by a live process"), std::string::npos)
        << second.status().ToString();
    clock_.AdvanceMillis(kTimeoutMs / 2);
    ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").ok());
  }
  // Untouched: the first keeps its connection and its request.
  EXPECT_EQ(registry_.Find("a")->incarnation, 1u);
  EXPECT_EQ(registry_.Find("a")->in_flight, 1u);
  EXPECT_EQ(registry_.FindByRoutingId("a/2"), nullptr);
  // The first stops heartbeating: once silent for the liveness timeout, the second takes the id.
  clock_.AdvanceMillis(kTimeoutMs - 1);
  EXPECT_EQ(registry_.Register(RegisterMessage("a", 2), "a/2").status().code(), StatusCode::kUnavailable);
  clock_.AdvanceMillis(1);
  const ReplicaState* a = MustRegister("a", "a/2", 2);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->incarnation, 2u);
  EXPECT_EQ(a->in_flight, 0u);
  // And a dead one's id is taken at once.
  ASSERT_TRUE(registry_.MarkDead("a"));
  EXPECT_NE(MustRegister("a", "a/3", 3), nullptr);
}

TEST_F(ReplicaRegistryTest, ADrainingReplicaStaysLiveButAcceptsNothingUntilANewProcess) {
  MustRegister("a", "a/1", 1);
  EXPECT_TRUE(registry_.MarkDraining("a"));
  EXPECT_FALSE(registry_.MarkDraining("a"));  // reported once
  EXPECT_FALSE(registry_.MarkDraining("nobody"));
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").ok());
  EXPECT_TRUE(registry_.Views()[0].live);
  EXPECT_FALSE(registry_.Views()[0].accepting);
  MustRegister("a", "a/1", 1);  // the same process again (a coordinator restart): still draining
  EXPECT_FALSE(registry_.Views()[0].accepting);
  // A new process under the id, once the draining one has finished and gone quiet.
  clock_.AdvanceMillis(kTimeoutMs);
  MustRegister("a", "a/2", 2);
  EXPECT_TRUE(registry_.Views()[0].accepting);
}

// The first offer since a replica's last sign of progress refused as full: it holds all it can.
// It takes nothing more until it shows progress (a chunk; kFullProbeMs without one), and is full
// while it holds what it held then (never fewer than it runs and one waiting), taking more as
// they end. The cap only comes down; it rises by one every kFullProbeMs, a heartbeat showing an
// empty queue raises it by the free sequence slots, and a registration clears it.
TEST_F(ReplicaRegistryTest, AReplicaThatRefusesItsFirstOfferHoldsAllItCan) {
  MustRegister("a", "a/1", 1);
  MustRegister("b", "b/1", 1);
  const auto full = [&] { return registry_.Views()[0].full; };
  // Three offers taken over three steps, then a fourth refused as the first of its step.
  for (int i = 0; i < 3; ++i) {
    registry_.Offered("a");
    ASSERT_TRUE(registry_.AddInFlight("a", 1));
    registry_.Progressed("a");
  }
  const OfferPosition fourth = registry_.Offered("a");
  EXPECT_EQ(fourth.index, 0u);
  registry_.MarkFull("a", fourth);  // (the coordinator never added it to in_flight: it was refused)
  EXPECT_TRUE(full());
  EXPECT_TRUE(registry_.Views()[0].accepting);  // full is not draining
  EXPECT_FALSE(registry_.Views()[1].full);
  EXPECT_TRUE(registry_.AnyTakesRequests());  // b
  ASSERT_TRUE(registry_.AddInFlight("a", -1));  // one ends...
  EXPECT_TRUE(full()) << "no progress yet: the step that ended it has not shown";
  registry_.Progressed("a");  // ...and its chunk came: room for one
  EXPECT_FALSE(full());
  registry_.Offered("a");
  ASSERT_TRUE(registry_.AddInFlight("a", +1));
  EXPECT_TRUE(full());
  // The probe: one more after 200 ms, two after 400 ms.
  clock_.AdvanceMillis(ReplicaRegistry::kFullProbeMs - 1);
  EXPECT_TRUE(full());
  clock_.AdvanceMillis(1);
  EXPECT_FALSE(full());
  registry_.Offered("a");
  ASSERT_TRUE(registry_.AddInFlight("a", +1));  // 4
  EXPECT_TRUE(full());
  clock_.AdvanceMillis(ReplicaRegistry::kFullProbeMs);
  EXPECT_FALSE(full());
  // Its first offer after a chunk refused at 4, under the cap of 5: the capacity is 4 from now.
  registry_.Progressed("a");
  registry_.MarkFull("a", registry_.Offered("a"));
  registry_.Progressed("a");
  EXPECT_TRUE(full());
  // Refused again, as the first offer after the next chunk, at the same 4: the probe's clock
  // runs on.
  clock_.AdvanceMillis(ReplicaRegistry::kFullProbeMs / 2);
  registry_.MarkFull("a", registry_.Offered("a"));
  registry_.Progressed("a");
  EXPECT_TRUE(full());
  clock_.AdvanceMillis(ReplicaRegistry::kFullProbeMs / 2);
  EXPECT_FALSE(full()) << "the second refusal restarted the probe";
  // Never under what the replica runs, and one waiting: holding 1 of ours, running 3 (others',
  // or a count behind), the cap (5) comes down to 4, not 1.
  proto::Heartbeat busy = HeartbeatMessage("a", /*running=*/3);
  busy.load.waiting = 1;
  ASSERT_TRUE(registry_.Heartbeat(busy, "a/1").ok());
  ASSERT_TRUE(registry_.AddInFlight("a", -3));  // 1
  registry_.Progressed("a");
  registry_.MarkFull("a", registry_.Offered("a"));
  registry_.Progressed("a");
  ASSERT_TRUE(registry_.AddInFlight("a", 2));  // 3
  EXPECT_FALSE(full());
  ASSERT_TRUE(registry_.AddInFlight("a", 1));  // 4
  EXPECT_TRUE(full());
  ASSERT_TRUE(registry_.AddInFlight("a", 3));  // 7
  // A heartbeat with requests waiting changes nothing; one with its queue empty raises the cap
  // by its free sequence slots (64 less the 10 it runs).
  ASSERT_TRUE(registry_.Heartbeat(busy, "a/1").ok());
  EXPECT_TRUE(full());
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a", /*running=*/10), "a/1").ok());
  EXPECT_FALSE(full());
  ASSERT_TRUE(registry_.AddInFlight("a", 53));  // 60
  EXPECT_FALSE(full());
  ASSERT_TRUE(registry_.AddInFlight("a", 1));  // 61 = 7 + 54
  EXPECT_TRUE(full());
  // A registration clears it (what the process holds is what it says then).
  MustRegister("a", "a/1", 1);
  EXPECT_FALSE(full());
  // Refused while holding nothing: full until it shows progress (or the probe), then room for
  // one.
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("b"), "b/1").ok());
  registry_.MarkFull("b", registry_.Offered("b"));
  registry_.MarkFull("a", registry_.Offered("a"));
  EXPECT_EQ(registry_.Find("b")->in_flight, 0u);
  EXPECT_TRUE(registry_.Views()[1].full);
  EXPECT_FALSE(registry_.AnyTakesRequests());
  clock_.AdvanceMillis(ReplicaRegistry::kFullProbeMs);  // no chunk ever came: the wait ends anyway
  EXPECT_TRUE(registry_.AnyTakesRequests());
  EXPECT_FALSE(registry_.Views()[1].full);
  registry_.MarkFull("nobody", {});  // unknown: nothing
  registry_.Progressed("nobody");
  EXPECT_EQ(registry_.Offered("nobody").index, 0u);
}

// A later offer of one interval refused: the step's room is taken, not the replica's. It takes
// nothing more until its next sign of progress, and an interval takes no more offers than were
// made before the refused one: twice that after an interval that took all it was given, no
// limit once that passes its sequence slots.
TEST_F(ReplicaRegistryTest, AReplicaThatRefusesALaterOfferOfAStepTakesThatManyAStep) {
  MustRegister("a", "a/1", 1);
  const auto full = [&] { return registry_.Views()[0].full; };
  // Five offers in one step: the first two taken, the third refused (the fourth and fifth too).
  std::vector<OfferPosition> offers;
  for (int i = 0; i < 5; ++i) offers.push_back(registry_.Offered("a"));
  ASSERT_TRUE(registry_.AddInFlight("a", 2));
  registry_.MarkFull("a", offers[2]);
  registry_.MarkFull("a", offers[4]);
  registry_.MarkFull("a", offers[3]);
  EXPECT_TRUE(full());
  EXPECT_FALSE(registry_.Find("a")->full_at) << "a step's room, not a capacity";
  // Its next step: two offers, then full until the one after.
  registry_.Progressed("a");
  registry_.Progressed("a");  // more chunks of the same step: still one interval
  EXPECT_FALSE(full());
  registry_.Offered("a");
  EXPECT_FALSE(full());
  registry_.Offered("a");
  EXPECT_TRUE(full());
  // It took both: the next interval takes four, then eight...
  registry_.Progressed("a");
  for (int i = 0; i < 4; ++i) {
    EXPECT_FALSE(full()) << i;
    registry_.Offered("a");
  }
  EXPECT_TRUE(full());
  // ...and with no chunk for kFullProbeMs, the interval ends at the next offer (which starts
  // the next without doubling: nothing showed it took them).
  clock_.AdvanceMillis(ReplicaRegistry::kFullProbeMs);
  EXPECT_FALSE(full());
  EXPECT_EQ(registry_.Offered("a").index, 0u);
  EXPECT_EQ(registry_.Find("a")->interval_budget, 4u);
  for (int i = 1; i < 4; ++i) registry_.Offered("a");
  EXPECT_TRUE(full());
  // A heartbeat showing its queue empty: it took them all; 8, 16, 32, 64 (its sequence slots),
  // then no limit.
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").ok());
  EXPECT_EQ(registry_.Find("a")->interval_budget, 8u);
  for (const uint32_t budget : {8u, 16u, 32u, 64u}) {
    EXPECT_EQ(registry_.Find("a")->interval_budget, budget);
    for (uint32_t i = 0; i < budget; ++i) registry_.Offered("a");
    EXPECT_TRUE(full());
    registry_.Progressed("a");
  }
  EXPECT_FALSE(registry_.Find("a")->interval_budget);
  for (int i = 0; i < 1000; ++i) registry_.Offered("a");
  EXPECT_FALSE(full());
  // A worker answers a step's offers after that step's chunks: a refusal that comes after the
  // replica showed progress is read by its offer's place, and stops nothing of the interval
  // that began since.
  registry_.Progressed("a");
  registry_.Offered("a");
  const OfferPosition second = registry_.Offered("a");
  registry_.Progressed("a");
  registry_.MarkFull("a", second);
  EXPECT_FALSE(registry_.Find("a")->full_at) << "a step's room, not a capacity";
  EXPECT_EQ(registry_.Find("a")->interval_budget, 1u);
  EXPECT_FALSE(full());
  registry_.Offered("a");
  EXPECT_TRUE(full());  // the budget
  // A heartbeat sent before the worker read every Assign (one during a step) ends no interval,
  // whatever its queue says; one that has read them all does.
  ReplicaState* state = registry_.Find("a");
  state->assigned = true;
  state->last_assignment = 41;
  proto::Heartbeat behind = HeartbeatMessage("a");
  behind.has_last_assignment = true;
  behind.last_assignment = 40;
  ASSERT_TRUE(registry_.Heartbeat(behind, "a/1").ok());
  EXPECT_TRUE(full());
  behind.last_assignment = 41;
  ASSERT_TRUE(registry_.Heartbeat(behind, "a/1").ok());
  EXPECT_FALSE(full());
  EXPECT_EQ(registry_.Find("a")->interval_budget, 2u) << "it took all it was given";
  // The first offer since its last progress refused, answered after the next: it holds all it
  // can.
  const OfferPosition first = registry_.Offered("a");
  registry_.Progressed("a");
  registry_.MarkFull("a", first);
  EXPECT_TRUE(registry_.Find("a")->full_at);
}

TEST_F(ReplicaRegistryTest, SameIncarnationKeepsInFlightAndActiveIds) {
  MustRegister("a", "a/1", 5);
  ASSERT_TRUE(registry_.AddInFlight("a", 3));
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("a"), "a/1").ok());
  const ReplicaState* again = MustRegister("a", "a/1", 5);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->in_flight, 3u);
  EXPECT_EQ(again->info.in_flight, 3u);
  EXPECT_EQ(again->routed_total, 3u);
  EXPECT_EQ(again->active_request_ids, (std::vector<uint64_t>{7, 9}));
}

TEST_F(ReplicaRegistryTest, ARepeatRegistrationIsTheLiveProcessOnTheSameConnection) {
  EXPECT_FALSE(registry_.IsRepeatRegistration(RegisterMessage("a", 5), "a/1"));  // unknown
  MustRegister("a", "a/1", 5);
  EXPECT_TRUE(registry_.IsRepeatRegistration(RegisterMessage("a", 5), "a/1"));
  EXPECT_FALSE(registry_.IsRepeatRegistration(RegisterMessage("a", 5), "a/2"));  // reconnected
  EXPECT_FALSE(registry_.IsRepeatRegistration(RegisterMessage("a", 6), "a/1"));  // restarted
  EXPECT_FALSE(registry_.IsRepeatRegistration(RegisterMessage("b", 5), "a/1"));
  clock_.AdvanceMillis(kTimeoutMs);
  ASSERT_EQ(registry_.ExpireDead().size(), 1u);
  // Taken for dead: its Register is a registration again (its requests were moved).
  EXPECT_FALSE(registry_.IsRepeatRegistration(RegisterMessage("a", 5), "a/1"));
}

TEST_F(ReplicaRegistryTest, ALiveReplicasRoutingIdCannotBeTakenADeadOnesCan) {
  MustRegister("a", "shared");
  EXPECT_EQ(registry_.Register(RegisterMessage("b"), "shared").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_.Find("b"), nullptr);

  ASSERT_TRUE(registry_.MarkDead("a"));
  const ReplicaState* b = MustRegister("b", "shared");
  EXPECT_EQ(registry_.FindByRoutingId("shared"), b);
  EXPECT_TRUE(registry_.Find("a")->routing_id.empty());
  EXPECT_EQ(registry_.Heartbeat(HeartbeatMessage("a"), "shared").code(), StatusCode::kNotFound);
  // a can come back from a connection of its own.
  MustRegister("a", "a/2", 2);
  EXPECT_EQ(registry_.FindByRoutingId("shared"), b);
  EXPECT_EQ(registry_.FindByRoutingId("a/2"), registry_.Find("a"));
}

TEST_F(ReplicaRegistryTest, MarkDeadReportsEachDeathOnce) {
  MustRegister("a", "a/1");
  EXPECT_TRUE(registry_.MarkDead("a"));
  EXPECT_FALSE(registry_.MarkDead("a"));
  EXPECT_FALSE(registry_.MarkDead("nobody"));
  clock_.AdvanceMillis(kTimeoutMs * 3);
  EXPECT_TRUE(registry_.ExpireDead().empty());  // already dead: not reported again
  EXPECT_EQ(registry_.LiveCount(), 0u);
}

TEST_F(ReplicaRegistryTest, AllAndViewsKeepRegistrationOrder) {
  MustRegister("z", "z/1");
  MustRegister("a", "a/1");
  ASSERT_TRUE(registry_.Register(RegisterMessage("m", 1, ReplicaPool::kLongTail), "m/1").ok());
  ASSERT_TRUE(registry_.MarkDead("a"));
  ASSERT_TRUE(registry_.AddInFlight("m", 4));
  ASSERT_TRUE(registry_.Heartbeat(HeartbeatMessage("z", 3, 0.5f), "z/1").ok());
  MustRegister("a", "a/1");  // re-registering keeps its place

  const std::vector<const ReplicaState*> all = registry_.All();
  const std::vector<ReplicaView> views = registry_.Views();
  ASSERT_EQ(all.size(), 3u);
  ASSERT_EQ(views.size(), 3u);
  const char* order[] = {"z", "a", "m"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(all[i]->id(), order[i]);
    EXPECT_EQ(views[i].id, order[i]);
    EXPECT_EQ(views[i].live, all[i]->live);
    EXPECT_EQ(views[i].in_flight, all[i]->in_flight);
    EXPECT_EQ(views[i].max_seqs, 64u);
    EXPECT_EQ(views[i].kv_blocks, 1000u);
  }
  EXPECT_EQ(views[2].pool, ReplicaPool::kLongTail);
  EXPECT_EQ(views[2].in_flight, 4u);
  EXPECT_EQ(views[0].load.running, 3u);
}

TEST_F(ReplicaRegistryTest, InFlightIsClampedAndCountsRoutedRequests) {
  MustRegister("a", "a/1");
  EXPECT_FALSE(registry_.AddInFlight("nobody", 1));
  ASSERT_TRUE(registry_.AddInFlight("a", 1));
  ASSERT_TRUE(registry_.AddInFlight("a", -5));
  EXPECT_EQ(registry_.Find("a")->in_flight, 0u);
  EXPECT_EQ(registry_.Find("a")->routed_total, 1u);
  EXPECT_EQ(registry_.Find("a")->info.in_flight, 0u);
  EXPECT_EQ(registry_.Find("a")->info.routed_total, 1u);
  ASSERT_TRUE(registry_.AddInFlight("a", std::numeric_limits<int>::max()));
  ASSERT_TRUE(registry_.AddInFlight("a", std::numeric_limits<int>::max()));
  ASSERT_TRUE(registry_.AddInFlight("a", std::numeric_limits<int>::max()));
  EXPECT_EQ(registry_.Find("a")->in_flight, std::numeric_limits<uint32_t>::max());
}

TEST_F(ReplicaRegistryTest, HoldsABoundedNumberOfReplicasAndGivesLongDeadOnesSlotsAway) {
  for (size_t i = 0; i < ReplicaRegistry::kMaxReplicas; ++i) {
    const std::string id = std::to_string(i) + "-replica";
    ASSERT_TRUE(registry_.Register(RegisterMessage(id), id + "/1").ok()) << i;
  }
  // Full, every replica live: a new id is told to come back (a refusal would stop its worker).
  std::string evicted = "?";
  Result<const ReplicaState*> full = registry_.Register(RegisterMessage("one-too-many"), "x/1", &evicted);
  EXPECT_EQ(full.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(full.status().message().find("1024 replicas are known"), std::string::npos) << full.status().message();
  EXPECT_EQ(evicted, "");
  // Known ids may still re-register (a restart, once the old process has gone quiet).
  clock_.AdvanceMillis(kTimeoutMs);
  EXPECT_TRUE(registry_.Register(RegisterMessage("0-replica", 2), "0-replica/2").ok());
  EXPECT_EQ(registry_.size(), ReplicaRegistry::kMaxReplicas);
  // The others die; one of them still holds a request. Dead, but not for long enough yet.
  registry_.ExpireDead();
  ASSERT_TRUE(registry_.AddInFlight("1-replica", 1));
  EXPECT_EQ(registry_.Register(RegisterMessage("one-too-many"), "x/1").status().code(), StatusCode::kUnavailable);
  // Gone for the retention time: the new id takes the slot of the one dead the longest that
  // holds nothing ("0-replica" registered again later; "1-replica" holds a request).
  clock_.AdvanceMillis(ReplicaRegistry::kRetentionMs);
  Result<const ReplicaState*> in = registry_.Register(RegisterMessage("one-too-many"), "x/1", &evicted);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(evicted, "2-replica");
  EXPECT_EQ(registry_.size(), ReplicaRegistry::kMaxReplicas);
  EXPECT_EQ(registry_.Find("2-replica"), nullptr);
  EXPECT_EQ(registry_.FindByRoutingId("2-replica/1"), nullptr);
  ASSERT_NE(registry_.Find("one-too-many"), nullptr);
  EXPECT_TRUE(registry_.Find("one-too-many")->live);
  EXPECT_EQ(registry_.Find("one-too-many")->routed_total, 0u);
  EXPECT_EQ(registry_.FindByRoutingId("x/1"), registry_.Find("one-too-many"));
  // The forgotten id is a new one if it comes back: it needs a slot like any other.
  Result<const ReplicaState*> again = registry_.Register(RegisterMessage("2-replica", 2), "2-replica/2", &evicted);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(evicted, "3-replica");
}

TEST(ReplicaRegistryConfigTest, ANonPositiveTimeoutIsTakenAsOneMillisecond) {
  ManualClock clock;
  CoordinatorConfig config;
  config.liveness_timeout_ms = -5;
  ReplicaRegistry registry(config, clock);
  ASSERT_TRUE(registry.Register(RegisterMessage("a"), "a/1").ok());
  EXPECT_TRUE(registry.ExpireDead().empty());
  clock.AdvanceMillis(1);
  EXPECT_EQ(registry.ExpireDead(), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace bmad::coord
