#include "coordinator/client/cluster_status_format.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>

namespace bmad::client {
namespace {

proto::ClusterStatus TwoLiveOneDead() {
  proto::ClusterStatus s;
  s.model_name = "tiny-llama";
  s.queued = 3;
  s.in_flight = 9;
  s.requests_total = 1234;
  auto replica = [](std::string id, bool live, uint32_t running, float kv, uint32_t kv_blocks,
                    float util) {
    proto::ReplicaInfo r;
    r.replica_id = std::move(id);
    r.live = live;
    r.tp = 2;
    r.pp = 1;
    r.load.running = running;
    r.load.waiting = 1;
    r.load.kv_usage = kv;
    r.load.kv_total_blocks = kv_blocks;
    r.load.utilization = util;
    r.in_flight = running;
    r.routed_total = 100;
    return r;
  };
  s.replicas.push_back(replica("r0", true, 4, 0.5f, 100, 0.8f));
  s.replicas.push_back(replica("r1-long", true, 2, 1.0f, 300, 0.4f));
  s.replicas.back().pool = ReplicaPool::kLongTail;
  s.replicas.push_back(replica("r2", false, 7, 0.9f, 100, 0.9f));
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  return lines;
}

TEST(ClusterStatusFormatTest, TableHasARowPerReplicaAndTotalsOverLiveOnes) {
  const std::string table = FormatClusterStatusTable(TwoLiveOneDead());
  const auto lines = Lines(table);
  ASSERT_EQ(lines.size(), 6u) << table;
  EXPECT_NE(lines[0].find("tiny-llama"), std::string::npos);
  EXPECT_NE(lines[0].find("3 replicas (2 live)"), std::string::npos);
  EXPECT_NE(lines[0].find("3 queued"), std::string::npos);
  EXPECT_EQ(lines[1].rfind("REPLICA", 0), 0u);
  EXPECT_NE(lines[2].find("normal"), std::string::npos);
  EXPECT_NE(lines[2].find("2x1"), std::string::npos);
  EXPECT_NE(lines[3].find("long_tail"), std::string::npos);
  EXPECT_NE(lines[4].find(" no "), std::string::npos);
  // The dead replica's last load report is stale: running, waiting, KV and utilization unknown.
  EXPECT_TRUE(std::regex_search(lines[4], std::regex(R"(no +2x1 +- +- +- +- +7 +100$)"))) << table;
  EXPECT_EQ(lines[4].find("90.0"), std::string::npos) << table;
  // Totals: running 4+2 (the dead replica's 7 is stale), KV weighted by blocks:
  // (0.5*100 + 1.0*300) / 400 = 87.5%, utilization mean (0.8+0.4)/2 = 60%, in flight 4+2+7,
  // routed 300.
  const std::string& total = lines[5];
  EXPECT_EQ(total.rfind("total", 0), 0u);
  EXPECT_NE(total.find("2/3"), std::string::npos);
  EXPECT_NE(total.find(" 6 "), std::string::npos) << total;
  EXPECT_NE(total.find("87.5"), std::string::npos) << total;
  EXPECT_NE(total.find("60.0"), std::string::npos) << total;
  EXPECT_NE(total.find(" 13 "), std::string::npos) << total;
  EXPECT_NE(total.find("300"), std::string::npos) << total;
  // Columns line up: every row is as wide as the header up to the last column.
  EXPECT_EQ(lines[1].find("ROUTED") + 6, lines[2].size());
}

TEST(ClusterStatusFormatTest, EmptyClusterStillPrints) {
  const std::string table = FormatClusterStatusTable({});
  EXPECT_NE(table.find("0 replicas (0 live)"), std::string::npos);
  proto::ClusterStatus one;
  one.replicas.emplace_back();
  EXPECT_NE(FormatClusterStatusTable(one).find(": 1 replica (0 live)"), std::string::npos);
  EXPECT_NE(table.find("total"), std::string::npos);
}

TEST(ClusterStatusFormatTest, JsonCarriesEveryField) {
  proto::ClusterStatus s = TwoLiveOneDead();
  s.replicas[0].model_name = std::string("bad utf8 \xff");
  const auto j = nlohmann::json::parse(ClusterStatusJson(s));
  EXPECT_EQ(j["model_name"], "tiny-llama");
  EXPECT_EQ(j["queued"], 3);
  EXPECT_EQ(j["requests_total"], 1234);
  ASSERT_EQ(j["replicas"].size(), 3u);
  EXPECT_EQ(j["replicas"][1]["pool"], "long_tail");
  EXPECT_EQ(j["replicas"][0]["load"]["running"], 4);
  EXPECT_EQ(j["replicas"][0]["load"]["kv_total_blocks"], 100);
  EXPECT_EQ(j["replicas"][2]["live"], false);
  EXPECT_FLOAT_EQ(j["replicas"][1]["load"]["kv_usage"].get<float>(), 1.0f);
}

}  // namespace
}  // namespace bmad::client
