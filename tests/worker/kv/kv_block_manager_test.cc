#include "worker/kv/kv_block_manager.h"

#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "tests/worker/kv/unchained_hash.h"

namespace bmad::kv {
namespace {

using testing::UnchainedHash;
using Tokens = std::vector<int32_t>;
using Table = std::vector<BlockId>;

// `count` consecutive token ids starting at `first`.
Tokens Iota(int32_t first, int count) {
  Tokens tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

Tokens Concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Table TableOf(const KvBlockManager& manager, SeqId seq) {
  const std::span<const BlockId> table = manager.BlockTable(seq);
  return Table(table.begin(), table.end());
}

KvBlockManagerOptions Options(int64_t num_blocks, int64_t block_size, bool prefix_caching = true) {
  KvBlockManagerOptions options;
  options.num_blocks = num_blocks;
  options.block_size = block_size;
  options.prefix_caching = prefix_caching;
  return options;
}

// Starts `seq` and computes all of `tokens`, as the engine would over one or more steps.
// Returns the reused token count.
int64_t StartAndCompute(KvBlockManager& manager, SeqId seq, const Tokens& tokens) {
  const Result<int64_t> reused = manager.StartSequence(seq, tokens);
  EXPECT_TRUE(reused.ok()) << reused.status().ToString();
  const auto size = static_cast<int64_t>(tokens.size());
  EXPECT_TRUE(manager.Reserve(seq, size));
  manager.MarkComputed(seq, tokens, size);
  manager.SetHeldTokens(seq, size);
  EXPECT_TRUE(manager.CheckInvariants().ok()) << manager.CheckInvariants().ToString();
  return reused.value_or(-1);
}

#define EXPECT_INVARIANTS(manager) \
  EXPECT_TRUE((manager).CheckInvariants().ok()) << (manager).CheckInvariants().ToString()

TEST(KvBlockManagerTest, ReusesASharedPrefixAcrossRequests) {
  KvBlockManager manager(Options(32, 4));
  const Tokens a = Iota(100, 14);  // 3 full blocks and 2 tokens
  EXPECT_EQ(StartAndCompute(manager, 1, a), 0);
  const Table table_a = TableOf(manager, 1);
  ASSERT_EQ(table_a.size(), 4u);

  // The same 3-block prefix, another tail: all 3 full blocks are reused, shared with request 1.
  const Tokens b = Concat(Tokens(a.begin(), a.begin() + 12), {7, 8, 9});
  EXPECT_EQ(manager.StartSequence(2, b).value(), 12);
  EXPECT_EQ(TableOf(manager, 2), Table(table_a.begin(), table_a.begin() + 3));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(manager.RefCount(table_a[i]), 2);
  EXPECT_EQ(manager.RefCount(table_a[3]), 1);  // the partial block stays private

  // Diverging in the second block: only the first is reused.
  Tokens c = a;
  c[5] = -1;
  EXPECT_EQ(manager.StartSequence(3, c).value(), 4);
  EXPECT_EQ(TableOf(manager, 3), Table{table_a[0]});
  // Diverging in the third block: two are reused.
  Tokens d = a;
  d[9] = -1;
  EXPECT_EQ(manager.StartSequence(4, d).value(), 8);
  EXPECT_EQ(manager.RefCount(table_a[0]), 4);
  EXPECT_EQ(manager.RefCount(table_a[1]), 3);
  EXPECT_EQ(manager.RefCount(table_a[2]), 2);
  // Nothing in common: nothing reused.
  EXPECT_EQ(manager.StartSequence(5, Iota(900, 14)).value(), 0);

  const KvBlockManager::Stats stats = manager.GetStats();
  EXPECT_EQ(stats.prefix_query_tokens, 14u + 15 + 14 + 14 + 14);
  EXPECT_EQ(stats.prefix_hit_tokens, 12u + 4 + 8);
  EXPECT_INVARIANTS(manager);
}

// vLLM's cache_salt: a chain from another root shares nothing, even with the same tokens; one
// from the same root shares as an unsalted one does.
TEST(KvBlockManagerTest, AChainFromAnotherRootSharesNoBlock) {
  KvBlockManager manager(Options(32, 4));
  const Tokens prompt = Iota(100, 13);  // 3 full blocks and 1 token
  const BlockHash tenant_a = RootBlockHash("a"), tenant_b = RootBlockHash("b");
  ASSERT_TRUE(manager.StartSequence(1, prompt, KvBlockManager::PrefixQuery::kCount, tenant_a).ok());
  ASSERT_TRUE(manager.Reserve(1, 13));
  manager.MarkComputed(1, prompt, 13);
  EXPECT_INVARIANTS(manager);
  // Without a salt, or with another: nothing reused.
  EXPECT_EQ(manager.StartSequence(2, prompt).value(), 0);
  EXPECT_EQ(manager.StartSequence(3, prompt, KvBlockManager::PrefixQuery::kCount, tenant_b).value(), 0);
  // The same salt: all 3 blocks, the very ones sequence 1 registered.
  EXPECT_EQ(manager.StartSequence(4, prompt, KvBlockManager::PrefixQuery::kCount, tenant_a).value(), 12);
  const Table first = TableOf(manager, 1);
  EXPECT_EQ(TableOf(manager, 4), Table(first.begin(), first.begin() + 3));
  // Sequence 2 (unsalted) computes the same tokens: its blocks are registered apart, and a later
  // unsalted sequence finds those, not tenant a's.
  ASSERT_TRUE(manager.Reserve(2, 13));
  manager.MarkComputed(2, prompt, 13);
  EXPECT_EQ(manager.StartSequence(5, prompt).value(), 12);
  const Table unsalted = TableOf(manager, 2);
  EXPECT_EQ(TableOf(manager, 5), Table(unsalted.begin(), unsalted.begin() + 3));
  for (int i = 0; i < 3; ++i) EXPECT_NE(unsalted[i], first[i]);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, LeavesAtLeastOneTokenToCompute) {
  KvBlockManager manager(Options(32, 4));
  const Tokens a = Iota(1, 12);  // exactly 3 full blocks
  EXPECT_EQ(StartAndCompute(manager, 1, a), 0);
  EXPECT_TRUE(manager.IsCached(TableOf(manager, 1)[2]));

  EXPECT_EQ(manager.StartSequence(2, a).value(), 8);  // the last block is recomputed
  EXPECT_EQ(manager.BlockTable(2).size(), 2u);
  EXPECT_EQ(manager.StartSequence(3, Concat(a, {50})).value(), 12);  // one token past: all 3
  EXPECT_EQ(manager.StartSequence(4, Iota(1, 4)).value(), 0);        // one exact block
  EXPECT_EQ(manager.StartSequence(5, Iota(1, 5)).value(), 4);
  EXPECT_EQ(manager.StartSequence(6, Tokens{}).value(), 0);
  EXPECT_EQ(manager.StartSequence(7, Iota(1, 11)).value(), 8);
  EXPECT_TRUE(manager.BlockTable(6).empty());
  EXPECT_EQ(manager.GetStats().prefix_query_tokens, 12u + 12 + 13 + 4 + 5 + 0 + 11);
  EXPECT_EQ(manager.GetStats().prefix_hit_tokens, 8u + 12 + 0 + 4 + 0 + 8);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, CountsReferencesOfSeveralSharersAndReusesFreeCachedBlocks) {
  KvBlockManager manager(Options(16, 4));
  const Tokens a = Iota(10, 9);  // 2 full blocks + 1 token
  StartAndCompute(manager, 1, a);
  const Table table_a = TableOf(manager, 1);
  EXPECT_EQ(manager.StartSequence(2, a).value(), 8);
  EXPECT_EQ(manager.StartSequence(3, a).value(), 8);
  EXPECT_EQ(manager.RefCount(table_a[0]), 3);
  EXPECT_EQ(manager.RefCount(table_a[1]), 3);
  EXPECT_EQ(manager.GetStats().used_blocks, 3);

  EXPECT_TRUE(manager.Free(2));
  EXPECT_EQ(manager.RefCount(table_a[0]), 2);
  EXPECT_TRUE(manager.Free(1));  // the private last block becomes free, uncached
  EXPECT_EQ(manager.RefCount(table_a[0]), 1);
  EXPECT_EQ(manager.RefCount(table_a[2]), 0);
  EXPECT_FALSE(manager.IsCached(table_a[2]));
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 0);
  EXPECT_INVARIANTS(manager);

  EXPECT_TRUE(manager.Free(3));  // the last sharer: the prefix stays cached while free
  EXPECT_EQ(manager.RefCount(table_a[0]), 0);
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 2);
  EXPECT_EQ(manager.NumFreeBlocks(), 15);
  EXPECT_EQ(manager.GetStats().used_blocks, 0);

  // A hit on free cached blocks takes them off the free list.
  EXPECT_EQ(manager.StartSequence(4, a).value(), 8);
  EXPECT_EQ(TableOf(manager, 4), Table(table_a.begin(), table_a.begin() + 2));
  EXPECT_EQ(manager.RefCount(table_a[0]), 1);
  EXPECT_EQ(manager.NumFreeBlocks(), 13);
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 0);
  EXPECT_TRUE(manager.IsCached(table_a[0]));
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, EvictsLeastRecentlyFreedCachedBlocksFirst) {
  KvBlockManager manager(Options(7, 2));  // usable blocks 1..6
  const Tokens a = {1, 2, 3, 4, 5, 6};
  const Tokens b = {11, 12, 13, 14};
  StartAndCompute(manager, 1, a);
  EXPECT_EQ(TableOf(manager, 1), (Table{1, 2, 3}));
  StartAndCompute(manager, 2, b);
  EXPECT_EQ(TableOf(manager, 2), (Table{4, 5}));
  manager.Free(1);  // last block first: LRU order 3, 2, 1
  manager.Free(2);  // then 5, 4
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 5);

  // The uncached block 6 goes first, then the least recently freed cached ones.
  ASSERT_TRUE(manager.StartSequence(3, Iota(21, 6)).ok());
  ASSERT_TRUE(manager.Reserve(3, 6));
  EXPECT_EQ(TableOf(manager, 3), (Table{6, 3, 2}));
  EXPECT_EQ(manager.GetStats().evictions, 2u);
  EXPECT_FALSE(manager.IsCached(3));
  EXPECT_FALSE(manager.IsCached(2));
  EXPECT_TRUE(manager.IsCached(1));
  EXPECT_INVARIANTS(manager);

  // Eviction dropped the hash entries: a's head survives, its tail is gone.
  EXPECT_EQ(manager.StartSequence(4, a).value(), 2);
  EXPECT_EQ(TableOf(manager, 4), (Table{1}));
  EXPECT_EQ(manager.StartSequence(5, Concat(b, {15})).value(), 4);
  EXPECT_EQ(TableOf(manager, 5), (Table{4, 5}));
  EXPECT_EQ(manager.NumFreeBlocks(), 0);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, AReusedCachedBlockMovesToTheBackOfTheLru) {
  KvBlockManager manager(Options(7, 2));
  StartAndCompute(manager, 1, {1, 2, 3, 4, 5, 6});  // blocks 1, 2, 3
  StartAndCompute(manager, 2, {11, 12, 13, 14});    // blocks 4, 5
  manager.Free(1);
  manager.Free(2);  // LRU: 3, 2, 1, 5, 4; uncached: 6

  EXPECT_EQ(StartAndCompute(manager, 3, {1, 2, 99}), 2);  // hits block 1, takes block 6
  EXPECT_EQ(TableOf(manager, 3), (Table{1, 6}));
  manager.Free(3);  // 6 goes back uncached, 1 to the back: LRU 3, 2, 5, 4, 1

  ASSERT_TRUE(manager.StartSequence(4, Iota(50, 8)).ok());
  ASSERT_TRUE(manager.Reserve(4, 8));
  EXPECT_EQ(TableOf(manager, 4), (Table{6, 3, 2, 5}));
  EXPECT_EQ(manager.GetStats().evictions, 3u);
  EXPECT_TRUE(manager.IsCached(4));
  EXPECT_TRUE(manager.IsCached(1));
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, ReserveFailsCleanlyWhenFull) {
  KvBlockManager manager(Options(5, 4));  // 4 usable blocks
  ASSERT_TRUE(manager.StartSequence(1, Iota(0, 12)).ok());
  ASSERT_TRUE(manager.Reserve(1, 12));
  ASSERT_TRUE(manager.StartSequence(2, Iota(500, 8)).ok());
  manager.SetHeldTokens(1, 12);

  const KvBlockManager::Stats before = manager.GetStats();
  EXPECT_EQ(manager.BlocksNeeded(2, 8), 2);
  EXPECT_FALSE(manager.CanReserve(2, 8));
  EXPECT_FALSE(manager.Reserve(2, 8));
  EXPECT_TRUE(manager.BlockTable(2).empty());
  EXPECT_EQ(manager.tokens_reserved(2), 0);
  const KvBlockManager::Stats after = manager.GetStats();
  EXPECT_EQ(after.used_blocks, before.used_blocks);
  EXPECT_EQ(after.free_blocks, before.free_blocks);
  EXPECT_EQ(after.allocated_slots, before.allocated_slots);
  EXPECT_EQ(after.held_tokens, before.held_tokens);
  EXPECT_EQ(after.evictions, before.evictions);
  EXPECT_EQ(manager.NumFreeBlocks(), 1);
  EXPECT_INVARIANTS(manager);

  EXPECT_TRUE(manager.CanReserve(2, 4));
  EXPECT_TRUE(manager.Reserve(2, 4));
  EXPECT_FALSE(manager.Reserve(1, 13));  // one more block, none left
  EXPECT_EQ(manager.BlockTable(1).size(), 3u);
  EXPECT_TRUE(manager.Reserve(1, 12));   // already covered
  EXPECT_TRUE(manager.Reserve(1, 0));    // tables never shrink
  EXPECT_EQ(manager.tokens_reserved(1), 12);
  EXPECT_EQ(manager.BlocksNeeded(1, 5), 0);
  EXPECT_EQ(manager.BlocksNeeded(1, 17), 2);
  EXPECT_EQ(manager.BlocksNeeded(99, 9), 3);  // unknown: what a new sequence would need
  EXPECT_FALSE(manager.CanReserve(99, 0));
  EXPECT_FALSE(manager.Reserve(99, 4));
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, CachedFreeBlocksCountAsAvailable) {
  KvBlockManager manager(Options(5, 4));
  StartAndCompute(manager, 1, Iota(0, 16));
  manager.Free(1);
  EXPECT_EQ(manager.NumFreeBlocks(), 4);
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 4);
  ASSERT_TRUE(manager.StartSequence(2, Iota(100, 16)).ok());
  EXPECT_TRUE(manager.CanReserve(2, 16));
  EXPECT_TRUE(manager.Reserve(2, 16));
  EXPECT_EQ(TableOf(manager, 2), (Table{4, 3, 2, 1}));
  EXPECT_EQ(manager.GetStats().evictions, 4u);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, ReportsStats) {
  KvBlockManager manager(Options(11, 4));  // 10 usable blocks
  const Tokens a = Iota(0, 10);
  StartAndCompute(manager, 1, a);
  KvBlockManager::Stats stats = manager.GetStats();
  EXPECT_EQ(stats.used_blocks, 3);
  EXPECT_EQ(stats.free_blocks, 7);
  EXPECT_EQ(stats.cached_free_blocks, 0);
  EXPECT_DOUBLE_EQ(stats.usage, 0.3);
  EXPECT_EQ(stats.prefix_query_tokens, 10u);
  EXPECT_EQ(stats.prefix_hit_tokens, 0u);
  EXPECT_EQ(stats.allocated_slots, 12);
  EXPECT_EQ(stats.held_tokens, 10);
  EXPECT_EQ(stats.sequences, 1);

  const Tokens b = Concat(Tokens(a.begin(), a.begin() + 8), {70, 71, 72});
  EXPECT_EQ(StartAndCompute(manager, 2, b), 8);
  stats = manager.GetStats();
  EXPECT_EQ(stats.used_blocks, 4);
  EXPECT_DOUBLE_EQ(stats.usage, 0.4);
  EXPECT_EQ(stats.prefix_query_tokens, 21u);
  EXPECT_EQ(stats.prefix_hit_tokens, 8u);
  EXPECT_EQ(stats.allocated_slots, 24);
  EXPECT_EQ(stats.held_tokens, 21);
  EXPECT_EQ(stats.allocated_slots - stats.held_tokens, 3);  // internal waste
  EXPECT_EQ(stats.sequences, 2);

  manager.SetHeldTokens(2, 1000);  // clamped to the 12 reserved slots
  EXPECT_EQ(manager.GetStats().held_tokens, 22);
  manager.SetHeldTokens(2, -5);
  EXPECT_EQ(manager.GetStats().held_tokens, 10);

  manager.Free(1);
  manager.Free(2);
  stats = manager.GetStats();
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.free_blocks, 10);
  EXPECT_EQ(stats.cached_free_blocks, 2);
  EXPECT_DOUBLE_EQ(stats.usage, 0.0);
  EXPECT_EQ(stats.allocated_slots, 0);
  EXPECT_EQ(stats.held_tokens, 0);
  EXPECT_EQ(stats.sequences, 0);

  ASSERT_TRUE(manager.StartSequence(3, Iota(500, 3)).ok());
  ASSERT_TRUE(manager.Reserve(3, 40));  // every block: both cached ones are evicted
  stats = manager.GetStats();
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_DOUBLE_EQ(stats.usage, 1.0);
  EXPECT_EQ(stats.prefix_query_tokens, 24u);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, CancelStartTakesBackThePrefixQuery) {
  KvBlockManager manager(Options(8, 4));
  const Tokens a = Iota(0, 10);
  StartAndCompute(manager, 1, a);
  manager.Free(1);
  const KvBlockManager::Stats before = manager.GetStats();
  ASSERT_EQ(manager.StartSequence(2, a).value(), 8);
  EXPECT_EQ(manager.GetStats().prefix_query_tokens, before.prefix_query_tokens + 10);
  EXPECT_TRUE(manager.CancelStart(2));
  const KvBlockManager::Stats after = manager.GetStats();
  EXPECT_EQ(after.prefix_query_tokens, before.prefix_query_tokens);
  EXPECT_EQ(after.prefix_hit_tokens, before.prefix_hit_tokens);
  EXPECT_EQ(after.cached_free_blocks, before.cached_free_blocks);  // its reused blocks still cached
  EXPECT_EQ(after.sequences, 0);
  EXPECT_FALSE(manager.CancelStart(2));
  EXPECT_INVARIANTS(manager);
}

// A preempted sequence starting again reuses its cached prefix without counting a query: its
// prompt was counted at its first start, and its generated tokens are no prompt.
TEST(KvBlockManagerTest, ARecomputeReusesThePrefixWithoutCountingAQuery) {
  KvBlockManager manager(Options(8, 4));
  const Tokens a = Iota(0, 10);
  StartAndCompute(manager, 1, a);
  manager.Free(1);
  const KvBlockManager::Stats before = manager.GetStats();
  ASSERT_EQ(manager.StartSequence(1, a, KvBlockManager::PrefixQuery::kRecompute).value(), 8);
  const KvBlockManager::Stats after = manager.GetStats();
  EXPECT_EQ(after.prefix_query_tokens, before.prefix_query_tokens);
  EXPECT_EQ(after.prefix_hit_tokens, before.prefix_hit_tokens);
  // Taken back as nothing, too.
  EXPECT_TRUE(manager.CancelStart(1));
  EXPECT_EQ(manager.GetStats().prefix_query_tokens, before.prefix_query_tokens);
  EXPECT_INVARIANTS(manager);
}

// Every block collides with every other: only the token comparison tells them apart.
BlockHash ConstantHash(BlockHash, std::span<const int32_t>) { return 42; }

TEST(KvBlockManagerTest, HashCollisionsNeverReuseOtherTokens) {
  KvBlockManagerOptions options = Options(16, 4);
  options.hash_block = &ConstantHash;
  KvBlockManager manager(options);
  const Tokens a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  StartAndCompute(manager, 1, a);
  const Table table_a = TableOf(manager, 1);
  EXPECT_TRUE(manager.IsCached(table_a[0]));
  EXPECT_FALSE(manager.IsCached(table_a[1]));  // collided with block 0's entry, which stays

  EXPECT_EQ(StartAndCompute(manager, 2, {9, 9, 9, 9, 5, 6, 7, 8, 1}), 0);
  EXPECT_EQ(manager.StartSequence(3, a).value(), 4);
  EXPECT_EQ(TableOf(manager, 3), Table{table_a[0]});
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, HashCollisionsNeverReuseAnotherPrefix) {
  KvBlockManagerOptions options = Options(16, 4);
  options.hash_block = &UnchainedHash;
  KvBlockManager manager(options);
  const Tokens x = {1, 1, 1, 1}, y = {2, 2, 2, 2}, w = {3, 3, 3, 3};
  const Tokens xy = Concat(Concat(x, y), {0});
  const Tokens wy = Concat(Concat(w, y), {0});
  StartAndCompute(manager, 1, xy);
  EXPECT_EQ(StartAndCompute(manager, 2, wy), 0);
  // Block y of sequence 2 has the same hash and tokens as that of sequence 1, but its KV was
  // computed after w, not x: it is kept out of the cache.
  EXPECT_FALSE(manager.IsCached(TableOf(manager, 2)[1]));

  EXPECT_EQ(manager.StartSequence(3, wy).value(), 4);  // w only, not sequence 1's y
  EXPECT_EQ(TableOf(manager, 3), Table{TableOf(manager, 2)[0]});
  EXPECT_EQ(manager.StartSequence(4, xy).value(), 8);
  EXPECT_EQ(TableOf(manager, 4), (Table{TableOf(manager, 1)[0], TableOf(manager, 1)[1]}));
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, PrefixCachingOffNeverRegistersOrReuses) {
  KvBlockManager manager(Options(7, 2, /*prefix_caching=*/false));
  const Tokens a = {1, 2, 3, 4, 5};
  EXPECT_EQ(StartAndCompute(manager, 1, a), 0);
  EXPECT_EQ(StartAndCompute(manager, 2, a), 0);
  for (BlockId block : TableOf(manager, 1)) EXPECT_FALSE(manager.IsCached(block));
  EXPECT_EQ(TableOf(manager, 1), (Table{1, 2, 3}));
  manager.Free(1);  // freed blocks are plain free blocks, handed out in the order freed
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 0);
  EXPECT_EQ(StartAndCompute(manager, 3, a), 0);
  EXPECT_EQ(TableOf(manager, 3), (Table{3, 2, 1}));
  const KvBlockManager::Stats stats = manager.GetStats();
  EXPECT_EQ(stats.prefix_query_tokens, 0u);
  EXPECT_EQ(stats.prefix_hit_tokens, 0u);
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, RegistersBlocksAsChunksAreComputed) {
  KvBlockManager manager(Options(16, 4));
  const Tokens a = Iota(0, 13);
  ASSERT_TRUE(manager.StartSequence(1, a).ok());
  ASSERT_TRUE(manager.Reserve(1, 6));
  manager.MarkComputed(1, a, 6);  // one full block so far
  EXPECT_TRUE(manager.IsCached(TableOf(manager, 1)[0]));
  EXPECT_FALSE(manager.IsCached(TableOf(manager, 1)[1]));
  manager.MarkComputed(1, a, 13);  // clamped to the 2 reserved blocks
  EXPECT_TRUE(manager.IsCached(TableOf(manager, 1)[1]));
  ASSERT_TRUE(manager.Reserve(1, 13));
  manager.MarkComputed(1, a, 4);  // going back changes nothing
  manager.MarkComputed(1, Tokens(a.begin(), a.begin() + 9), 100);  // clamped to the tokens
  EXPECT_FALSE(manager.IsCached(TableOf(manager, 1)[2]));
  manager.MarkComputed(1, a, 13);
  EXPECT_TRUE(manager.IsCached(TableOf(manager, 1)[2]));
  EXPECT_FALSE(manager.IsCached(TableOf(manager, 1)[3]));
  EXPECT_EQ(manager.StartSequence(2, a).value(), 12);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, ConcurrentIdenticalPromptsKeepTheFirstRegistration) {
  KvBlockManager manager(Options(16, 4));
  const Tokens a = Iota(0, 9);
  const Tokens b = Concat(Concat(Iota(0, 4), {7, 7, 7, 7}), {1});
  // Both start before either has computed anything, so neither hits.
  ASSERT_EQ(manager.StartSequence(1, a).value(), 0);
  ASSERT_EQ(manager.StartSequence(2, b).value(), 0);
  ASSERT_TRUE(manager.Reserve(1, 9));
  ASSERT_TRUE(manager.Reserve(2, 9));
  manager.MarkComputed(1, a, 9);
  manager.MarkComputed(2, b, 9);
  const Table table_a = TableOf(manager, 1), table_b = TableOf(manager, 2);
  EXPECT_FALSE(manager.IsCached(table_b[0]));  // same prefix as table_a[0], which keeps it
  EXPECT_TRUE(manager.IsCached(table_b[1]));   // chained onto table_a[0]
  EXPECT_INVARIANTS(manager);

  EXPECT_EQ(manager.StartSequence(3, b).value(), 8);
  EXPECT_EQ(TableOf(manager, 3), (Table{table_a[0], table_b[1]}));
  manager.Free(1);
  manager.Free(2);
  manager.Free(3);
  EXPECT_EQ(manager.GetStats().cached_free_blocks, 3);  // table_a[0..1], table_b[1]
  EXPECT_FALSE(manager.IsCached(table_b[0]));
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, ABlockOrphanedByItsParentsEvictionGivesWayToARecomputedPrefix) {
  KvBlockManager manager(Options(16, 4));
  const Tokens p0 = Iota(0, 4), p1 = Iota(10, 4), q2 = Iota(20, 4);
  const Tokens prefix = Concat(Concat(p0, p1), q2);
  const Tokens a = Concat(Concat(p0, p1), {1});
  const Tokens b = Concat(prefix, {2});
  // A and B start together: B's copies of p0 and p1 stay private, and its q2 is registered
  // under A's p1.
  ASSERT_EQ(manager.StartSequence(1, a).value(), 0);
  ASSERT_EQ(manager.StartSequence(2, b).value(), 0);
  ASSERT_TRUE(manager.Reserve(1, 9));
  ASSERT_TRUE(manager.Reserve(2, 13));
  manager.MarkComputed(1, a, 9);
  manager.MarkComputed(2, b, 13);
  const Table table_a = TableOf(manager, 1), table_b = TableOf(manager, 2);
  ASSERT_TRUE(manager.IsCached(table_b[2]));
  // A ends and its p1 is evicted (the least recently freed cached block) by a filler that takes
  // every uncached free block and one more.
  manager.Free(1);
  const KvBlockManager::Stats before = manager.GetStats();
  const int64_t filler_blocks = before.free_blocks - before.cached_free_blocks + 1;
  ASSERT_TRUE(manager.StartSequence(9, Iota(1000, 4)).ok());
  ASSERT_TRUE(manager.Reserve(9, filler_blocks * 4));
  manager.Free(9);
  ASSERT_FALSE(manager.IsCached(table_a[1]));
  ASSERT_TRUE(manager.IsCached(table_a[0]));
  // B's q2 is now an orphan: its parent's prefix id can never be matched again. C recomputes
  // p1 (registered anew) while B still runs and holds q2, which keeps its entry.
  EXPECT_EQ(StartAndCompute(manager, 3, Concat(prefix, {3})), 4);
  manager.Free(2);
  manager.Free(3);
  // D reuses p0 and C's p1, recomputes q2, and its q2 replaces the free orphan, so E reuses the
  // whole prefix. (Before, D's q2 was taken for a hash collision and kept private: every later
  // request recomputed q2 until memory pressure happened to evict the orphan.)
  EXPECT_EQ(StartAndCompute(manager, 4, Concat(prefix, {4})), 8);
  manager.Free(4);
  EXPECT_FALSE(manager.IsCached(table_b[2]));
  EXPECT_EQ(manager.StartSequence(5, Concat(prefix, {5})).value(), 12);
  EXPECT_INVARIANTS(manager);
  manager.Free(5);
  EXPECT_EQ(manager.GetStats().used_blocks, 0);
  EXPECT_INVARIANTS(manager);
}

// The other way round: the running sequence's own parent is the dead one (a private copy
// chained to a registered twin that was evicted since), and the registered block it meets is
// reachable. That block stays; ours chains on privately.
TEST(KvBlockManagerTest, AReachableBlockDoesNotGiveWayToOneUnderAnEvictedParent) {
  KvBlockManager manager(Options(7, 2));
  const Tokens a = {1, 2, 9};
  EXPECT_EQ(StartAndCompute(manager, 1, a), 0);  // registers [1 2]
  Tokens b = {1, 2};
  ASSERT_EQ(manager.StartSequence(2, b).value(), 0);  // all of a 2-token prompt: [1 2] recomputed
  ASSERT_TRUE(manager.Reserve(2, 3));
  manager.MarkComputed(2, b, 2);  // private, chained to A's [1 2]
  manager.Free(1);
  // A filler takes every free block: A's [1 2] is evicted.
  ASSERT_TRUE(manager.StartSequence(3, Iota(50, 8)).ok());
  ASSERT_TRUE(manager.Reserve(3, 8));
  manager.Free(3);
  // D registers [1 2] and [5 6] under it, and ends.
  const Tokens d = {1, 2, 5, 6, 7};
  EXPECT_EQ(StartAndCompute(manager, 4, d), 0);
  manager.Free(4);
  // B computes its own [5 6] under the evicted parent: D's stays cached.
  b.insert(b.end(), {5, 6});
  ASSERT_TRUE(manager.Reserve(2, 4));
  manager.MarkComputed(2, b, 4);
  EXPECT_INVARIANTS(manager);
  EXPECT_EQ(manager.StartSequence(5, d).value(), 4);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, MisuseIsRejectedWithoutChangingState) {
  KvBlockManager manager(Options(8, 4));
  const Tokens a = Iota(0, 9);
  StartAndCompute(manager, 1, a);
  const Table table = TableOf(manager, 1);
  const KvBlockManager::Stats before = manager.GetStats();

  const Result<int64_t> again = manager.StartSequence(1, a);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(TableOf(manager, 1), table);
  EXPECT_EQ(manager.GetStats().prefix_query_tokens, before.prefix_query_tokens);
  EXPECT_EQ(manager.GetStats().held_tokens, before.held_tokens);

  EXPECT_FALSE(manager.Free(77));
  EXPECT_TRUE(manager.BlockTable(77).empty());
  EXPECT_EQ(manager.tokens_reserved(77), 0);
  manager.MarkComputed(77, a, 9);
  manager.SetHeldTokens(77, 9);
  EXPECT_EQ(manager.RefCount(-1), 0);
  EXPECT_EQ(manager.RefCount(8), 0);
  EXPECT_EQ(manager.RefCount(kNullBlockId), 0);
  EXPECT_FALSE(manager.IsCached(100));
  EXPECT_INVARIANTS(manager);

  EXPECT_TRUE(manager.Free(1));
  EXPECT_FALSE(manager.Free(1));  // twice: a no-op
  EXPECT_EQ(manager.NumFreeBlocks(), 7);
  EXPECT_INVARIANTS(manager);
}

TEST(KvBlockManagerTest, ClampsInvalidOptions) {
  EXPECT_TRUE(ValidateKvBlockManagerOptions(Options(2, 1)).ok());
  EXPECT_EQ(ValidateKvBlockManagerOptions(Options(1, 16)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateKvBlockManagerOptions(Options(int64_t{1} << 40, 16)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateKvBlockManagerOptions(Options(8, 0)).code(), StatusCode::kInvalidArgument);

  KvBlockManager manager(Options(0, 0));  // clamped to 2 blocks of 1 slot
  EXPECT_EQ(manager.NumUsableBlocks(), 1);
  EXPECT_EQ(manager.block_size(), 1);
  ASSERT_TRUE(manager.StartSequence(1, Tokens{5}).ok());
  EXPECT_TRUE(manager.Reserve(1, 1));
  EXPECT_EQ(TableOf(manager, 1), Table{1});
  EXPECT_FALSE(manager.Reserve(1, 2));
  EXPECT_INVARIANTS(manager);
}

}  // namespace
}  // namespace bmad::kv
