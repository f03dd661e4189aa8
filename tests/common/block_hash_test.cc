#include "common/block_hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace bmad {
namespace {

TEST(BlockHashTest, ChainsPrefixes) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 0, 8, 9};
  const auto ha = HashFullBlocks(a, 4), hb = HashFullBlocks(b, 4);
  ASSERT_EQ(ha.size(), 2u);  // the trailing partial block has no hash
  EXPECT_EQ(ha[0], hb[0]);   // same first block
  EXPECT_NE(ha[1], hb[1]);   // second block differs
  EXPECT_EQ(ha[1], HashBlock(ha[0], std::span(a).subspan(4, 4)));
  // The same block after a different prefix hashes differently.
  EXPECT_NE(HashBlock(1, std::span(a).subspan(0, 4)), HashBlock(2, std::span(a).subspan(0, 4)));
}

TEST(BlockHashTest, StableAcrossBuildsAndProcesses) {
  // Pinned values: the coordinator and workers must agree, so the function may never drift.
  const std::vector<int32_t> t = {1, 403, 407, 261};
  EXPECT_EQ(HashBlock(kRootBlockHash, t), 7231339981796022416ull);
  const std::vector<int32_t> u = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(HashFullBlocks(u, 4), (std::vector<BlockHash>{870988258810154688ull,
                                                          10485953746519333748ull}));
  EXPECT_EQ(HashFullBlocks(t, 4)[0], HashBlock(kRootBlockHash, t));
  EXPECT_EQ(HashFullBlocks(t, 0).size(), 0u);
}

TEST(BlockHashTest, ASaltStartsAChainOfItsOwn) {
  const std::vector<int32_t> u = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(RootBlockHash(""), kRootBlockHash);
  EXPECT_EQ(HashFullBlocks(u, 4, RootBlockHash("")), HashFullBlocks(u, 4));
  const BlockHash a = RootBlockHash("tenant-a");
  EXPECT_EQ(a, RootBlockHash("tenant-a"));  // the same salt, the same chain (coordinator and workers)
  EXPECT_NE(a, kRootBlockHash);
  EXPECT_NE(a, RootBlockHash("tenant-b"));
  const auto salted = HashFullBlocks(u, 4, a);
  ASSERT_EQ(salted.size(), 2u);
  EXPECT_EQ(salted[0], HashBlock(a, std::span(u).first(4)));
  for (const BlockHash h : HashFullBlocks(u, 4)) EXPECT_EQ(std::count(salted.begin(), salted.end(), h), 0);
  // Pinned, as the block hash: both sides of the protocol must agree.
  EXPECT_EQ(RootBlockHash("tenant-a"), 5998893333972542704ull);
  std::set<BlockHash> roots;
  for (int i = 0; i < 20000; ++i) roots.insert(RootBlockHash("salt" + std::to_string(i)));
  roots.insert(RootBlockHash(std::string(1, '\0')));
  roots.insert(RootBlockHash(std::string(2, '\0')));
  EXPECT_EQ(roots.size(), 20002u);
  EXPECT_EQ(roots.count(kRootBlockHash), 0u);
}

TEST(BlockHashTest, FewCollisionsOnSimilarBlocks) {
  std::set<BlockHash> seen;
  for (int32_t i = 0; i < 20000; ++i) {
    const std::vector<int32_t> block = {i, i + 1, 0, 0};
    seen.insert(HashBlock(kRootBlockHash, block));
  }
  EXPECT_EQ(seen.size(), 20000u);
}

}  // namespace
}  // namespace bmad
