// MpiCommunicator and the replica groups under a real mpirun (2 and 4 ranks) and alone (1).
// Each test makes its own duplicate of the world, so a test that breaks its communicator on
// purpose (the failure tests, last) cannot disturb another.
#include "worker/parallel/mpi_communicator.h"

#include <signal.h>
#include <sys/time.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "worker/parallel/abort_flag.h"
#include "worker/parallel/mpi_error.h"
#include "worker/parallel/mpi_session.h"
#include "worker/parallel/replica_communicators.h"
#include "worker/parallel/topology.h"

namespace bmad::parallel {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kTimeout{20'000};
// How late a timed-out or aborted call may return on 2 shared cores.
constexpr milliseconds kLateness{3'000};

std::unique_ptr<MpiCommunicator> MakeWorld(milliseconds timeout = kTimeout) {
  auto world = MpiCommunicator::World(timeout);
  EXPECT_TRUE(world.ok()) << world.status().ToString();
  return world.ok() ? std::move(*world) : nullptr;
}

class MpiCommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClearAbortRequest();
    world_ = MakeWorld();
    ASSERT_NE(world_, nullptr);
    rank_ = world_->rank();
    size_ = world_->size();
  }

  std::unique_ptr<MpiCommunicator> world_;
  int rank_ = 0;
  int size_ = 1;
};

TEST_F(MpiCommTest, WorldMatchesMpi) {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world_->rank(), rank);
  EXPECT_EQ(world_->size(), size);
  EXPECT_EQ(world_->name(), "world");
  EXPECT_EQ(world_->timeout(), kTimeout);
  EXPECT_NE(world_->comm(), MPI_COMM_WORLD) << "a duplicate, not the world itself";
}

TEST_F(MpiCommTest, AllReduceSumsEveryRanksValues) {
  for (size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{33}, size_t{1001},
                       size_t{4097}, size_t{65537}, (size_t{1} << 20) + 3}) {
    SCOPED_TRACE(count);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank_ + 1) * (i % 17));
    ASSERT_TRUE(world_->AllReduceSum(data.data(), count).ok());
    const float ranks_sum = static_cast<float>(size_ * (size_ + 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      if (data[i] != ranks_sum * static_cast<float>(i % 17)) ++wrong;
    }
    EXPECT_EQ(wrong, 0u);
  }
}

TEST_F(MpiCommTest, AllGatherIsRankMajor) {
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{17}, size_t{1000}, size_t{65537}}) {
    SCOPED_TRACE(bytes);
    auto expected_byte = [](int rank, size_t j) {
      return static_cast<unsigned char>((rank * 31 + static_cast<int>(j)) & 0xff);
    };
    std::vector<unsigned char> mine(bytes);
    for (size_t j = 0; j < bytes; ++j) mine[j] = expected_byte(rank_, j);
    std::vector<unsigned char> all(bytes * static_cast<size_t>(size_), 0);
    ASSERT_TRUE(world_->AllGather(mine.data(), bytes, all.data()).ok());
    // In place: this rank's contribution already sits in its own slot.
    std::vector<unsigned char> in_place(all.size(), 0);
    std::memcpy(in_place.data() + static_cast<size_t>(rank_) * bytes, mine.data(), bytes);
    ASSERT_TRUE(world_->AllGather(in_place.data() + static_cast<size_t>(rank_) * bytes, bytes,
                                  in_place.data())
                    .ok());
    for (int r = 0; r < size_; ++r) {
      for (size_t j = 0; j < bytes; ++j) {
        ASSERT_EQ(all[static_cast<size_t>(r) * bytes + j], expected_byte(r, j)) << r << " " << j;
        ASSERT_EQ(in_place[static_cast<size_t>(r) * bytes + j], expected_byte(r, j));
      }
    }
  }
}

TEST_F(MpiCommTest, BroadcastsBytesFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{4096}, size_t{300001}}) {
      SCOPED_TRACE(::testing::Message() << "root " << root << " bytes " << bytes);
      std::vector<unsigned char> data(bytes, 0xee);
      if (rank_ == root) {
        for (size_t j = 0; j < bytes; ++j) data[j] = static_cast<unsigned char>(j * 7 + root);
      }
      ASSERT_TRUE(world_->Broadcast(data.data(), bytes, root).ok());
      for (size_t j = 0; j < bytes; ++j) {
        ASSERT_EQ(data[j], static_cast<unsigned char>(j * 7 + root)) << j;
      }
    }
  }
}

TEST_F(MpiCommTest, BroadcastsStringsFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    std::string big(100'000 + static_cast<size_t>(root), 'x');
    big[5] = '\0';  // embedded NULs survive
    big.back() = static_cast<char>('a' + root);
    const std::vector<std::string> payloads = {"", "step plan from rank " + std::to_string(root),
                                               big};
    for (const std::string& payload : payloads) {
      SCOPED_TRACE(::testing::Message() << "root " << root << " size " << payload.size());
      std::string data = rank_ == root ? payload : std::string(7000, '?');
      ASSERT_TRUE(world_->BroadcastString(&data, root).ok());
      EXPECT_EQ(data, payload);
    }
  }
}

TEST_F(MpiCommTest, SendsAroundARing) {
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  // Small messages go eagerly; 1 MiB ones wait for the receiver, so with more than one rank
  // even ranks send first and odd ranks receive first (no cycle of waiting sends). A world of
  // one sends to itself, which only works eagerly.
  std::vector<size_t> sizes = {16};
  if (size_ > 1) sizes.push_back(size_t{1} << 20);
  for (size_t bytes : sizes) {
    SCOPED_TRACE(bytes);
    std::vector<int32_t> out(bytes / 4, rank_ * 1000 + 1), in(bytes / 4, -1);
    auto send = [&] { return world_->Send(out.data(), bytes, next, 7); };
    auto recv = [&] { return world_->Recv(in.data(), bytes, prev, 7); };
    if (rank_ % 2 == 0) {
      ASSERT_TRUE(send().ok());
      ASSERT_TRUE(recv().ok());
    } else {
      ASSERT_TRUE(recv().ok());
      ASSERT_TRUE(send().ok());
    }
    EXPECT_EQ(in.front(), prev * 1000 + 1);
    EXPECT_EQ(in.back(), prev * 1000 + 1);
  }
}

TEST_F(MpiCommTest, MessagesMatchByTag) {
  if (size_ < 2) GTEST_SKIP() << "needs two ranks";
  char first[16] = "first", second[16] = "second", in[16] = {};
  if (rank_ == 0) {
    ASSERT_TRUE(world_->Send(first, sizeof(first), 1, 1).ok());
    ASSERT_TRUE(world_->Send(second, sizeof(second), 1, 2).ok());
  } else if (rank_ == 1) {
    ASSERT_TRUE(world_->Recv(in, sizeof(in), 0, 2).ok());
    EXPECT_STREQ(in, "second");
    ASSERT_TRUE(world_->Recv(in, sizeof(in), 0, 1).ok());
    EXPECT_STREQ(in, "first");
  }
  EXPECT_TRUE(world_->Barrier().ok());
}

TEST_F(MpiCommTest, ARecvOfTheWrongSizeIsDataLoss) {
  if (size_ < 2) GTEST_SKIP() << "needs two ranks";
  auto other_world = MakeWorld();
  ASSERT_NE(other_world, nullptr);
  char eight[8] = "1234567";
  char buffer[16] = {};
  if (rank_ == 0) {
    ASSERT_TRUE(world_->Send(eight, 8, 1, 3).ok());
    ASSERT_TRUE(other_world->Send(eight, 8, 1, 3).ok());
  } else if (rank_ == 1) {
    const Status shorter = world_->Recv(buffer, 16, 0, 3);
    EXPECT_EQ(shorter.code(), StatusCode::kDataLoss) << shorter.ToString();
    EXPECT_THAT(shorter.message(), HasSubstr("has 8 bytes, not the 16 expected"));
    EXPECT_EQ(world_->Barrier().code(), StatusCode::kFailedPrecondition);
    const Status longer = other_world->Recv(buffer, 4, 0, 3);  // truncated by MPI
    EXPECT_EQ(longer.code(), StatusCode::kDataLoss) << longer.ToString();
  }
  auto healthy = MakeWorld();
  ASSERT_NE(healthy, nullptr);
  EXPECT_TRUE(healthy->Barrier().ok());
}

TEST_F(MpiCommTest, BarrierWaitsForTheLastRank) {
  // steady_clock is CLOCK_MONOTONIC, shared by the processes of one host.
  auto now_ns = [] {
    return static_cast<int64_t>(SteadyClock::now().time_since_epoch() / std::chrono::nanoseconds(1));
  };
  const int last = size_ - 1;
  int64_t entered_ns = 0;
  if (rank_ == last) {
    std::this_thread::sleep_for(milliseconds(200));
    entered_ns = now_ns();
  }
  ASSERT_TRUE(world_->Barrier().ok());
  const int64_t left_ns = now_ns();
  ASSERT_TRUE(world_->Broadcast(&entered_ns, sizeof(entered_ns), last).ok());
  EXPECT_GE(left_ns, entered_ns) << "left the barrier before rank " << last << " entered it";
}

TEST_F(MpiCommTest, SplitsReplicaTpAndPpGroupsForEveryShape) {
  for (int tp = 1; tp <= size_; ++tp) {
    for (int pp = 1; pp <= size_; ++pp) {
      if (size_ % (tp * pp) != 0) continue;
      SCOPED_TRACE(::testing::Message() << "tp " << tp << " pp " << pp);
      auto topology = ReplicaTopology::Create(rank_, size_, tp, pp);
      ASSERT_TRUE(topology.ok()) << topology.status().ToString();
      auto comms = BuildReplicaCommunicators(*world_, *topology);
      ASSERT_TRUE(comms.ok()) << comms.status().ToString();
      EXPECT_EQ(comms->tp->size(), tp);
      EXPECT_EQ(comms->tp->rank(), topology->tp_rank());
      EXPECT_EQ(comms->pp->size(), pp);
      EXPECT_EQ(comms->pp->rank(), topology->stage());
      EXPECT_EQ(comms->replica->rank(), topology->rank_in_replica());
      EXPECT_THAT(comms->tp->name(), HasSubstr("tp group"));
      EXPECT_EQ(comms->tp->timeout(), kTimeout);

      // Tensor parallel: the all-reduce sums exactly this stage's ranks.
      float value = static_cast<float>(rank_);
      ASSERT_TRUE(comms->tp->AllReduceSum(&value, 1).ok());
      float expected = 0;
      for (int r : topology->tp_group_world_ranks()) expected += static_cast<float>(r);
      EXPECT_EQ(value, expected);

      // Pipeline: each stage hands its world rank to the next one.
      if (auto prev = topology->prev_stage_world_rank()) {
        int received = -1;
        ASSERT_TRUE(comms->pp->Recv(&received, sizeof(received), comms->pp->rank() - 1, 3).ok());
        EXPECT_EQ(received, *prev);
      }
      if (topology->next_stage_world_rank()) {
        const int mine = rank_;
        ASSERT_TRUE(comms->pp->Send(&mine, sizeof(mine), comms->pp->rank() + 1, 3).ok());
      }

      // The replica: the leader's plan reaches everyone; the gather lists the replica in order.
      std::string plan = topology->is_leader() ? "plan of " + std::to_string(rank_) : "";
      ASSERT_TRUE(comms->replica->BroadcastString(&plan, 0).ok());
      EXPECT_EQ(plan, "plan of " + std::to_string(topology->leader_world_rank()));
      std::vector<int> gathered(static_cast<size_t>(tp * pp), -1);
      ASSERT_TRUE(comms->replica->AllGather(&rank_, sizeof(int), gathered.data()).ok());
      EXPECT_EQ(gathered, topology->replica_world_ranks());
    }
  }
}

TEST_F(MpiCommTest, SplitWithANegativeColourFailsOnEveryRank) {
  const int color = rank_ == size_ - 1 ? -1 : 0;
  auto child = world_->Split(color, rank_, "bad split");
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(child.status().message(), HasSubstr("rank " + std::to_string(size_ - 1)));
  EXPECT_TRUE(world_->Barrier().ok()) << "the parent stays usable";
}

// Our own checks refuse bad arguments (kInvalidArgument: every rank refuses alike and goes on);
// an argument error MPI reports after them is a runtime gone wrong on one rank: kUnavailable,
// which breaks the communicator and ends a follower rank instead of letting it skip the step.
TEST(MpiErrorTest, AnArgumentErrorFromMpiAfterOurChecksIsUnavailable) {
  EXPECT_EQ(MpiError(MPI_ERR_ARG, "MPI_Isend", "send").code(), StatusCode::kInvalidArgument);
  const Status runtime = MpiRuntimeError(MPI_ERR_ARG, "MPI_Isend", "send");
  EXPECT_EQ(runtime.code(), StatusCode::kUnavailable);
  EXPECT_THAT(runtime.message(), HasSubstr("MPI_Isend failed"));
  EXPECT_EQ(MpiRuntimeError(MPI_ERR_COMM, "MPI_Ibcast", "").code(), StatusCode::kUnavailable);
  EXPECT_EQ(MpiRuntimeError(MPI_ERR_TRUNCATE, "MPI_Irecv", "").code(), StatusCode::kDataLoss);
}

TEST_F(MpiCommTest, BadArgumentsLeaveTheCommunicatorUsable) {
  char byte = 0;
  EXPECT_EQ(world_->Broadcast(&byte, 1, size_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(world_->Send(&byte, 1, 0, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(world_->failure().ok());
  EXPECT_TRUE(world_->Barrier().ok());
}

TEST_F(MpiCommTest, RecordsEveryOperationInItsHistogram) {
  metrics::Registry registry;
  world_->set_metrics(&registry);
  float value = 1;
  char bytes[8] = {};
  std::vector<char> gathered(8 * static_cast<size_t>(size_));
  std::string text = "x";
  ASSERT_TRUE(world_->AllReduceSum(&value, 1).ok());
  ASSERT_TRUE(world_->AllGather(bytes, 8, gathered.data()).ok());
  ASSERT_TRUE(world_->Broadcast(bytes, 8, 0).ok());
  ASSERT_TRUE(world_->BroadcastString(&text, 0).ok());
  ASSERT_TRUE(world_->Send(bytes, 8, rank_, 1).ok());  // to itself: small, so eager
  ASSERT_TRUE(world_->Recv(bytes, 8, rank_, 1).ok());
  ASSERT_TRUE(world_->Barrier().ok());
  const std::string rendered = registry.RenderText();
  for (const char* line :
       {"bmad_comm_seconds_count{op=\"all_reduce\"} 1", "bmad_comm_seconds_count{op=\"all_gather\"} 1",
        "bmad_comm_seconds_count{op=\"broadcast\"} 2", "bmad_comm_seconds_count{op=\"send\"} 1",
        "bmad_comm_seconds_count{op=\"recv\"} 1", "bmad_comm_seconds_count{op=\"barrier\"} 1"}) {
    EXPECT_THAT(rendered, HasSubstr(line));
  }
  world_->set_metrics(nullptr);
}

TEST(MpiSessionTest, ASecondSessionIsRefused) {
  auto second = MpiSession::Start();  // main() holds the first
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
}

// ---- Failures, last: each breaks a communicator of its own on purpose. ----

TEST_F(MpiCommTest, ZZAllReduceTimesOutWhenARankSkipsIt) {
  if (size_ < 2) GTEST_SKIP() << "needs a rank to skip the call";
  auto victim = MakeWorld(milliseconds(300));
  ASSERT_NE(victim, nullptr);
  // Static: MPI may keep the abandoned request's buffer until the process ends.
  static std::vector<float> data(1000, 1.0f);
  if (rank_ != 0) {
    const auto start = SteadyClock::now();
    const Status s = victim->AllReduceSum(data.data(), data.size());
    const auto elapsed = SteadyClock::now() - start;
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("all_reduce of 4000 bytes on world [rank " +
                                       std::to_string(rank_) + " of " + std::to_string(size_) +
                                       "] with all " + std::to_string(size_) + " ranks"));
    EXPECT_THAT(s.message(), HasSubstr("did not complete within 300 ms"));
    EXPECT_GE(elapsed, milliseconds(300));
    EXPECT_LT(elapsed, milliseconds(300) + kLateness);
    EXPECT_EQ(victim->Barrier().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_TRUE(world_->Barrier().ok());
}

TEST_F(MpiCommTest, ZZRecvTimesOutNamingItsSource) {
  auto victim = MakeWorld(milliseconds(200));
  ASSERT_NE(victim, nullptr);
  if (rank_ == size_ - 1) {  // rank 0 never sends (in a world of one, it is the receiver too)
    char buffer[64];
    const auto start = SteadyClock::now();
    const Status s = victim->Recv(buffer, sizeof(buffer), 0, 42);
    const auto elapsed = SteadyClock::now() - start;
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("recv of 64 bytes on world"));
    EXPECT_THAT(s.message(), HasSubstr("from rank 0 (tag 42)"));
    EXPECT_THAT(s.message(), HasSubstr("within 200 ms"));
    EXPECT_GE(elapsed, milliseconds(200));
    EXPECT_LT(elapsed, milliseconds(200) + kLateness);
  }
  EXPECT_TRUE(world_->Barrier().ok());
}

TEST_F(MpiCommTest, ZZAbortFlagEndsAWaitPromptly) {
  if (size_ < 2) GTEST_SKIP() << "needs a rank to skip the call";
  auto victim = MakeWorld(kTimeout);
  ASSERT_NE(victim, nullptr);
  static std::vector<float> data(16, 1.0f);
  if (rank_ != 0) {
    // A signal handler raises the flag, as SIGTERM from mpirun would.
    ASSERT_TRUE(InstallAbortSignalHandler(SIGALRM).ok());
    itimerval timer{};
    timer.it_value.tv_usec = 200'000;
    ASSERT_EQ(setitimer(ITIMER_REAL, &timer, nullptr), 0);
    const auto start = SteadyClock::now();
    const Status s = victim->AllReduceSum(data.data(), data.size());
    const auto elapsed = SteadyClock::now() - start;
    signal(SIGALRM, SIG_DFL);
    EXPECT_TRUE(AbortRequested());
    ClearAbortRequest();
    EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("all_reduce"));
    EXPECT_THAT(s.message(), HasSubstr("abort requested"));
    EXPECT_GE(elapsed, milliseconds(150));
    EXPECT_LT(elapsed, milliseconds(200) + kLateness);
  }
  EXPECT_TRUE(world_->Barrier().ok());

  // With the flag already up nothing starts, on any rank, and the communicator survives.
  RequestAbort();
  EXPECT_EQ(world_->Barrier().code(), StatusCode::kCancelled);
  ClearAbortRequest();
  EXPECT_TRUE(world_->Barrier().ok());
}

}  // namespace
}  // namespace bmad::parallel
