#include "worker/parallel/step_plan.h"

#include <algorithm>
#include <cstring>

namespace bmad::parallel {
namespace {

// Little-endian fixed-width fields; every rank of a replica runs the same build.
class Writer {
 public:
  template <typename T>
  void Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  template <typename T>
  void PutList(const std::vector<T>& v) {
    Put(static_cast<uint32_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string Take() { return std::move(out_); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetList(std::vector<T>* v) {
    uint32_t n = 0;
    if (!Get(&n) || (in_.size() - pos_) / sizeof(T) < n) return false;
    v->resize(n);
    if (n == 0) return true;  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(v->data(), in_.data() + pos_, size_t{n} * sizeof(T));
    pos_ += size_t{n} * sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    std::vector<char> chars;
    if (!GetList(&chars)) return false;
    s->assign(chars.begin(), chars.end());
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeStepPlan(const StepPlan& plan) {
  Writer w;
  w.Put(static_cast<uint8_t>(plan.kind));
  w.Put(plan.step_id);
  w.PutList(std::vector<char>(plan.reason.begin(), plan.reason.end()));
  w.PutList(plan.released);
  w.Put(static_cast<uint32_t>(plan.sequences.size()));
  for (const PlanSequence& s : plan.sequences) {
    w.Put(s.seq_id);
    w.Put(s.start_pos);
    w.Put(static_cast<uint8_t>(s.reset_table ? 2 : 0));
    w.Put(s.logit_rows);
    w.PutList(s.tokens);
    w.PutList(s.new_blocks);
  }
  return w.Take();
}

Result<StepPlan> DecodeStepPlan(std::string_view bytes) {
  auto bad = [&](const char* what) {
    return InvalidArgument("malformed step plan (" + std::to_string(bytes.size()) + " bytes): " + what);
  };
  Reader r(bytes);
  StepPlan plan;
  uint8_t kind = 0;
  if (!r.Get(&kind) || !r.Get(&plan.step_id)) return bad("truncated header");
  if (kind < 1 || kind > 3) return bad("unknown kind");
  plan.kind = static_cast<StepPlan::Kind>(kind);
  if (!r.GetString(&plan.reason) || !r.GetList(&plan.released)) return bad("truncated header");
  uint32_t n = 0;
  if (!r.Get(&n)) return bad("truncated sequence count");
  for (uint32_t i = 0; i < n; ++i) {
    PlanSequence s;
    uint8_t flags = 0;
    if (!r.Get(&s.seq_id) || !r.Get(&s.start_pos) || !r.Get(&flags) || !r.Get(&s.logit_rows) ||
        !r.GetList(&s.tokens) || !r.GetList(&s.new_blocks)) {
      return bad("truncated sequence");
    }
    if (s.logit_rows < 0) return bad("negative rows of logits");
    s.reset_table = (flags & 2) != 0;
    plan.sequences.push_back(std::move(s));
  }
  if (!r.done()) return bad("trailing bytes");
  return plan;
}

StepPlan StepPlanBuilder::Build(std::span<const model::SequenceStep> steps,
                                std::span<const uint64_t> ids) {
  StepPlan plan;
  plan.step_id = next_step_++;
  plan.released = std::move(released_);
  released_.clear();
  plan.sequences.reserve(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const model::SequenceStep& st = steps[i];
    PlanSequence s;
    s.seq_id = ids[i];
    s.start_pos = st.start_pos;
    s.logit_rows = st.logit_rows;
    s.tokens.assign(st.tokens.begin(), st.tokens.end());
    std::vector<int32_t>& held = sent_[s.seq_id];
    // The ranks' copy is still a prefix of the table: send what was appended. Otherwise the
    // table was rebuilt (the sequence was preempted and readmitted): send it whole.
    const bool prefix = held.size() <= st.block_table.size() &&
                        std::equal(held.begin(), held.end(), st.block_table.begin());
    if (prefix && !held.empty()) {
      s.new_blocks.assign(st.block_table.begin() + static_cast<ptrdiff_t>(held.size()),
                          st.block_table.end());
    } else {
      s.reset_table = true;
      s.new_blocks.assign(st.block_table.begin(), st.block_table.end());
      held.clear();
    }
    held.insert(held.end(), s.new_blocks.begin(), s.new_blocks.end());
    plan.sequences.push_back(std::move(s));
  }
  return plan;
}

void StepPlanBuilder::Release(uint64_t id) {
  if (sent_.erase(id) > 0) released_.push_back(id);
}

Status StepPlanMirror::Apply(const StepPlan& plan, std::vector<model::SequenceStep>* steps) {
  steps->clear();
  for (uint64_t id : plan.released) tables_.erase(id);
  for (const PlanSequence& s : plan.sequences) {
    std::vector<int32_t>* table;
    if (s.reset_table) {
      table = &tables_[s.seq_id];
      table->clear();
    } else {
      auto it = tables_.find(s.seq_id);
      if (it == tables_.end()) {
        return InvalidArgument("step plan " + std::to_string(plan.step_id) +
                               " extends the block table of sequence " + std::to_string(s.seq_id) +
                               ", which this rank does not hold");
      }
      table = &it->second;
    }
    table->insert(table->end(), s.new_blocks.begin(), s.new_blocks.end());
  }
  // Spans only once every table has its final size for this step.
  for (const PlanSequence& s : plan.sequences) {
    steps->push_back({s.tokens, s.start_pos, tables_.at(s.seq_id), s.logit_rows});
  }
  return Status::Ok();
}

std::vector<std::pair<size_t, size_t>> SplitMicroBatches(std::span<const model::SequenceStep> steps,
                                                         int64_t parts) {
  std::vector<std::pair<size_t, size_t>> ranges;
  const size_t n = steps.size();
  if (n == 0) return ranges;
  const size_t count = static_cast<size_t>(std::clamp<int64_t>(parts, 1, static_cast<int64_t>(n)));
  int64_t total = 0;
  for (const model::SequenceStep& s : steps) total += static_cast<int64_t>(s.tokens.size());
  size_t begin = 0;
  int64_t prefix = 0;
  for (size_t k = 0; k < count; ++k) {
    size_t end = n;
    if (k + 1 < count) {
      // At least one sequence here, and enough left for the parts after this one.
      const int64_t target = total * static_cast<int64_t>(k + 1) / static_cast<int64_t>(count);
      end = begin + 1;
      prefix += static_cast<int64_t>(steps[begin].tokens.size());
      while (end < n - (count - 1 - k) &&
             prefix + static_cast<int64_t>(steps[end].tokens.size()) <= target) {
        prefix += static_cast<int64_t>(steps[end].tokens.size());
        ++end;
      }
    }
    ranges.emplace_back(begin, end);
    begin = end;
  }
  return ranges;
}

}  // namespace bmad::parallel
