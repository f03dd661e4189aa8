// The coordinator's per-replica series follow the replica: a replica id that comes back in
// another pool is up under that pool only.
#include "coordinator/server/coordinator_metrics.h"

#include <gtest/gtest.h>

namespace bmad::coord {
namespace {

TEST(CoordinatorMetricsTest, AReplicaThatChangesPoolIsUpUnderTheNewPoolOnly) {
  metrics::Registry registry;
  CoordinatorMetrics m(registry);
  m.SetReplicaUp("a", "normal", true);
  m.SetReplicaUp("b", "normal", true);
  std::string text = registry.RenderText();
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"} 1"), std::string::npos) << text;

  m.SetReplicaUp("a", "long_tail", true);  // a new process under the id, in the other pool
  text = registry.RenderText();
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"long_tail\",replica=\"a\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"normal\",replica=\"b\"} 1"), std::string::npos) << text;

  m.SetReplicaUp("a", "long_tail", false);
  m.SetReplicaUp("a", "normal", true);  // and back
  text = registry.RenderText();
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"long_tail\",replica=\"a\"} 0"), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"} 1"), std::string::npos) << text;
}

TEST(CoordinatorMetricsTest, AForgottenReplicaLeavesNoSeriesAndCanComeBack) {
  // A long-dead replica's registry slot goes to a new id: its series go too, or every made-up
  // id a peer registers would stay exported for ever.
  metrics::Registry registry;
  CoordinatorMetrics m(registry);
  m.SetReplicaUp("a", "normal", true);
  m.Routed("a", "weighted", "normal").Increment();
  m.ReplicaLoad("a").Set(0.5);
  m.ReplicaWeight("a").Set(1);
  m.SetReplicaUp("b", "normal", true);
  m.ForgetReplica("a");
  std::string text = registry.RenderText();
  EXPECT_EQ(text.find("replica=\"a\""), std::string::npos) << text;
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"normal\",replica=\"b\"} 1"), std::string::npos) << text;
  // Seen again (the id registers anew): fresh series, no stale cached reference.
  m.SetReplicaUp("a", "long_tail", true);
  m.Routed("a", "weighted", "long_tail").Increment();
  text = registry.RenderText();
  EXPECT_NE(text.find("bmad_coordinator_replica_up{pool=\"long_tail\",replica=\"a\"} 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("bmad_coordinator_replica_up{pool=\"normal\",replica=\"a\"}"), std::string::npos) << text;
}

TEST(CoordinatorMetricsTest, RoutingTimeBucketsResolveMicroseconds) {
  // A pick takes about 1.5 µs (docs/benchmarks.md). With buckets from 0.1 ms every pick fell in
  // the first one, and the dashboard's quantiles read 50 and 99 µs whatever the router did.
  metrics::Registry registry;
  CoordinatorMetrics m(registry);
  for (int i = 0; i < 100; ++i) m.routing_seconds.Observe(1.5e-6);
  for (int i = 0; i < 100; ++i) m.routing_seconds.Observe(40e-6);
  const metrics::Histogram::Snapshot s = m.routing_seconds.Read();
  // Somewhere below 5 µs a bucket holds the fast half and not the slow one.
  bool separated = false;
  for (size_t i = 0; i < s.upper_bounds.size() && s.upper_bounds[i] <= 5e-6; ++i) {
    separated = separated || s.cumulative_counts[i] == 100;
  }
  EXPECT_TRUE(separated) << "first bound " << s.upper_bounds.front();
  EXPECT_GE(s.upper_bounds.back(), 1e-2);  // a pathological pick still lands in a bucket
}

}  // namespace
}  // namespace bmad::coord
