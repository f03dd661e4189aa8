// The CUDA backend's upload plan (kernels/cuda/upload_slots.h): which buffer each op's metadata
// goes to, when an upload is skipped, and whether the waits it asks for order the copy stream,
// the compute stream and the host's staging writes correctly. The last part runs the plan, as
// the backend does, on a model of CUDA's streams and events and checks every read and write
// against the happens-before relation the model implies. Runs in CI, without a GPU.
#include "kernels/cuda/upload_slots.h"

#include <gtest/gtest.h>

#include <bitset>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace bmad::cuda {
namespace {

using Values = std::vector<int32_t>;

TEST(UploadSlotsTest, FirstUploadGoesToSideZeroWithNothingToWaitFor) {
  UploadSlots slots(3);
  const Values v{1, 2, 3};
  const UploadSlots::Plan p = slots.Next(1, v);
  EXPECT_FALSE(p.reuse);
  EXPECT_EQ(p.buffer, 2);
  EXPECT_EQ(p.retire, -1);
  EXPECT_FALSE(p.wait_consumed);
  EXPECT_FALSE(p.wait_landed);
  EXPECT_EQ(slots.buffer_count(), 6);
}

TEST(UploadSlotsTest, EqualUploadReusesTheCurrentBuffer) {
  UploadSlots slots(2);
  const Values v{7, 8};
  slots.Issued(0, slots.Next(0, v), v);
  const UploadSlots::Plan again = slots.Next(0, v);
  EXPECT_TRUE(again.reuse);
  EXPECT_EQ(again.buffer, 0);
  // Another kind with the same bytes is a different buffer.
  EXPECT_FALSE(slots.Next(1, v).reuse);
}

TEST(UploadSlotsTest, DifferentUploadsAlternateAndWaitFromTheThirdOn) {
  UploadSlots slots(1);
  const Values a{1}, b{2}, c{3}, d{4};
  UploadSlots::Plan p = slots.Next(0, a);
  slots.Issued(0, p, a);

  p = slots.Next(0, b);
  EXPECT_EQ(p.buffer, 1);
  EXPECT_EQ(p.retire, 0);  // side 0 is given up: record its consumed event
  EXPECT_FALSE(p.wait_consumed);  // side 1 was never read
  EXPECT_FALSE(p.wait_landed);    // nor copied into
  slots.Issued(0, p, b);

  p = slots.Next(0, c);
  EXPECT_EQ(p.buffer, 0);
  EXPECT_EQ(p.retire, 1);
  EXPECT_TRUE(p.wait_consumed);  // side 0's readers must be done before it is overwritten
  EXPECT_TRUE(p.wait_landed);    // and its staging free
  slots.Issued(0, p, c);

  p = slots.Next(0, d);
  EXPECT_EQ(p.buffer, 1);
  EXPECT_TRUE(p.wait_consumed);
  EXPECT_TRUE(p.wait_landed);
}

TEST(UploadSlotsTest, OnlyTheCurrentBufferIsReused) {
  // a, b, a: the third is not a reuse of side 0, because the op reads the current buffer (1).
  UploadSlots slots(1);
  const Values a{1, 1}, b{2, 2};
  slots.Issued(0, slots.Next(0, a), a);
  slots.Issued(0, slots.Next(0, b), b);
  const UploadSlots::Plan p = slots.Next(0, a);
  EXPECT_FALSE(p.reuse);
  EXPECT_EQ(p.buffer, 0);
}

TEST(UploadSlotsTest, EmptyUploadIsNeverAReuse) {
  UploadSlots slots(1);
  const Values empty;
  slots.Issued(0, slots.Next(0, empty), empty);
  EXPECT_FALSE(slots.Next(0, empty).reuse);
}

TEST(UploadSlotsTest, AFailedCopyForgetsWhatTheDeviceHolds) {
  UploadSlots slots(1);
  const Values a{5};
  slots.Issued(0, slots.Next(0, a), a);
  slots.Failed(0);
  const UploadSlots::Plan p = slots.Next(0, a);
  EXPECT_FALSE(p.reuse);
}

// ---- A model of two CUDA streams, events and the host ----------------------------------------
//
// Commands are numbered in the order the host issues them. Happens-before edges:
//   - program order within the compute stream and within the copy stream;
//   - a host action (staging write, waiting for an event) before every command issued later;
//   - an event's record before a wait for it (cudaStreamWaitEvent / cudaEventSynchronize wait for
//     the most recent record issued before the wait);
// and nothing else: the copy stream may run arbitrarily far ahead of or behind compute.
class StreamModel {
 public:
  static constexpr size_t kMax = 2048;
  enum class Where { kCompute, kCopy, kHost };
  enum class What { kRead, kWrite, kStage, kRecord, kWait };

  struct Command {
    Where where;
    What what;
    int buffer = -1;    // kRead / kWrite / kStage
    int version = -1;   // the contents read or written
    int record = -1;    // kWait: the command index of the record waited for (-1: none)
  };

  void Read(int buffer, int version) { Add({Where::kCompute, What::kRead, buffer, version}); }
  void Write(int buffer, int version) { Add({Where::kCopy, What::kWrite, buffer, version}); }
  void Stage(int buffer, int version) { Add({Where::kHost, What::kStage, buffer, version}); }
  void Record(Where where, const std::string& event) {
    last_record_[event] = static_cast<int>(commands_.size());
    Add({where, What::kRecord});
  }
  void Wait(Where where, const std::string& event) {
    const auto it = last_record_.find(event);
    Command c{where, What::kWait};
    c.record = it == last_record_.end() ? -1 : it->second;
    Add(c);
  }

  // before[j][i]: command i happens before command j.
  std::vector<std::bitset<kMax>> Closure() const {
    const size_t n = commands_.size();
    std::vector<std::vector<int>> preds(n);
    std::vector<int> last_in_stream(3, -1);
    for (size_t j = 0; j < n; ++j) {
      const Command& c = commands_[j];
      const auto s = static_cast<size_t>(c.where);
      if (c.where != Where::kHost) {
        if (last_in_stream[s] >= 0) preds[j].push_back(last_in_stream[s]);
        last_in_stream[s] = static_cast<int>(j);
      }
      for (size_t i = 0; i < j; ++i) {
        if (commands_[i].where == Where::kHost) preds[j].push_back(static_cast<int>(i));
      }
      if (c.what == What::kWait && c.record >= 0) preds[j].push_back(c.record);
    }
    // Every edge points forward in issue order, so one pass closes the relation.
    std::vector<std::bitset<kMax>> before(n);  // before[j][i]: i happens before j
    for (size_t j = 0; j < n; ++j) {
      for (int p : preds[j]) {
        before[j] |= before[static_cast<size_t>(p)];
        before[j].set(static_cast<size_t>(p));
      }
    }
    return before;
  }

  bool HappensBefore(size_t a, size_t b) const { return Closure()[b].test(a); }

  // Every hazard found, in words; empty when the order is safe.
  std::vector<std::string> Hazards() const {
    const size_t n = commands_.size();
    const std::vector<std::bitset<kMax>> before = Closure();
    auto hb = [&](size_t x, size_t y) { return before[y].test(x); };

    std::vector<std::string> hazards;
    for (size_t r = 0; r < n; ++r) {
      const Command& read = commands_[r];
      const bool device_read = read.what == What::kRead;
      const bool staging_read = read.what == What::kWrite;  // a copy reads its staging buffer
      if (!device_read && !staging_read) continue;
      const What writer = device_read ? What::kWrite : What::kStage;
      const char* name = device_read ? "device buffer" : "staging buffer";
      for (size_t w = 0; w < n; ++w) {
        const Command& write = commands_[w];
        if (write.what != writer || write.buffer != read.buffer) continue;
        const std::string where = std::string(name) + " " + std::to_string(read.buffer) +
                                  ": command " + std::to_string(r) + " reads version " +
                                  std::to_string(read.version) + ", command " + std::to_string(w) +
                                  " writes version " + std::to_string(write.version);
        if (write.version == read.version) {
          if (!hb(w, r)) hazards.push_back(where + ": the write may not have landed");
        } else if (!hb(w, r) && !hb(r, w)) {
          hazards.push_back(where + ": the two may overlap");
        } else if (hb(w, r)) {
          // An older write is fine only if the read's own version was written after it.
          bool overwritten = false;
          for (size_t w2 = 0; w2 < n; ++w2) {
            const Command& c2 = commands_[w2];
            if (c2.what == writer && c2.buffer == read.buffer &&
                c2.version == read.version && hb(w, w2)) {
              overwritten = true;
            }
          }
          if (!overwritten) hazards.push_back(where + ": an older write may land last");
        }
      }
    }
    return hazards;
  }

  size_t size() const { return commands_.size(); }

 private:
  void Add(const Command& c) {
    ASSERT_LT(commands_.size(), kMax);
    commands_.push_back(c);
  }
  std::vector<Command> commands_;
  std::map<std::string, int> last_record_;
};

struct Omit {
  bool retire_record = false;
  bool wait_consumed = false;
  bool wait_landed = false;
  bool compute_waits_landed = false;
};

// The backend's Upload (cuda_backend.cc), with the model standing in for the CUDA calls, then
// `reads` ops that read the uploaded buffer. Returns the number of copies issued.
int RunWorkload(uint32_t seed, const Omit& omit, StreamModel& model) {
  using W = StreamModel::Where;
  constexpr int kKinds = 3;
  UploadSlots slots(kKinds);
  std::vector<int> version(static_cast<size_t>(slots.buffer_count()), -1);
  std::mt19937 rng(seed);
  int copies = 0, next_version = 0;
  for (int op = 0; op < 150; ++op) {
    const int kind = static_cast<int>(rng() % kKinds);
    const Values values{static_cast<int32_t>(rng() % 3)};  // repeats often: reuse happens
    const UploadSlots::Plan p = slots.Next(kind, values);
    const std::string b = std::to_string(p.buffer);
    if (!p.reuse) {
      if (p.retire >= 0 && !omit.retire_record) {
        model.Record(W::kCompute, "consumed" + std::to_string(p.retire));
      }
      if (p.wait_landed && !omit.wait_landed) model.Wait(W::kHost, "landed" + b);
      const int v = next_version++;
      model.Stage(p.buffer, v);
      if (p.wait_consumed && !omit.wait_consumed) model.Wait(W::kCopy, "consumed" + b);
      model.Write(p.buffer, v);
      model.Record(W::kCopy, "landed" + b);
      if (!omit.compute_waits_landed) model.Wait(W::kCompute, "landed" + b);
      slots.Issued(kind, p, values);
      version[static_cast<size_t>(p.buffer)] = v;
      ++copies;
    }
    const int reads = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < reads; ++r) model.Read(p.buffer, version[static_cast<size_t>(p.buffer)]);
  }
  return copies;
}

TEST(UploadSlotsStreamTest, ThePlanOrdersEveryReadAndWrite) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    StreamModel model;
    const int copies = RunWorkload(seed, Omit{}, model);
    EXPECT_GT(copies, 20);
    EXPECT_LT(copies, 150);  // some uploads were reuses
    const std::vector<std::string> hazards = model.Hazards();
    EXPECT_TRUE(hazards.empty()) << "seed " << seed << ": " << hazards.front();
  }
}

TEST(UploadSlotsStreamTest, TheCopyOverlapsReadsOfTheOtherBuffer) {
  // The point of two buffers: a copy into side 1 need not wait for ops still reading side 0.
  using W = StreamModel::Where;
  StreamModel model;
  UploadSlots slots(1);
  const Values a{1}, b{2};
  UploadSlots::Plan p = slots.Next(0, a);
  model.Stage(p.buffer, 0);
  model.Write(p.buffer, 0);
  model.Record(W::kCopy, "landed0");
  model.Wait(W::kCompute, "landed0");
  slots.Issued(0, p, a);
  model.Read(0, 0);  // command 4
  p = slots.Next(0, b);
  ASSERT_FALSE(p.wait_consumed);
  model.Record(W::kCompute, "consumed0");
  model.Stage(p.buffer, 1);
  model.Write(p.buffer, 1);  // command 7
  ASSERT_EQ(model.size(), 8u);
  EXPECT_TRUE(model.Hazards().empty());
  EXPECT_FALSE(model.HappensBefore(4, 7));  // the copy may run while the read runs
  EXPECT_FALSE(model.HappensBefore(7, 4));
}

// The model finds the hazards each missing wait would cause, so the test above can fail.
TEST(UploadSlotsStreamTest, EachWaitIsNeeded) {
  const std::vector<std::pair<const char*, Omit>> cases = {
      {"consumed event not recorded", {.retire_record = true}},
      {"copy does not wait for readers", {.wait_consumed = true}},
      {"host does not wait for the staging copy", {.wait_landed = true}},
      {"compute does not wait for the copy", {.compute_waits_landed = true}},
  };
  for (const auto& [name, omit] : cases) {
    StreamModel model;
    RunWorkload(7, omit, model);
    EXPECT_FALSE(model.Hazards().empty()) << name;
  }
}

}  // namespace
}  // namespace bmad::cuda
