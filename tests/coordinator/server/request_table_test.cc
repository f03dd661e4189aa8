// The coordinator's request table: admission bounds per priority class, and the queue's order
// (the order the replicas' scheduler admits: by arrival, or by priority aged with waiting).
#include "coordinator/server/request_table.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::coord {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

class RequestTableTest : public ::testing::Test {
 protected:
  // A queued request of `priority` that arrived at `arrival_s` seconds; its id.
  uint64_t Add(RequestTable& table, int32_t priority, double arrival_s, uint32_t slo_ms = 0) {
    auto r = std::make_unique<CoordRequest>();
    r->id = table.NextId();
    r->priority = priority;
    r->slo_ms = slo_ms;
    r->arrival_ns = static_cast<int64_t>(arrival_s * double(kSecond));
    Result<CoordRequest*> admitted = table.Admit(std::move(r));
    EXPECT_TRUE(admitted.ok()) << admitted.status().ToString();
    return admitted.ok() ? (*admitted)->id : 0;
  }
  // The offer order at `now_s` seconds.
  static std::vector<uint64_t> Order(RequestTable& table, double now_s = 1000.0) {
    std::vector<uint64_t> ids;
    for (const CoordRequest* r : table.Queued(static_cast<int64_t>(now_s * double(kSecond)))) ids.push_back(r->id);
    return ids;
  }
};

TEST_F(RequestTableTest, ByArrivalIgnoresPriorityAndARequestBackFromAReplicaKeepsItsPlace) {
  RequestTable table(/*max_per_priority=*/10, /*priority_classes=*/3);  // fcfs / static replicas
  const uint64_t a = Add(table, 2, 100.0);
  const uint64_t b = Add(table, 0, 100.5);
  const uint64_t c = Add(table, 1, 99.0);  // came in earlier through a slower front door
  EXPECT_EQ(Order(table), (std::vector<uint64_t>{c, a, b}));
  const uint64_t d = Add(table, 0, 101.0, /*slo_ms=*/1);  // deadlines do not count either
  EXPECT_EQ(Order(table), (std::vector<uint64_t>{c, a, b, d}));
  table.Remove(d);
  EXPECT_EQ(table.queued(), 3u);
  // c goes to a replica, which refuses it: back in front.
  table.SetState(table.Find(c), RequestState::kDispatched);
  EXPECT_EQ(Order(table), (std::vector<uint64_t>{a, b}));
  table.SetState(table.Find(c), RequestState::kDispatched);  // no change
  EXPECT_EQ(table.queued(), 2u);
  table.SetState(table.Find(c), RequestState::kQueued);
  EXPECT_EQ(Order(table), (std::vector<uint64_t>{c, a, b}));
  // Streaming, then removed: out of the queue; removing a queued one takes it out too.
  table.SetState(table.Find(a), RequestState::kDispatched);
  table.SetState(table.Find(a), RequestState::kStreaming);
  table.Remove(a);
  table.Remove(b);
  EXPECT_EQ(Order(table), (std::vector<uint64_t>{c}));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.in_class(0), 0);
  EXPECT_EQ(table.in_class(1), 1);
}

TEST_F(RequestTableTest, ByPriorityAWaitingSecondIsWorthPriorityDecayOfAClass) {
  RequestTable table(10, 3, /*by_priority=*/true, /*priority_decay=*/1.0);
  const uint64_t low_old = Add(table, 2, 7.0);      // class 2, waited 3 s more than urgent_new
  const uint64_t urgent_new = Add(table, 0, 10.0);
  const uint64_t low_recent = Add(table, 2, 9.0);   // waited 1 s more: class 0 still goes first
  const uint64_t normal = Add(table, 1, 10.0);      // level with low_recent, which came first
  const uint64_t urgent_tie = Add(table, 0, 10.0);  // ties go by arrival, then by id
  // At 10 s: -class + waited seconds + the share of the 5 s SLO gone: 1.6, 0, 0, -0.8, -1.
  EXPECT_EQ(Order(table, 10.0), (std::vector<uint64_t>{low_old, urgent_new, urgent_tie, low_recent, normal}));
}

TEST_F(RequestTableTest, ByPriorityWithoutAgingIsClassThenArrival) {
  // Deadlines too far to count.
  RequestTable table(10, 3, /*by_priority=*/true, /*priority_decay=*/0.0, /*default_slo_ms=*/int64_t{1} << 40);
  const uint64_t low_old = Add(table, 2, 1.0);
  const uint64_t urgent = Add(table, 0, 500.0);
  const uint64_t normal_late = Add(table, 1, 400.0);
  const uint64_t normal_early = Add(table, 1, 300.0);
  EXPECT_EQ(Order(table), (std::vector<uint64_t>{urgent, normal_early, normal_late, low_old}));
}

// Deadline pressure, as a replica's scheduler adds it: the share of the SLO gone (up to one
// class at the deadline), then one class per second past it.
TEST_F(RequestTableTest, ByPriorityANearingDeadlineMovesARequestAhead) {
  RequestTable table(10, 3, /*by_priority=*/true, /*priority_decay=*/1.0, /*default_slo_ms=*/5000);
  const uint64_t relaxed = Add(table, 1, 10.0);               // the default 5 s SLO
  const uint64_t tight = Add(table, 1, 10.5, /*slo_ms=*/500);  // due at 11 s
  // At 10.5 s: relaxed -1 + 0.5 + 0.1, tight -1 + 0 + 0: arrival order still.
  EXPECT_EQ(Order(table, 10.5), (std::vector<uint64_t>{relaxed, tight}));
  // At 11 s: relaxed -1 + 1 + 0.2 = 0.2, tight -1 + 0.5 + 1 = 0.5 (at its deadline).
  EXPECT_EQ(Order(table, 11.0), (std::vector<uint64_t>{tight, relaxed}));
  // A class-0 arrival at 11 s (0) goes behind both.
  const uint64_t urgent = Add(table, 0, 11.0);
  EXPECT_EQ(Order(table, 11.0), (std::vector<uint64_t>{tight, relaxed, urgent}));
  // Past its deadline tight gains a class a second. At 12 s: tight -1 + 1.5 + 1 + 1 = 2.5,
  // relaxed -1 + 2 + 0.4 = 1.4, urgent 0 + 1 + 0.2 = 1.2.
  EXPECT_EQ(Order(table, 12.0), (std::vector<uint64_t>{tight, relaxed, urgent}));
  // Unranked (a pass that only checks queue deadlines): class + arrival seconds alone, 11, 11.5
  // and 11 (the tie by arrival).
  std::vector<uint64_t> unranked;
  for (const CoordRequest* r : table.Queued(12 * kSecond, /*ranked=*/false)) unranked.push_back(r->id);
  EXPECT_EQ(unranked, (std::vector<uint64_t>{relaxed, urgent, tight}));
  // Refused by a replica and queued again: its place is the same.
  table.SetState(table.Find(tight), RequestState::kDispatched);
  EXPECT_EQ(Order(table, 12.0), (std::vector<uint64_t>{relaxed, urgent}));
  table.SetState(table.Find(tight), RequestState::kQueued);
  EXPECT_EQ(Order(table, 12.0), (std::vector<uint64_t>{tight, relaxed, urgent}));
}

TEST_F(RequestTableTest, AdmissionIsBoundedPerClass) {
  RequestTable table(/*max_per_priority=*/2, /*priority_classes=*/2);
  Add(table, 0, 1.0);
  Add(table, 0, 2.0);
  EXPECT_EQ(table.CheckRoom(0, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(table.CheckRoom(1, 2).ok());
  EXPECT_EQ(table.CheckRoom(1, 3).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(table.CheckRoom(2, 1).code(), StatusCode::kInvalidArgument);
  auto r = std::make_unique<CoordRequest>();
  r->id = table.NextId();
  r->priority = 0;
  EXPECT_EQ(table.Admit(std::move(r)).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(table.queued(), 2u);  // the refused one never entered the queue
}

}  // namespace
}  // namespace bmad::coord
