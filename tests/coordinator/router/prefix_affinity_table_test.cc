#include "coordinator/router/prefix_affinity_table.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace bmad::coord {
namespace {

std::vector<BlockHash> Hashes(std::initializer_list<BlockHash> values) { return values; }

TEST(PrefixAffinityTableTest, TheLatestRecordOwnsEachHash) {
  PrefixAffinityTable table(16);
  EXPECT_FALSE(table.Owner(1).has_value());
  table.Record(Hashes({1, 2, 3}), "a");
  table.Record(Hashes({1, 2}), "b");
  EXPECT_EQ(table.Owner(1), "b");
  EXPECT_EQ(table.Owner(2), "b");
  EXPECT_EQ(table.Owner(3), "a");
  EXPECT_FALSE(table.Owner(4).has_value());
  EXPECT_EQ(table.size(), 3u);
  table.Record({}, "c");  // nothing to record
  EXPECT_EQ(table.size(), 3u);
}

TEST(PrefixAffinityTableTest, EvictsLeastRecentAndKeepsAPrefixsHead) {
  PrefixAffinityTable table(4);
  table.Record(Hashes({10, 11, 12, 13, 14, 15}), "a");
  EXPECT_EQ(table.size(), 4u);
  // Recorded deepest first: the shallow hashes are the most recent and survive.
  for (BlockHash h : {10, 11, 12, 13}) EXPECT_EQ(table.Owner(h), "a") << h;
  EXPECT_FALSE(table.Owner(14).has_value());
  EXPECT_FALSE(table.Owner(15).has_value());

  table.Record(Hashes({13}), "b");  // touch 13: now 12 is the oldest
  table.Record(Hashes({20}), "c");
  EXPECT_FALSE(table.Owner(12).has_value());
  EXPECT_EQ(table.Owner(13), "b");
  EXPECT_EQ(table.Owner(20), "c");
  EXPECT_EQ(table.size(), 4u);
}

TEST(PrefixAffinityTableTest, ForgetDropsOnlyThatReplicasEntries) {
  PrefixAffinityTable table(16);
  table.Record(Hashes({1, 2}), "a");
  table.Record(Hashes({3}), "b");
  table.Forget("a");
  table.Forget("never-seen");
  EXPECT_FALSE(table.Owner(1).has_value());
  EXPECT_FALSE(table.Owner(2).has_value());
  EXPECT_EQ(table.Owner(3), "b");
  table.Record(Hashes({2}), "a");  // a restarted and was sent this prefix again
  EXPECT_EQ(table.Owner(2), "a");
  EXPECT_FALSE(table.Owner(1).has_value());
}

TEST(PrefixAffinityTableTest, ARetiredIdsSlotGoesToTheNextNewIdWithoutItsEntries) {
  // The coordinator gives a long-dead replica's registry slot to a new id; the table kept one
  // owner slot per id ever seen, so ids coming and going grew it without bound.
  PrefixAffinityTable table(16);
  table.Record(Hashes({1, 2}), "a");
  table.Record(Hashes({3}), "b");
  table.Retire("a");
  table.Retire("never-seen");
  EXPECT_FALSE(table.Owner(1).has_value());
  EXPECT_EQ(table.Owner(3), "b");
  table.Record(Hashes({4}), "c");  // takes a's slot
  EXPECT_EQ(table.owner_slots(), 2u);
  EXPECT_EQ(table.Owner(4), "c");
  EXPECT_FALSE(table.Owner(1).has_value()) << "a's entries must not pass to c";
  EXPECT_FALSE(table.Owner(2).has_value());
  for (int i = 0; i < 10000; ++i) {
    const std::string id = std::to_string(i) + "r";
    table.Record(Hashes({static_cast<BlockHash>(100 + i)}), id);
    table.Retire(id);
  }
  EXPECT_EQ(table.owner_slots(), 3u);  // a's (now c's), b's, and the one every r<i> took in turn
}

TEST(PrefixAffinityTableTest, DisownDropsOnlyThatReplicasOwnershipOfThoseHashes) {
  PrefixAffinityTable table(16);
  table.Record(Hashes({1, 2, 3}), "a");
  table.Record(Hashes({4}), "b");
  table.Disown(Hashes({1, 2, 4}), "a");
  EXPECT_FALSE(table.Owner(1).has_value());
  EXPECT_FALSE(table.Owner(2).has_value());
  EXPECT_EQ(table.Owner(3), "a");  // not named
  EXPECT_EQ(table.Owner(4), "b");  // not a's
  table.Disown(Hashes({3}), "nobody");  // an unknown id: nothing
  EXPECT_EQ(table.Owner(3), "a");
  // A disowned entry is owned again by the next record, and evicted like any other.
  table.Record(Hashes({1}), "c");
  EXPECT_EQ(table.Owner(1), "c");
  EXPECT_EQ(table.size(), 4u);
}

TEST(PrefixAffinityTableTest, StaysBoundedAndConsistentUnderChurn) {
  PrefixAffinityTable table(64);
  std::mt19937_64 rng(7);
  const std::string replicas[] = {"r0", "r1", "r2", "r3"};
  std::vector<BlockHash> hashes;
  for (int i = 0; i < 5000; ++i) {
    hashes.resize(1 + rng() % 40);
    for (BlockHash& h : hashes) h = rng() % 200;  // repeats within and across requests
    const std::string& replica = replicas[rng() % 4];
    if (rng() % 50 == 0) table.Forget(replicas[rng() % 4]);
    if (rng() % 20 == 0) table.Disown(hashes, replicas[rng() % 4]);  // the previous request's
    table.Record(hashes, replica);
    ASSERT_LE(table.size(), 64u);
    // The first hash was recorded last, so it is present and owned by `replica`.
    ASSERT_EQ(table.Owner(hashes.front()), replica);
  }
}

TEST(PrefixAffinityTableTest, CapacityZeroIsTakenAsOne) {
  PrefixAffinityTable table(0);
  EXPECT_EQ(table.capacity(), 1u);
  table.Record(Hashes({1, 2, 3}), "a");
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Owner(1), "a");
}

}  // namespace
}  // namespace bmad::coord
