#include "worker/kv/block_list.h"

#include <vector>

#include <gtest/gtest.h>

namespace bmad::kv {
namespace {

using ::std::vector;

TEST(BlockListTest, PushPopInOrder) {
  BlockList list(8);
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.PopFront(), std::nullopt);
  EXPECT_EQ(list.Front(), std::nullopt);
  for (BlockId id : {3, 1, 7, 0}) EXPECT_TRUE(list.PushBack(id));
  EXPECT_EQ(list.size(), 4);
  EXPECT_EQ(list.ToVector(), (vector<BlockId>{3, 1, 7, 0}));
  EXPECT_EQ(list.Front(), 3);
  EXPECT_EQ(list.PopFront(), 3);
  EXPECT_EQ(list.PopFront(), 1);
  EXPECT_EQ(list.ToVector(), (vector<BlockId>{7, 0}));
  EXPECT_TRUE(list.CheckInvariants().ok());
}

TEST(BlockListTest, RemovesFromHeadMiddleAndTail) {
  BlockList list(10);
  for (BlockId id = 1; id <= 5; ++id) list.PushBack(id);
  EXPECT_TRUE(list.Remove(3));  // middle
  EXPECT_EQ(list.ToVector(), (vector<BlockId>{1, 2, 4, 5}));
  EXPECT_TRUE(list.Remove(1));  // head
  EXPECT_TRUE(list.Remove(5));  // tail
  EXPECT_EQ(list.ToVector(), (vector<BlockId>{2, 4}));
  EXPECT_TRUE(list.PushBack(5));
  EXPECT_TRUE(list.PushBack(3));
  EXPECT_EQ(list.ToVector(), (vector<BlockId>{2, 4, 5, 3}));
  EXPECT_TRUE(list.Remove(2));
  EXPECT_TRUE(list.Remove(4));
  EXPECT_TRUE(list.Remove(5));
  EXPECT_TRUE(list.Remove(3));
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(list.Front(), std::nullopt);
  EXPECT_TRUE(list.CheckInvariants().ok());
}

TEST(BlockListTest, MisuseChangesNothing) {
  BlockList list(4);
  EXPECT_TRUE(list.PushBack(2));
  EXPECT_FALSE(list.PushBack(2));   // already a member
  EXPECT_FALSE(list.PushBack(4));   // out of range
  EXPECT_FALSE(list.PushBack(-1));  // out of range
  EXPECT_FALSE(list.Remove(1));     // not a member
  EXPECT_FALSE(list.Remove(99));
  EXPECT_FALSE(list.Contains(-5));
  EXPECT_TRUE(list.Contains(2));
  EXPECT_EQ(list.ToVector(), (vector<BlockId>{2}));
  EXPECT_TRUE(list.CheckInvariants().ok());

  BlockList empty(-3);  // a negative capacity holds nothing
  EXPECT_FALSE(empty.PushBack(0));
  EXPECT_TRUE(empty.CheckInvariants().ok());
}

}  // namespace
}  // namespace bmad::kv
