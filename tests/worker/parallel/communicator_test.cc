// The Communicator base: argument checks, the unusable-after-failure rule, the abort flag and
// metrics, through a fake transport (no MPI).
#include "worker/parallel/communicator.h"

#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/parallel/abort_flag.h"

namespace bmad::parallel {
namespace {

using ::testing::HasSubstr;

// Records the calls that reach the transport; each returns `next_result` (OK by default).
class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(int rank, int size) : Communicator(rank, size, "fake group") {}

  Status next_result;
  std::vector<std::string> calls;
  std::chrono::milliseconds last_timeout{-1};

 protected:
  Status Record(const char* what, const Call& call) {
    calls.push_back(what);
    last_timeout = call.deadline.timeout;
    return next_result;
  }
  Status DoAllReduceSum(float*, size_t, const Call& call) override {
    return Record("all_reduce", call);
  }
  Status DoAllGather(const void*, size_t, void*, const Call& call) override {
    return Record("all_gather", call);
  }
  Status DoBroadcast(void*, size_t, int, const Call& call) override {
    return Record("broadcast", call);
  }
  Status DoBroadcastString(std::string*, int, const Call& call) override {
    return Record("broadcast_string", call);
  }
  Status DoSend(const void*, size_t, int, int, const Call& call) override {
    return Record("send", call);
  }
  Status DoRecv(void*, size_t, int, int, const Call& call) override {
    return Record("recv", call);
  }
  Status DoBarrier(const Call& call) override {
    if (next_result.code() == StatusCode::kDeadlineExceeded) return TimedOut(call);
    if (next_result.code() == StatusCode::kCancelled) return Aborted(call);
    return Record("barrier", call);
  }
  int max_tag() const override { return 100; }
};

class CommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearAbortRequest(); }
  void TearDown() override { ClearAbortRequest(); }
  FakeCommunicator comm_{1, 4};
  float floats_[4] = {};
  char bytes_[64] = {};
};

TEST_F(CommunicatorTest, PassesGoodCallsThroughWithTheTimeout) {
  comm_.set_timeout(std::chrono::milliseconds(1234));
  std::string text = "plan";
  EXPECT_TRUE(comm_.AllReduceSum(floats_, 4).ok());
  EXPECT_TRUE(comm_.AllGather(bytes_, 16, bytes_).ok());
  EXPECT_TRUE(comm_.Broadcast(bytes_, 8, 3).ok());
  EXPECT_TRUE(comm_.BroadcastString(&text, 0).ok());
  EXPECT_TRUE(comm_.Send(bytes_, 8, 0, 100).ok());
  EXPECT_TRUE(comm_.Recv(bytes_, 8, 2, 0).ok());
  EXPECT_TRUE(comm_.Barrier().ok());
  EXPECT_THAT(comm_.calls, ::testing::ElementsAre("all_reduce", "all_gather", "broadcast",
                                                  "broadcast_string", "send", "recv", "barrier"));
  EXPECT_EQ(comm_.last_timeout, std::chrono::milliseconds(1234));
  EXPECT_TRUE(comm_.failure().ok());
}

TEST_F(CommunicatorTest, BadArgumentsNeverReachTheTransportAndDoNotBreakIt) {
  std::string text;
  const std::vector<Status> results = {
      comm_.Broadcast(bytes_, 8, 4),        // root == size
      comm_.Broadcast(bytes_, 8, -1),       // negative root
      comm_.BroadcastString(nullptr, 0),    // no string
      comm_.BroadcastString(&text, 7),      // root out of range
      comm_.Send(bytes_, 8, 9, 0),          // destination out of range
      comm_.Recv(bytes_, 8, 0, 101),        // tag above max_tag
      comm_.Send(bytes_, 8, 0, -2),         // negative tag
      comm_.AllReduceSum(nullptr, 3),       // null data
      comm_.AllGather(bytes_, 4, nullptr),  // null recv
  };
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("fake group"));
  }
  EXPECT_THAT(results[0].message(), HasSubstr("root 4 is not a rank"));
  EXPECT_THAT(results[5].message(), HasSubstr("tag must be in [0, 100]"));
  EXPECT_TRUE(comm_.calls.empty());
  EXPECT_TRUE(comm_.failure().ok());
  EXPECT_TRUE(comm_.Barrier().ok());
  // Zero-sized calls with null buffers are fine.
  EXPECT_TRUE(comm_.AllReduceSum(nullptr, 0).ok());
}

TEST_F(CommunicatorTest, ATimeoutNamesTheOperationPeersAndTimeoutAndBreaksTheCommunicator) {
  comm_.set_timeout(std::chrono::milliseconds(250));
  comm_.next_result = DeadlineExceeded("");
  const Status s = comm_.Barrier();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("barrier on fake group [rank 1 of 4] with all 4 ranks"));
  EXPECT_THAT(s.message(), HasSubstr("did not complete within 250 ms"));
  EXPECT_EQ(comm_.failure(), s);

  comm_.next_result = Status::Ok();
  const Status later = comm_.Send(bytes_, 8, 2, 5);
  EXPECT_EQ(later.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(later.message(), HasSubstr("send of 8 bytes on fake group [rank 1 of 4] to rank 2"));
  EXPECT_THAT(later.message(), HasSubstr("unusable after an earlier failure"));
  EXPECT_THAT(later.message(), HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_TRUE(comm_.calls.empty());
}

TEST_F(CommunicatorTest, TransportErrorsBreakItButUnimplementedDoesNot) {
  comm_.next_result = Unimplemented("no strings here");
  std::string text;
  EXPECT_EQ(comm_.BroadcastString(&text, 0).code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(comm_.failure().ok());
  comm_.next_result = Unavailable("peer gone");
  EXPECT_EQ(comm_.Recv(bytes_, 4, 0, 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(comm_.failure().code(), StatusCode::kUnavailable);
}

TEST_F(CommunicatorTest, TheAbortFlagRefusesNewCallsWithoutBreakingTheCommunicator) {
  RequestAbort();
  const Status s = comm_.AllReduceSum(floats_, 4);
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("abort requested"));
  EXPECT_TRUE(comm_.calls.empty());
  EXPECT_TRUE(comm_.failure().ok());
  ClearAbortRequest();
  EXPECT_TRUE(comm_.AllReduceSum(floats_, 4).ok());
}

TEST_F(CommunicatorTest, AnAbortedWaitBreaksIt) {
  comm_.next_result = Cancelled("");
  const Status s = comm_.Barrier();
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("abandoned"));
  EXPECT_EQ(comm_.failure().code(), StatusCode::kCancelled);
}

TEST_F(CommunicatorTest, RecordsEachCallInTheHistogramOfItsOperation) {
  metrics::Registry registry;
  comm_.set_metrics(&registry);
  std::string text = "x";
  ASSERT_TRUE(comm_.AllReduceSum(floats_, 4).ok());
  ASSERT_TRUE(comm_.AllReduceSum(floats_, 4).ok());
  ASSERT_TRUE(comm_.BroadcastString(&text, 1).ok());
  ASSERT_TRUE(comm_.Recv(bytes_, 8, 0, 0).ok());
  EXPECT_EQ(comm_.Broadcast(bytes_, 8, 99).code(), StatusCode::kInvalidArgument);  // not timed

  auto count = [&](const char* op) {
    return registry
        .GetHistogram("bmad_comm_seconds", "", CommSecondsBuckets(), {{"op", op}})
        .Read()
        .count;
  };
  EXPECT_EQ(count("all_reduce"), 2u);
  EXPECT_EQ(count("broadcast"), 1u);
  EXPECT_EQ(count("recv"), 1u);
  EXPECT_EQ(count("send"), 0u);
  EXPECT_EQ(count("all_gather"), 0u);
  EXPECT_EQ(count("barrier"), 0u);
  const std::string text_format = registry.RenderText();
  EXPECT_THAT(text_format, HasSubstr("bmad_comm_seconds_count{op=\"all_reduce\"} 2"));
  EXPECT_THAT(text_format, HasSubstr("bmad_comm_seconds_bucket{op=\"barrier\",le=\"1e-05\"} 0"));
}

TEST(CommOpNameTest, NamesEveryOperation) {
  EXPECT_EQ(CommOpName(CommOp::kAllReduce), "all_reduce");
  EXPECT_EQ(CommOpName(CommOp::kAllGather), "all_gather");
  EXPECT_EQ(CommOpName(CommOp::kBroadcast), "broadcast");
  EXPECT_EQ(CommOpName(CommOp::kSend), "send");
  EXPECT_EQ(CommOpName(CommOp::kRecv), "recv");
  EXPECT_EQ(CommOpName(CommOp::kBarrier), "barrier");
}

}  // namespace
}  // namespace bmad::parallel
