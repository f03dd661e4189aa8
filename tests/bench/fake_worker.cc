// bmad-fake-worker: a simulated replica for coordinator benchmarks.
//
// It speaks the worker side of the protocol exactly as bmad-worker does (worker/server/
// worker_server.cc): one DEALER socket to the coordinator's worker endpoint with the routing id
// "<replica id>/<incarnation hex>", Register with a ReplicaInfo (pool, kv_blocks, block_size,
// max_seqs, model name, context length), Heartbeat every --heartbeat-ms with LoadStats and the
// active request ids and the newest Assign taken, Assign / WorkerCancel / Drain / Shutdown / RegisterAck handled, and a
// NotFound error ("unknown replica; register") answered by registering again. SIGTERM drains.
//
// Instead of a model it simulates a continuous-batching engine. Each step schedules, within a
// token budget (--max-batch-tokens), first the running sequences that decode (1 token each),
// then the next prompt chunks of running sequences still prefilling, then waiting requests in
// arrival order while fewer than --max-seqs run and KV blocks allow. The step then "computes" for
//
//   step_ms = base_ms + per_seq_ms * (sequences in the step)
//                     + per_prefill_token_ms * (prompt tokens in the step)
//
// (the socket is served meanwhile, as a GPU worker's host thread would), and every sequence
// whose known tokens are all computed samples one token: one TokenChunk per sequence per step,
// with a deterministic token id and the text " x". A request finishes (reason "length", with
// usage) at max_tokens or at the context length. KV blocks are held per computed token; a decode
// that finds no free block preempts the most recently admitted sequence (recomputed later), as
// the real scheduler does. With every timing flag 0 it answers as fast as it can: the "fast fake
// worker" that isolates the coordinator's own cost.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "common/cli/flags.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/proto/frames.h"
#include "common/proto/messages.h"

namespace bmad::bench {
namespace {

constexpr const char* kLog = "fake-worker";
std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

struct Options {
  std::string coordinator;
  std::string replica_id = "fake-0";
  std::string pool = "normal";
  std::string model;
  int64_t context_length = 4096;
  int64_t kv_blocks = 4096;
  int64_t block_size = 16;
  int64_t max_seqs = 64;
  int64_t max_batch_tokens = 512;
  int64_t max_waiting = 4096;
  double base_ms = 0;
  double per_seq_ms = 0;
  double per_prefill_token_ms = 0;
  int64_t heartbeat_ms = 250;
  int64_t max_run_ms = 0;
  std::string log_level;
};

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

struct Sequence {
  uint64_t id = 0;
  int64_t prompt_len = 0;
  int64_t generated = 0;       // output tokens so far, including those streamed before a migration
  int64_t max_generated = 0;   // finishes here: min(max_tokens, context - prompt)
  int64_t computed = 0;        // tokens whose KV is computed; known tokens = prompt + generated
  int64_t blocks = 0;          // KV blocks held
  uint64_t admitted_order = 0; // larger: admitted more recently (preempted first)
  uint32_t chunk_sequence = 0;
  uint32_t assignment = 0;  // echoed on its chunks
  bool cancelled = false;      // cancelled while in the step being computed

  int64_t known() const { return prompt_len + generated; }
};

struct Scheduled {
  Sequence* seq;
  int64_t tokens;
};

class FakeWorker {
 public:
  explicit FakeWorker(const Options& o) : o_(o) {}

  Status Run() {
    incarnation_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    socket_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    socket_->set(zmq::sockopt::linger, 0);
    socket_->set(zmq::sockopt::sndhwm, 100000);
    socket_->set(zmq::sockopt::rcvhwm, 100000);
    socket_->set(zmq::sockopt::rcvtimeo, 0);  // reads below never block: poll waits
    socket_->set(zmq::sockopt::routing_id, o_.replica_id + "/" + Hex(incarnation_));
    socket_->connect(o_.coordinator);
    log::Info(kLog, "fake replica ready",
              {{"replica", o_.replica_id}, {"pool", o_.pool}, {"model", o_.model},
               {"kv_blocks", o_.kv_blocks}, {"max_seqs", o_.max_seqs},
               {"base_ms", o_.base_ms}, {"per_seq_ms", o_.per_seq_ms},
               {"per_prefill_token_ms", o_.per_prefill_token_ms},
               {"coordinator", o_.coordinator}});
    const int64_t heartbeat_ns = o_.heartbeat_ms * 1'000'000;
    const int64_t start_ns = clock_.NowNanos();
    window_start_ns_ = start_ns;
    SendRegister();
    SendHeartbeat();
    bool stopping = false;
    while (!stopping) {
      int64_t now = clock_.NowNanos();
      if (o_.max_run_ms > 0 && now - start_ns > o_.max_run_ms * 1'000'000) {
        log::Warn(kLog, "stopping: max run time reached");
        break;
      }
      if (g_stop.load() && !draining_) {
        log::Info(kLog, "stop requested: draining");
        draining_ = true;
      }
      if (draining_ && !in_step_ && !HasWork()) break;
      if (!registered_ && now - last_register_ns_ > heartbeat_ns) SendRegister();
      if (now - last_heartbeat_ns_ >= heartbeat_ns) {
        SendHeartbeat();
        stalled_ = false;  // try the stalled step again now and then
      }

      // How long to wait for messages: until the step in progress ends, not at all when a new
      // step can start, else until the next heartbeat.
      int64_t wait_ns = last_heartbeat_ns_ + heartbeat_ns - now;
      if (in_step_) {
        wait_ns = std::min(wait_ns, step_end_ns_ - now);
      } else if (HasWork() && !stalled_) {
        wait_ns = 0;
      }
      wait_ns = std::max<int64_t>(wait_ns, 0);
      zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
      proto::PollSockets(&item, 1, std::chrono::milliseconds(wait_ns / 1'000'000));
      if (item.revents & ZMQ_POLLIN) {
        while (auto in = proto::ReceiveMessage(*socket_, /*routed=*/false)) {
          if (!in->message.ok()) {
            log::Warn(kLog, "undecodable message from the coordinator",
                      {{"error", in->message.status()}});
            continue;
          }
          stalled_ = false;
          if (!Handle(*in->message)) {
            stopping = true;
            break;
          }
        }
      } else if (in_step_ && wait_ns < 1'000'000) {
        // Below poll's millisecond resolution: sleep out the rest of the step.
        std::this_thread::sleep_for(std::chrono::nanoseconds(step_end_ns_ - clock_.NowNanos()));
      }
      if (stopping) break;
      now = clock_.NowNanos();
      if (in_step_ && now >= step_end_ns_) FinishStep(now);
      if (!in_step_ && HasWork()) {
        StartStep(now);
        if (in_step_ && step_end_ns_ <= now) FinishStep(now);
      }
    }
    // As bmad-worker: the last word is Shutdown, so the coordinator routes around the replica at
    // once (a final heartbeat made it look live until the liveness timeout).
    socket_->set(zmq::sockopt::linger, 1000);  // it gets out before the socket closes
    Send(proto::Shutdown{"replica " + o_.replica_id + " stopped" + (draining_ ? " after draining" : ""),
                         /*planned=*/true});
    log::Info(kLog, "fake replica stopped",
              {{"replica", o_.replica_id}, {"steps", steps_total_},
               {"generated_tokens", generated_total_}, {"requests_finished", finished_total_},
               {"preemptions", preemptions_}});
    return refused_ ? FailedPrecondition("the coordinator refused this replica") : Status::Ok();
  }

 private:
  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }

  proto::LoadStats Load() {
    UpdateUtilization(clock_.NowNanos());
    proto::LoadStats l;
    l.running = static_cast<uint32_t>(running_.size());
    l.waiting = static_cast<uint32_t>(waiting_.size());
    l.kv_usage = static_cast<float>(double(used_blocks_) / double(o_.kv_blocks));
    l.utilization = utilization_;
    l.kv_free_blocks = static_cast<uint32_t>(o_.kv_blocks - used_blocks_);
    l.kv_total_blocks = static_cast<uint32_t>(o_.kv_blocks);
    l.steps_total = steps_total_;
    l.generated_tokens_total = generated_total_;
    l.max_seqs = static_cast<uint32_t>(o_.max_seqs);
    return l;
  }

  // Share of wall time spent in steps, over windows of about a second (as the engine does).
  void UpdateUtilization(int64_t now) {
    const int64_t window = now - window_start_ns_;
    if (window >= 1'000'000'000) {
      int64_t busy = busy_ns_;
      if (in_step_) busy += now - std::max(step_start_ns_, window_start_ns_);  // the part so far
      utilization_ = static_cast<float>(std::min(1.0, double(busy) / double(window)));
      busy_ns_ = 0;  // a step in progress counts the rest of itself when it ends
      window_start_ns_ = now;
    }
  }

  proto::ReplicaInfo Info() {
    proto::ReplicaInfo i;
    i.replica_id = o_.replica_id;
    i.pool = o_.pool == "long_tail" ? ReplicaPool::kLongTail : ReplicaPool::kNormal;
    i.tp = 1;
    i.pp = 1;
    i.kv_blocks = static_cast<uint32_t>(o_.kv_blocks);
    i.block_size = static_cast<uint32_t>(o_.block_size);
    i.max_seqs = static_cast<uint32_t>(o_.max_seqs);
    i.model_name = o_.model;
    i.context_length = static_cast<uint32_t>(o_.context_length);
    i.load = Load();
    return i;
  }

  void Send(const proto::Message& m) {
    Status s = proto::SendMessage(*socket_, m);
    if (!s.ok()) {
      log::Warn(kLog, "cannot send to the coordinator",
                {{"message", proto::MessageName(m)}, {"error", s}});
    }
  }

  void SendRegister() {
    last_assignment_.reset();
    seen_assignment_.reset();
    Send(proto::Register{Info(), incarnation_});
    last_register_ns_ = clock_.NowNanos();
  }

  void SendHeartbeat() {
    std::vector<uint64_t> ids;
    for (const auto& [id, seq] : sequences_) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    std::vector<uint32_t> numbers;
    for (uint64_t id : ids) numbers.push_back(sequences_.at(id)->assignment);
    Send(proto::Heartbeat{o_.replica_id,          Load(),
                          std::move(ids),          last_assignment_.value_or(0),
                          last_assignment_.has_value(), std::move(numbers),
                          seen_assignment_.value_or(0), seen_assignment_.has_value()});
    last_heartbeat_ns_ = clock_.NowNanos();
  }

  void SendError(StatusCode code, const std::string& message, uint64_t id, uint32_t assignment) {
    Send(proto::ErrorMessage{code, message, id, "", 0, assignment});
  }

  // Returns false when the worker must stop.
  bool Handle(proto::Message& m) {
    if (auto* a = std::get_if<proto::Assign>(&m)) {
      last_assignment_ = a->assignment;
      Assign(*a);
    } else if (auto* c = std::get_if<proto::WorkerCancel>(&m)) {
      Cancel(c->request_id);
    } else if (auto* hb_ack = std::get_if<proto::HeartbeatAck>(&m)) {
      // The coordinator is alive (this fake has no readiness to report); echo the newest Assign
      // number it had sent, as bmad-worker does, so that a lost Assign is found at once.
      if (hb_ack->has_last_assignment) seen_assignment_ = hb_ack->last_assignment;
    } else if (std::holds_alternative<proto::Drain>(m)) {
      log::Info(kLog, "draining: finishing running requests, accepting none");
      draining_ = true;
    } else if (auto* sd = std::get_if<proto::Shutdown>(&m)) {
      log::Info(kLog, "shutdown requested by the coordinator", {{"reason", sd->reason}});
      return false;
    } else if (auto* ack = std::get_if<proto::RegisterAck>(&m)) {
      if (!ack->accepted) {
        log::Error(kLog, "the coordinator refused this replica", {{"reason", ack->message}});
        refused_ = true;
        return false;
      }
      if (!registered_) log::Info(kLog, "registered with the coordinator");
      registered_ = true;
    } else if (auto* err = std::get_if<proto::ErrorMessage>(&m)) {
      if (err->code == StatusCode::kNotFound) {
        registered_ = false;  // the coordinator restarted or declared us dead
        // At most once a heartbeat interval, as bmad-worker: a burst of answers to queued
        // heartbeats must not become a burst of registrations.
        if (clock_.NowNanos() - last_register_ns_ > o_.heartbeat_ms * 1'000'000) SendRegister();
      } else {
        log::Warn(kLog, "error from the coordinator", {{"message", err->message}});
      }
    } else {
      log::Warn(kLog, "unexpected message from the coordinator",
                {{"message", proto::MessageName(m)}});
    }
    return true;
  }

  void Assign(const proto::Assign& a) {
    const std::string which = "request " + std::to_string(a.request_id);
    if (draining_) {
      return SendError(StatusCode::kFailedPrecondition,
                       "replica is draining; not accepting " + which, a.request_id, a.assignment);
    }
    // As bmad-worker: an assignment of an id already running replaces that copy (the
    // coordinator took this replica for dead and gave the request back).
    if (auto running = sequences_.find(a.request_id); running != sequences_.end()) {
      Remove(running->second.get());
    }
    if (a.prompt_tokens.empty()) {
      return SendError(StatusCode::kInvalidArgument, which + ": the prompt is empty", a.request_id, a.assignment);
    }
    const auto prompt = static_cast<int64_t>(a.prompt_tokens.size());
    const auto already = static_cast<int64_t>(a.generated_tokens.size());
    if (prompt + already >= o_.context_length) {
      return SendError(StatusCode::kOutOfRange,
                       which + ": the prompt has " + std::to_string(prompt + already) +
                           " tokens; the context length is " + std::to_string(o_.context_length),
                       a.request_id, a.assignment);
    }
    if (already >= static_cast<int64_t>(a.sampling.max_tokens)) {
      return SendError(StatusCode::kInvalidArgument, which + " has already generated its max_tokens",
                       a.request_id, a.assignment);
    }
    if (static_cast<int64_t>(waiting_.size()) >= o_.max_waiting) {
      return SendError(StatusCode::kResourceExhausted,
                       "replica queue is full (" + std::to_string(waiting_.size()) +
                           " requests waiting)",
                       a.request_id, a.assignment);
    }
    auto seq = std::make_unique<Sequence>();
    seq->id = a.request_id;
    seq->assignment = a.assignment;
    seq->prompt_len = prompt;
    seq->generated = already;
    seq->max_generated = std::min<int64_t>(a.sampling.max_tokens, o_.context_length - prompt);
    waiting_.push_back(seq.get());
    sequences_.emplace(a.request_id, std::move(seq));
  }

  void Cancel(uint64_t id) {
    auto it = sequences_.find(id);
    if (it == sequences_.end()) return;
    Sequence* s = it->second.get();
    proto::TokenChunk chunk;
    chunk.request_id = id;
    chunk.sequence = s->chunk_sequence++;
    chunk.assignment = s->assignment;
    chunk.token_offset = static_cast<uint32_t>(s->generated);
    chunk.finish_reason = proto::FinishReason::kCancelled;
    chunk.usage = {static_cast<uint32_t>(s->prompt_len), static_cast<uint32_t>(s->generated), 0};
    Send(chunk);
    Remove(s);
  }

  // Frees the sequence's blocks and forgets it (also removes it from the step in progress).
  void Remove(Sequence* s) {
    used_blocks_ -= s->blocks;
    std::erase(running_, s);
    std::erase(waiting_, s);
    for (Scheduled& p : step_) {
      if (p.seq == s) p.seq = nullptr;
    }
    sequences_.erase(s->id);
  }

  int64_t BlocksFor(int64_t tokens) const { return (tokens + o_.block_size - 1) / o_.block_size; }

  // Makes `s` hold blocks for `tokens` computed tokens. False when the pool cannot.
  bool Reserve(Sequence* s, int64_t tokens) {
    const int64_t need = BlocksFor(tokens) - s->blocks;
    if (need <= 0) return true;
    if (used_blocks_ + need > o_.kv_blocks) return false;
    used_blocks_ += need;
    s->blocks += need;
    return true;
  }

  // Back to the front of the queue, its KV gone (recomputed when readmitted).
  void Preempt(Sequence* s) {
    used_blocks_ -= s->blocks;
    s->blocks = 0;
    s->computed = 0;
    std::erase(running_, s);
    waiting_.push_front(s);
    ++preemptions_;
  }

  void StartStep(int64_t now) {
    step_.clear();
    int64_t budget = o_.max_batch_tokens;
    int64_t prefill_tokens = 0;
    // 1. Decodes (one token each), oldest first; out of blocks: preempt the newest.
    std::vector<Sequence*> order = running_;
    for (Sequence* s : order) {
      if (budget <= 0) break;
      if (s->known() - s->computed != 1) continue;
      if (std::find(running_.begin(), running_.end(), s) == running_.end()) continue;  // preempted
      while (!Reserve(s, s->computed + 1)) {
        Sequence* victim = *std::max_element(running_.begin(), running_.end(),
                                             [](const Sequence* a, const Sequence* b) {
                                               return a->admitted_order < b->admitted_order;
                                             });
        std::erase_if(step_, [&](const Scheduled& p) { return p.seq == victim; });
        Preempt(victim);
        if (victim == s) break;
      }
      if (std::find(running_.begin(), running_.end(), s) == running_.end()) continue;
      step_.push_back({s, 1});
      --budget;
    }
    // 2. Running prompts' next chunks.
    for (Sequence* s : running_) {
      if (budget <= 0) break;
      const int64_t left = s->known() - s->computed;
      if (left <= 1 && s->computed > 0) continue;  // decoding (scheduled above or out of budget)
      const int64_t n = std::min(left, budget);
      if (!Reserve(s, s->computed + n)) continue;
      step_.push_back({s, n});
      budget -= n;
      prefill_tokens += n;
    }
    // 3. Waiting requests, in order, while sequences, budget and blocks allow.
    while (!waiting_.empty() && budget > 0 &&
           static_cast<int64_t>(running_.size()) < o_.max_seqs) {
      Sequence* s = waiting_.front();
      const int64_t n = std::min(s->known(), budget);
      if (!Reserve(s, n)) break;
      waiting_.pop_front();
      s->admitted_order = ++admissions_;
      running_.push_back(s);
      step_.push_back({s, n});
      budget -= n;
      prefill_tokens += n;
    }
    if (step_.empty()) {
      stalled_ = true;  // nothing fits (blocks): wait for a message before trying again
      return;
    }
    const double ms = o_.base_ms + o_.per_seq_ms * static_cast<double>(step_.size()) +
                      o_.per_prefill_token_ms * static_cast<double>(prefill_tokens);
    in_step_ = true;
    step_start_ns_ = now;
    step_end_ns_ = now + static_cast<int64_t>(ms * 1e6);
  }

  void FinishStep(int64_t now) {
    in_step_ = false;
    busy_ns_ += now - std::max(step_start_ns_, window_start_ns_);
    ++steps_total_;
    for (const Scheduled& p : step_) {
      Sequence* s = p.seq;
      if (!s) continue;  // cancelled during the step
      s->computed += p.tokens;
      if (s->computed < s->known()) continue;  // more prompt to prefill
      // Every known token is computed: sample one.
      const uint32_t offset = static_cast<uint32_t>(s->generated);
      ++s->generated;
      ++generated_total_;
      proto::TokenChunk chunk;
      chunk.request_id = s->id;
      chunk.sequence = s->chunk_sequence++;
    chunk.assignment = s->assignment;
      chunk.token_offset = offset;
      chunk.token_ids = {static_cast<uint32_t>(100 + (s->id * 7919 + offset * 104729) % 20000)};
      chunk.text = " x";
      const bool done = s->generated >= s->max_generated ||
                        s->known() >= o_.context_length;
      if (done) {
        chunk.finish_reason = proto::FinishReason::kLength;
        chunk.usage = {static_cast<uint32_t>(s->prompt_len), static_cast<uint32_t>(s->generated),
                       0};
      }
      Send(chunk);
      if (done) {
        ++finished_total_;
        Remove(s);
      }
    }
    step_.clear();
    UpdateUtilization(now);
  }

  const Options o_;
  SystemClock& clock_ = SystemClock::Instance();
  zmq::context_t context_{1};
  std::unique_ptr<zmq::socket_t> socket_;
  uint64_t incarnation_ = 0;
  bool registered_ = false;
  std::optional<uint32_t> last_assignment_;  // the newest Assign taken since registering
  std::optional<uint32_t> seen_assignment_;  // the newest number a HeartbeatAck carried since
  bool refused_ = false;
  bool draining_ = false;
  int64_t last_register_ns_ = 0;
  int64_t last_heartbeat_ns_ = 0;

  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<Sequence*> running_;   // admission order
  std::deque<Sequence*> waiting_;
  int64_t used_blocks_ = 0;
  uint64_t admissions_ = 0;

  bool in_step_ = false;
  bool stalled_ = false;
  std::vector<Scheduled> step_;
  int64_t step_start_ns_ = 0;
  int64_t step_end_ns_ = 0;

  int64_t window_start_ns_ = 0;
  int64_t busy_ns_ = 0;
  float utilization_ = 0;
  uint64_t steps_total_ = 0;
  uint64_t generated_total_ = 0;
  uint64_t finished_total_ = 0;
  uint64_t preemptions_ = 0;
};

Status Validate(const Options& o) {
  if (o.coordinator.empty()) return InvalidArgument("--coordinator is required");
  if (o.model.empty()) return InvalidArgument("--model is required (the coordinator's model name)");
  if (o.replica_id.empty()) return InvalidArgument("--replica-id must not be empty");
  if (o.pool != "normal" && o.pool != "long_tail") {
    return InvalidArgument("--pool must be normal or long_tail, got '" + o.pool + "'");
  }
  if (o.context_length < 2) return InvalidArgument("--context-length must be at least 2");
  if (o.kv_blocks < 1 || o.kv_blocks > (int64_t{1} << 31)) return InvalidArgument("--kv-blocks must be >= 1");
  if (o.block_size < 1 || o.block_size > 4096) return InvalidArgument("--block-size must be 1..4096");
  if (o.max_seqs < 1 || o.max_seqs > 1 << 20) return InvalidArgument("--max-seqs must be >= 1");
  if (o.max_batch_tokens < 1) return InvalidArgument("--max-batch-tokens must be >= 1");
  if (o.max_waiting < 1) return InvalidArgument("--max-waiting must be >= 1");
  if (!(o.base_ms >= 0 && o.per_seq_ms >= 0 && o.per_prefill_token_ms >= 0)) {
    return InvalidArgument("--base-ms, --per-seq-ms and --per-prefill-token-ms must be >= 0");
  }
  if (o.heartbeat_ms < 1) return InvalidArgument("--heartbeat-ms must be >= 1");
  if (o.max_run_ms < 0) return InvalidArgument("--max-run-ms must be >= 0");
  return Status::Ok();
}

}  // namespace
}  // namespace bmad::bench

int main(int argc, char** argv) {
  using namespace bmad;
  bench::Options o;
  cli::Flags flags(
      "bmad-fake-worker --coordinator tcp://HOST:PORT --model NAME [--replica-id ID] "
      "[--pool normal|long_tail] [--base-ms X --per-seq-ms Y --per-prefill-token-ms Z] ...");
  flags.AddString("coordinator", &o.coordinator, "The coordinator's worker endpoint.");
  flags.AddString("replica-id", &o.replica_id, "Replica id to register (default fake-0).");
  flags.AddString("pool", &o.pool, "normal (default) or long_tail.");
  flags.AddString("model", &o.model, "Model name to register (must be the coordinator's).");
  flags.AddInt("context-length", &o.context_length, "Context length to register (default 4096).");
  flags.AddInt("kv-blocks", &o.kv_blocks, "KV blocks of the simulated cache (default 4096).");
  flags.AddInt("block-size", &o.block_size, "Tokens per KV block (default 16).");
  flags.AddInt("max-seqs", &o.max_seqs, "Most sequences per step (default 64).");
  flags.AddInt("max-batch-tokens", &o.max_batch_tokens,
               "Token budget per step: decodes plus prompt chunks (default 512).");
  flags.AddInt("max-waiting", &o.max_waiting, "Queue bound; past it assignments are refused (default 4096).");
  flags.AddDouble("base-ms", &o.base_ms, "Fixed cost of a step in ms (default 0).");
  flags.AddDouble("per-seq-ms", &o.per_seq_ms, "Cost per sequence in the step, ms (default 0).");
  flags.AddDouble("per-prefill-token-ms", &o.per_prefill_token_ms,
                  "Cost per prompt token computed in the step, ms (default 0).");
  flags.AddInt("heartbeat-ms", &o.heartbeat_ms, "Heartbeat interval (default 250).");
  flags.AddInt("max-run-ms", &o.max_run_ms, "Stop after this many milliseconds (0: until told).");
  flags.AddString("log-level", &o.log_level, "debug, info, warn or error (default info).");
  std::vector<std::string> positional;
  Status s = flags.Parse(std::vector<std::string>(argv + 1, argv + argc), &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && !positional.empty()) s = InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (s.ok()) s = bench::Validate(o);
  if (s.ok() && !o.log_level.empty()) {
    auto level = log::ParseLevel(o.log_level);
    if (level.ok()) {
      log::SetLevel(*level);
    } else {
      s = level.status();
    }
  }
  if (!s.ok()) {
    std::fprintf(stderr, "bmad-fake-worker: %s\n", s.message().c_str());
    return 2;
  }
  struct sigaction sa = {};
  sa.sa_handler = bench::OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  bench::FakeWorker worker(o);
  Status run = worker.Run();
  return run.ok() ? 0 : 1;
}
