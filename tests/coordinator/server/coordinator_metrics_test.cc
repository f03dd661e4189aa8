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

}  // namespace
}  // namespace bmad::coord
