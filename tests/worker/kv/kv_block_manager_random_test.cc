// Randomized test: many sequences with overlapping prompts start (some admissions cancelled at
// once), reserve, compute, decode and free in a small pool, with CheckInvariants after every operation. The test also plays the
// memory pool: it "writes" each computed token into its KV slot, tagged with a fingerprint of the
// whole prefix up to it, so it can check that reused blocks hold exactly the new sequence's
// prefix and that no sequence ever writes into a shared block.
#include "worker/kv/kv_block_manager.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/worker/kv/unchained_hash.h"

namespace bmad::kv {
namespace {

using testing::UnchainedHash;
using Tokens = std::vector<int32_t>;

constexpr int64_t kNumBlocks = 32;
constexpr int64_t kBlockSize = 4;
constexpr size_t kMaxLiveSequences = 14;
constexpr size_t kMaxSequenceTokens = 56;

// An independent fingerprint of a token prefix (FNV-1a style), unrelated to the block hash.
uint64_t ExtendFingerprint(uint64_t fingerprint, int32_t token) {
  return (fingerprint ^ static_cast<uint32_t>(token + 1)) * 0x100000001b3ull;
}

struct SimSequence {
  Tokens tokens;
  std::vector<uint64_t> fingerprints;  // fingerprints[i]: of tokens [0, i]
  int64_t computed = 0;

  void Append(int32_t token) {
    fingerprints.push_back(
        ExtendFingerprint(fingerprints.empty() ? 0 : fingerprints.back(), token));
    tokens.push_back(token);
  }
};

// What one KV slot of the simulated memory pool holds.
struct Slot {
  bool written = false;
  int32_t token = 0;
  uint64_t fingerprint = 0;
};

struct RunCounts {
  uint64_t hits_on_free_cached = 0;  // a reused block that was free (left the free list)
  uint64_t hits_on_shared = 0;       // a reused block another live sequence holds
  uint64_t failed_reserves = 0;
  uint64_t cancelled_starts = 0;     // admissions that did not go through (CancelStart)
  uint64_t query_tokens = 0;
  uint64_t hit_tokens = 0;
};

class RandomRun {
 public:
  RandomRun(const KvBlockManagerOptions& options, uint64_t seed)
      : manager_(options), rng_(seed), pool_(static_cast<size_t>(kNumBlocks * kBlockSize)) {
    // A few shared "system prompts" over a tiny vocabulary, so prompts overlap a lot.
    for (int s = 0; s < 5; ++s) {
      Tokens stem;
      const int length = 4 + static_cast<int>(rng_() % 24);
      for (int i = 0; i < length; ++i) stem.push_back(static_cast<int32_t>(rng_() % 6));
      stems_.push_back(stem);
    }
  }

  // Runs `ops` random operations; stops at the first failure.
  void Run(int ops) {
    for (int op = 0; op < ops; ++op) {
      const uint64_t roll = rng_() % 100;
      if (roll < 22) {
        StartOne();
      } else if (roll < 70) {
        StepOne();
      } else if (roll < 88) {
        FreeOne();
      } else if (roll < 95) {
        ReserveAhead();
      } else {
        Misuse();
      }
      if (::testing::Test::HasFatalFailure()) return;
      const Status status = manager_.CheckInvariants();
      ASSERT_TRUE(status.ok()) << "after op " << op << ": " << status.ToString();
    }
  }

  // Frees everything and checks the pool is whole again.
  void Drain() {
    while (!live_.empty()) {
      ASSERT_TRUE(manager_.Free(live_.begin()->first));
      live_.erase(live_.begin());
    }
    ASSERT_TRUE(manager_.CheckInvariants().ok());
    const KvBlockManager::Stats stats = manager_.GetStats();
    EXPECT_EQ(stats.used_blocks, 0);
    EXPECT_EQ(stats.free_blocks, kNumBlocks - 1);
    EXPECT_EQ(stats.allocated_slots, 0);
    EXPECT_EQ(stats.held_tokens, 0);
    EXPECT_EQ(stats.sequences, 0);
  }

  const KvBlockManager& manager() const { return manager_; }
  const RunCounts& counts() const { return counts_; }

 private:
  size_t Below(size_t n) { return static_cast<size_t>(rng_() % n); }

  SeqId PickLive() {
    auto it = live_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(Below(live_.size())));
    return it->first;
  }

  void StartOne() {
    if (live_.size() >= kMaxLiveSequences) return;
    SimSequence sim;
    const Tokens& stem = stems_[Below(stems_.size())];
    const size_t from_stem = Below(stem.size() + 1);
    for (size_t i = 0; i < from_stem; ++i) sim.Append(stem[i]);
    const size_t tail = Below(9);  // sometimes none: the prompt may end on a block boundary
    for (size_t i = 0; i < tail; ++i) sim.Append(static_cast<int32_t>(rng_() % 3));

    const SeqId seq = next_seq_++;
    const std::vector<int32_t> refs_before = RefCountsNow();
    const Result<int64_t> reused = manager_.StartSequence(seq, sim.tokens);
    ASSERT_TRUE(reused.ok()) << reused.status().ToString();
    const int64_t n = *reused;
    const auto size = static_cast<int64_t>(sim.tokens.size());
    ASSERT_EQ(n % kBlockSize, 0);
    ASSERT_TRUE(size == 0 ? n == 0 : n < size) << "at least one token must be left to compute";
    const std::span<const BlockId> table = manager_.BlockTable(seq);
    ASSERT_EQ(static_cast<int64_t>(table.size()) * kBlockSize, n);
    for (int64_t pos = 0; pos < n; ++pos) {
      const Slot& slot = pool_[SlotIndex(table, pos)];
      ASSERT_TRUE(slot.written) << "reused slot never computed";
      ASSERT_EQ(slot.token, sim.tokens[pos]);
      ASSERT_EQ(slot.fingerprint, sim.fingerprints[pos]) << "reused KV of another prefix";
    }
    for (BlockId block : table) ASSERT_EQ(manager_.RefCount(block), refs_before[block] + 1);
    if (Below(8) == 0) {
      // An admission that found no blocks for its first chunk: everything taken back, the
      // query too.
      ASSERT_TRUE(manager_.CancelStart(seq));
      ASSERT_EQ(RefCountsNow(), refs_before);
      ++counts_.cancelled_starts;
      return;
    }
    for (BlockId block : table) {
      (refs_before[block] == 0 ? counts_.hits_on_free_cached : counts_.hits_on_shared)++;
    }
    counts_.query_tokens += sim.tokens.size();
    counts_.hit_tokens += static_cast<uint64_t>(n);
    sim.computed = n;
    live_.emplace(seq, std::move(sim));
  }

  // One engine step for one sequence: a prefill chunk, or one decode token once the prompt is done.
  void StepOne() {
    if (live_.empty()) return;
    const SeqId seq = PickLive();
    SimSequence& sim = live_.at(seq);
    if (sim.computed == static_cast<int64_t>(sim.tokens.size())) {
      if (sim.tokens.size() >= kMaxSequenceTokens) return FinishOne(seq);
      sim.Append(static_cast<int32_t>(rng_() % 6));  // the token sampled last step
    }
    const int64_t target = std::min<int64_t>(static_cast<int64_t>(sim.tokens.size()),
                                             sim.computed + 1 + static_cast<int64_t>(Below(8)));
    const std::vector<BlockId> table_before(manager_.BlockTable(seq).begin(),
                                            manager_.BlockTable(seq).end());
    const int64_t free_before = manager_.NumFreeBlocks();
    const int64_t needed = manager_.BlocksNeeded(seq, target);
    const bool can = manager_.CanReserve(seq, target);
    ASSERT_EQ(can, needed <= free_before);
    if (!manager_.Reserve(seq, target)) {
      ASSERT_FALSE(can);
      ++counts_.failed_reserves;
      // Nothing changed; the scheduler would preempt someone: here, the sequence itself.
      const std::span<const BlockId> table_after = manager_.BlockTable(seq);
      ASSERT_TRUE(std::equal(table_before.begin(), table_before.end(), table_after.begin(),
                             table_after.end()));
      ASSERT_EQ(manager_.NumFreeBlocks(), free_before);
      if (Below(2) == 0) FinishOne(seq);
      return;
    }
    ASSERT_TRUE(can);
    ASSERT_EQ(static_cast<int64_t>(manager_.BlockTable(seq).size()),
              static_cast<int64_t>(table_before.size()) + needed);
    ASSERT_GE(manager_.tokens_reserved(seq), target);
    const std::span<const BlockId> table = manager_.BlockTable(seq);
    for (int64_t pos = sim.computed; pos < target; ++pos) {
      const BlockId block = table[static_cast<size_t>(pos / kBlockSize)];
      ASSERT_EQ(manager_.RefCount(block), 1) << "writing into a shared block";
      ASSERT_FALSE(manager_.IsCached(block)) << "writing into a registered block";
      pool_[SlotIndex(table, pos)] = {true, sim.tokens[pos], sim.fingerprints[pos]};
    }
    sim.computed = target;
    manager_.MarkComputed(seq, sim.tokens, sim.computed);
    manager_.SetHeldTokens(seq, sim.computed);
  }

  // Reserves ahead of what is computed (a scheduler may reserve for a whole chunk up front).
  void ReserveAhead() {
    if (live_.empty()) return;
    const SeqId seq = PickLive();
    const int64_t target = live_.at(seq).computed + static_cast<int64_t>(Below(13));
    const bool can = manager_.CanReserve(seq, target);
    ASSERT_EQ(manager_.Reserve(seq, target), can);
  }

  void FreeOne() {
    if (live_.empty()) return;
    FinishOne(PickLive());
  }

  void FinishOne(SeqId seq) {
    ASSERT_TRUE(manager_.Free(seq));
    live_.erase(seq);
  }

  void Misuse() {
    switch (Below(3)) {
      case 0:
        ASSERT_FALSE(manager_.Free(next_seq_ + 1000));
        break;
      case 1:
        if (!live_.empty()) {
          const SeqId seq = PickLive();
          const uint64_t queries = manager_.GetStats().prefix_query_tokens;
          ASSERT_EQ(manager_.StartSequence(seq, live_.at(seq).tokens).status().code(),
                    StatusCode::kFailedPrecondition);
          ASSERT_EQ(manager_.GetStats().prefix_query_tokens, queries);
        }
        break;
      default:
        manager_.MarkComputed(next_seq_ + 1000, stems_[0], 8);
        ASSERT_FALSE(manager_.Reserve(next_seq_ + 1000, 4));
        break;
    }
  }

  size_t SlotIndex(std::span<const BlockId> table, int64_t pos) const {
    const BlockId block = table[static_cast<size_t>(pos / kBlockSize)];
    return static_cast<size_t>(block * kBlockSize + pos % kBlockSize);
  }

  std::vector<int32_t> RefCountsNow() const {
    std::vector<int32_t> refs(static_cast<size_t>(kNumBlocks));
    for (BlockId b = 0; b < kNumBlocks; ++b) refs[b] = manager_.RefCount(b);
    return refs;
  }

  KvBlockManager manager_;
  std::mt19937_64 rng_;
  std::vector<Slot> pool_;
  std::vector<Tokens> stems_;
  std::map<SeqId, SimSequence> live_;  // ordered, so picks are deterministic
  SeqId next_seq_ = 0;
  RunCounts counts_;
};

KvBlockManagerOptions PoolOptions() {
  KvBlockManagerOptions options;
  options.num_blocks = kNumBlocks;
  options.block_size = kBlockSize;
  return options;
}

TEST(KvBlockManagerRandomTest, HundredThousandOperationsKeepEveryInvariant) {
  RandomRun run(PoolOptions(), /*seed=*/20260611);
  ASSERT_NO_FATAL_FAILURE(run.Run(100'000));
  const KvBlockManager::Stats stats = run.manager().GetStats();
  const RunCounts& counts = run.counts();
  EXPECT_EQ(stats.prefix_query_tokens, counts.query_tokens);
  EXPECT_EQ(stats.prefix_hit_tokens, counts.hit_tokens);
  // The run must exercise every path it claims to test.
  EXPECT_GT(counts.hits_on_free_cached, 100u);
  EXPECT_GT(counts.hits_on_shared, 100u);
  EXPECT_GT(counts.failed_reserves, 100u);
  EXPECT_GT(counts.cancelled_starts, 100u);
  EXPECT_GT(stats.evictions, 100u);
  ASSERT_NO_FATAL_FAILURE(run.Drain());
}

// A hash with 8 values: almost every lookup and registration collides, and only the token and
// prefix checks keep reuse correct (the slot fingerprints would catch wrong KV).
BlockHash EightValuedHash(BlockHash parent, std::span<const int32_t> tokens) {
  return HashBlock(parent, tokens) & 7;
}

TEST(KvBlockManagerRandomTest, CollidingHashesNeverReuseWrongKv) {
  for (BlockHashFn hash : {&EightValuedHash, &UnchainedHash}) {
    KvBlockManagerOptions options = PoolOptions();
    options.hash_block = hash;
    RandomRun run(options, /*seed=*/7);
    ASSERT_NO_FATAL_FAILURE(run.Run(30'000));
    EXPECT_GT(run.counts().hit_tokens, 0u);
    ASSERT_NO_FATAL_FAILURE(run.Drain());
  }
}

TEST(KvBlockManagerRandomTest, WithoutPrefixCachingNothingIsReused) {
  KvBlockManagerOptions options = PoolOptions();
  options.prefix_caching = false;
  RandomRun run(options, /*seed=*/99);
  ASSERT_NO_FATAL_FAILURE(run.Run(20'000));
  EXPECT_EQ(run.counts().hit_tokens, 0u);
  EXPECT_EQ(run.manager().GetStats().evictions, 0u);
  EXPECT_EQ(run.manager().GetStats().cached_free_blocks, 0);
  ASSERT_NO_FATAL_FAILURE(run.Drain());
}

}  // namespace
}  // namespace bmad::kv
