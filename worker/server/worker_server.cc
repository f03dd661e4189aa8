#include "worker/server/worker_server.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <random>
#include <unordered_map>

#include <zmq.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/log_throttle.h"
#include "common/metrics/metrics_server.h"
#include "common/metrics/registry.h"
#include "common/proto/frames.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/engine/engine.h"
#include "worker/model/llama/llama_model.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/server/replica.h"
#include "worker/server/step_heartbeat.h"

namespace bmad::worker {
namespace {

constexpr const char* kLog = "worker";

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

struct WorkerServer::Impl {
  ServerConfig config;
  WorkerRunOptions options;
  SystemClock& clock = SystemClock::Instance();
  metrics::Registry registry;
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  std::unique_ptr<Replica> replica;
  engine::Engine* engine = nullptr;
  zmq::context_t context{1};
  std::unique_ptr<zmq::socket_t> socket;
  std::unique_ptr<StepHeartbeat> step_heartbeat;  // uses `socket`: declared after it
  uint64_t incarnation = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> stop_now{false};
  bool registered = false;
  // The coordinator answers each heartbeat; past its liveness timeout without a word from it,
  // this replica reports itself not ready (a dead or cut-off coordinator sends it no work).
  bool coordinator_silent = false;
  int64_t last_heard_ns = 0;
  // While unregistered: when it began asking, and when it last said it gets no answer.
  int64_t asking_since_ns = 0;
  int64_t unanswered_said_ns = 0;
  int64_t last_register_ns = 0;
  // Failed sends (a coordinator unreachable past the send queue's limit fails one per chunk):
  // one line per 10 seconds, with the count left unsaid.
  log::Throttle send_failure_log{10'000'000'000};
  int64_t last_heartbeat_ns = 0;
  int64_t last_plan_ns = 0;  // the last step or keepalive sent to the other ranks
  int64_t draining_since_ns = 0;  // when the engine started draining (0: it is not)
  // Per request: the number of the assignment being served (echoed on its chunks and errors, so
  // the coordinator can tell it from an older copy under the same id) and the next chunk number.
  struct Served {
    uint32_t assignment = 0;
    uint32_t next_sequence = 0;
  };
  std::unordered_map<uint64_t, Served> served;
  std::vector<engine::RequestOutput> outputs;
  std::vector<engine::EngineRequest> replacements;  // assignments waiting for the next step's end
  // The newest Assign taken since the last registration, for the heartbeat: the coordinator
  // reassigns a request assigned no later that this replica does not hold.
  std::optional<uint32_t> last_assignment;
  // The newest HeartbeatAck::last_assignment heard since registering (Heartbeat::seen_assignment).
  std::optional<uint32_t> seen_assignment;
  Status refused;  // the coordinator refused to register this replica
  // The coordinator's latest "not now" to a registration (another live process holds the id):
  // repeated each heartbeat interval, logged when it first comes or changes.
  std::string unavailable_said;

  // The replica's communicators outlive this (the ranks meet once more before MPI ends): they
  // must not observe into `registry` after it is gone.
  ~Impl() { ForEachCommunicator([](parallel::Communicator& comm) { comm.set_metrics(nullptr); }); }
  template <typename F>
  void ForEachCommunicator(F&& f) {
    if (!options.rank.comms) return;
    for (parallel::Communicator* comm :
         {static_cast<parallel::Communicator*>(options.rank.comms->replica.get()),
          static_cast<parallel::Communicator*>(options.rank.comms->tp.get()),
          static_cast<parallel::Communicator*>(options.rank.comms->pp.get())}) {
      if (comm) f(*comm);
    }
  }

  Status Load();
  proto::ReplicaInfo Info() const;
  void Send(const proto::Message& m);
  void SendRegister();
  proto::Heartbeat HeartbeatMessage() const;
  void SendHeartbeat();
  void SendOutput(engine::RequestOutput& out);
  // /ready: registered, heard from the coordinator lately, and not draining.
  void UpdateReady();
  void Heard(int64_t now_ns);
  void CheckCoordinatorSilence(int64_t now_ns);
  void Add(engine::EngineRequest r);
  void AddReplacements();
  std::vector<engine::EngineRequest>::iterator FindReplacement(uint64_t id);
  // Returns false when the worker must stop.
  bool Handle(proto::Message& m);
};

Status WorkerServer::Impl::Load() {
  const ServerConfig& c = config;
  metrics_server = std::make_unique<metrics::MetricsServer>(registry);
  metrics::ExportBuildInfo(registry, {{"replica", c.worker.replica_id}});
  const int64_t wanted_port = c.metrics.worker_port == 0 ? 0 : c.metrics.worker_port + options.replica_index;
  if (wanted_port > 65535) {
    return InvalidArgument("metrics.worker_port " + std::to_string(c.metrics.worker_port) + " + replica index " +
                           std::to_string(options.replica_index) + " is port " + std::to_string(wanted_port) +
                           ", past 65535");
  }
  const auto port = static_cast<int>(wanted_port);
  metrics_server->SetReady(false);  // until registered (UpdateReady)
  BMAD_RETURN_IF_ERROR(metrics_server->Start(c.metrics.host, port));
  if (options.rank.comms) {
    // The replica's communication time: bmad_comm_seconds{op} on this leader's /metrics.
    ForEachCommunicator([&](parallel::Communicator& comm) { comm.set_metrics(&registry, c.worker.replica_id); });
  } else {
    for (int op = 0; op < parallel::kNumCommOps; ++op) {
      parallel::CommSeconds(registry, static_cast<parallel::CommOp>(op), c.worker.replica_id);
    }
  }
  log::Info(kLog, "loading the model", {{"replica", c.worker.replica_id}, {"model", c.model.path}});
  BMAD_ASSIGN_OR_RETURN(replica, Replica::Create(c, &registry, clock, options.rank));
  engine = &replica->engine();

  incarnation = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
  socket->set(zmq::sockopt::linger, 0);
  socket->set(zmq::sockopt::sndhwm, 100000);
  socket->set(zmq::sockopt::rcvhwm, 100000);
  // ZeroMQ's own heartbeats: a coordinator gone without closing the connection (its node died, a
  // partition) is noticed within the liveness timeout and the socket connects again, resolving
  // the endpoint's name anew (a restarted coordinator's address behind its Service). Without
  // them TCP retransmits for about 15 minutes first.
  socket->set(zmq::sockopt::heartbeat_ivl, static_cast<int>(std::min<int64_t>(c.worker.heartbeat_ms, 60000)));
  socket->set(zmq::sockopt::heartbeat_timeout,
              static_cast<int>(std::min<int64_t>(c.coordinator.liveness_timeout_ms, 3600000)));
  proto::LimitInboundMessageSize(*socket, static_cast<size_t>(c.coordinator.max_message_bytes));
  socket->set(zmq::sockopt::routing_id, c.worker.replica_id + "/" + Hex(incarnation));
  socket->connect(c.coordinator.worker_endpoint);
  // A hung step fails /health, so that a liveness probe restarts the process (the coordinator
  // has moved its requests by then). The metrics server outlives the heartbeat's thread.
  step_heartbeat = std::make_unique<StepHeartbeat>(
      *socket, c.worker.heartbeat_ms, c.parallel.step_timeout_ms,
      [server = metrics_server.get()](bool hung) { server->SetHealthy(!hung); });
  log::Info(kLog, "replica ready",
            {{"replica", c.worker.replica_id},
             {"pool", std::string(EnumName(c.worker.pool))},
             {"model", replica->model().config().Summary()},
             {"kv_blocks", replica->num_blocks() - 1},  // usable, as the coordinator is told (0 is reserved)
             {"block_size", c.cache.block_size},
             {"memory", replica->MemorySummary()},
             {"metrics", metrics_server->url()},
             {"coordinator", c.coordinator.worker_endpoint}});
  return Status::Ok();
}

proto::ReplicaInfo WorkerServer::Impl::Info() const {
  proto::ReplicaInfo i;
  i.replica_id = config.worker.replica_id;
  i.pool = config.worker.pool;
  i.tp = static_cast<uint32_t>(config.parallel.tp);
  i.pp = static_cast<uint32_t>(config.parallel.pp);
  i.kv_blocks = static_cast<uint32_t>(replica->num_blocks() - 1);
  i.block_size = static_cast<uint32_t>(config.cache.block_size);
  i.max_seqs = static_cast<uint32_t>(config.scheduler.max_seqs);
  i.model_name = replica->model_name();
  i.context_length = static_cast<uint32_t>(engine->context_length());
  i.metrics_address = config.metrics.host + ":" + std::to_string(metrics_server->port());
  i.load = engine->Load();
  return i;
}

void WorkerServer::Impl::Send(const proto::Message& m) {
  Status s = proto::SendMessage(*socket, m);
  uint64_t unsaid = 0;
  if (s.ok() || !send_failure_log.Allow(clock.NowNanos(), &unsaid)) return;
  log::Warn(kLog, "cannot send to the coordinator",
            {{"message", proto::MessageName(m)}, {"error", s}, {"more_failed_unsaid", unsaid}});
}

void WorkerServer::Impl::SendRegister() {
  // Numbers from a coordinator before this registration mean nothing to the next.
  last_assignment.reset();
  seen_assignment.reset();
  if (asking_since_ns == 0) asking_since_ns = clock.NowNanos();
  Send(proto::Register{Info(), incarnation});
  last_register_ns = clock.NowNanos();
}

proto::Heartbeat WorkerServer::Impl::HeartbeatMessage() const {
  // Held: the engine's requests and the replacements waiting for the step in flight to end,
  // each with the assignment it is served under.
  std::vector<uint64_t> held = engine->ActiveRequestIds();
  for (const engine::EngineRequest& r : replacements) held.push_back(r.id);
  std::vector<uint32_t> numbers;
  numbers.reserve(held.size());
  for (uint64_t id : held) {
    const auto it = served.find(id);
    numbers.push_back(it != served.end() ? it->second.assignment : 0);
  }
  return proto::Heartbeat{config.worker.replica_id,  engine->Load(),
                          std::move(held),            last_assignment.value_or(0),
                          last_assignment.has_value(), std::move(numbers),
                          seen_assignment.value_or(0), seen_assignment.has_value()};
}

void WorkerServer::Impl::SendHeartbeat() {
  Send(HeartbeatMessage());
  last_heartbeat_ns = clock.NowNanos();
}

void WorkerServer::Impl::SendOutput(engine::RequestOutput& out) {
  Served& served_as = served[out.id];
  if (out.reason == proto::FinishReason::kError) {
    Send(proto::ErrorMessage{out.error_code, out.error, out.id, "", 0, served_as.assignment});
  } else {
    proto::TokenChunk chunk;
    chunk.request_id = out.id;
    chunk.sequence = served_as.next_sequence++;
    chunk.assignment = served_as.assignment;
    chunk.token_offset = static_cast<uint32_t>(out.token_offset);
    chunk.token_ids.assign(out.token_ids.begin(), out.token_ids.end());
    chunk.text = std::move(out.text);
    chunk.logprobs = std::move(out.logprobs);
    chunk.top_token_ids.assign(out.top_token_ids.begin(), out.top_token_ids.end());
    chunk.top_logprobs = std::move(out.top_logprobs);
    chunk.finish_reason = out.reason;
    chunk.stop_string = out.stop_string;
    chunk.stop_token_id = out.stop_token_id;
    chunk.usage = out.usage;
    chunk.prompt_logprob_offset = static_cast<uint32_t>(out.prompt_logprob_offset);
    chunk.prompt_logprobs = std::move(out.prompt_logprobs);
    chunk.prompt_ranks = std::move(out.prompt_ranks);
    chunk.prompt_top_token_ids.assign(out.prompt_top_token_ids.begin(), out.prompt_top_token_ids.end());
    chunk.prompt_top_logprobs = std::move(out.prompt_top_logprobs);
    Send(chunk);
  }
  if (out.finished) served.erase(out.id);
}

void WorkerServer::Impl::UpdateReady() {
  metrics_server->SetReady(registered && !coordinator_silent && !engine->draining());
}

void WorkerServer::Impl::Heard(int64_t now_ns) {
  last_heard_ns = now_ns;
  if (!coordinator_silent) return;
  coordinator_silent = false;
  log::Info(kLog, "the coordinator answers again");
  UpdateReady();
}

void WorkerServer::Impl::CheckCoordinatorSilence(int64_t now_ns) {
  const int64_t limit_ns = config.coordinator.liveness_timeout_ms * 1'000'000;
  if (!registered) {
    // No answer to the registrations at all (a mistyped endpoint, a coordinator not up): said
    // after the liveness timeout, then once a minute, while it goes on asking.
    constexpr int64_t kRepeatNs = 60'000'000'000;
    const int64_t since = std::max(asking_since_ns, last_heard_ns);
    if (asking_since_ns != 0 && now_ns - since > limit_ns &&
        (unanswered_said_ns == 0 || now_ns - unanswered_said_ns >= kRepeatNs)) {
      log::Warn(kLog, "not registered: no answer from the coordinator; still asking every heartbeat",
                {{"silent_ms", (now_ns - since) / 1'000'000}, {"coordinator", config.coordinator.worker_endpoint}});
      unanswered_said_ns = now_ns;
    }
    return;
  }
  if (coordinator_silent || now_ns - last_heard_ns <= limit_ns) return;
  coordinator_silent = true;
  log::Warn(kLog, "no word from the coordinator: not ready until it answers",
            {{"silent_ms", (now_ns - last_heard_ns) / 1'000'000},
             {"coordinator", config.coordinator.worker_endpoint}});
  UpdateReady();
}

void WorkerServer::Impl::Add(engine::EngineRequest r) {
  const uint64_t id = r.id;
  Status s = engine->Add(std::move(r));
  if (!s.ok()) {
    log::Warn(kLog, "assignment refused", {{"request", id}, {"error", s}});
    Send(proto::ErrorMessage{s.code(), s.message(), id, "", 0, served[id].assignment});
    served.erase(id);
  }
}

void WorkerServer::Impl::AddReplacements() {
  for (engine::EngineRequest& r : replacements) Add(std::move(r));
  replacements.clear();
}

std::vector<engine::EngineRequest>::iterator WorkerServer::Impl::FindReplacement(uint64_t id) {
  return std::find_if(replacements.begin(), replacements.end(),
                      [&](const engine::EngineRequest& q) { return q.id == id; });
}

bool WorkerServer::Impl::Handle(proto::Message& m) {
  if (auto* a = std::get_if<proto::Assign>(&m)) {
    last_assignment = a->assignment;
    engine::EngineRequest r;
    r.id = a->request_id;
    r.prompt.assign(a->prompt_tokens.begin(), a->prompt_tokens.end());
    r.generated.assign(a->generated_tokens.begin(), a->generated_tokens.end());
    r.sampling = a->sampling;
    r.priority = a->priority;
    r.slo_ms = a->slo_ms;
    auto queued = FindReplacement(r.id);
    if (queued != replacements.end()) {
      // Given back twice within one step: the latest assignment wins.
      r.replaces_copy = true;
      r.received_ns = clock.NowNanos();
      *queued = std::move(r);
      served[queued->id] = Served{a->assignment, 0};
      return true;
    }
    if (engine->DropReplaced(r.id)) {
      // We already run this id. The coordinator took us for dead (a stall longer than its
      // liveness timeout), moved the request and has now given it back, from the tokens the
      // client has; or it restarted and reuses the id for a new request. Either way its
      // assignment is what counts: the old copy goes, silently (the coordinator has finished
      // with it). The new one is added after the next step, when no step in flight can still
      // hold the old copy's tokens under the same id.
      // It takes the copy's place: a draining or full replica does not refuse it (the copy's
      // work would be lost for nothing).
      log::Info(kLog, "assignment replaces the running copy of the request", {{"request", r.id}});
      r.replaces_copy = true;
      r.received_ns = clock.NowNanos();
      served[r.id] = Served{a->assignment, 0};
      replacements.push_back(std::move(r));
      return true;
    }
    served[r.id] = Served{a->assignment, 0};
    Add(std::move(r));
  } else if (auto* c = std::get_if<proto::WorkerCancel>(&m)) {
    engine::RequestOutput final_output;
    auto queued = FindReplacement(c->request_id);
    if (queued != replacements.end()) {
      // A replacement not added yet: it ends here, as a running request would.
      final_output = engine->CancelUnadded(*queued);
      replacements.erase(queued);
      SendOutput(final_output);
    } else if (engine->Cancel(c->request_id, &final_output)) {
      SendOutput(final_output);
    }
  } else if (std::holds_alternative<proto::Drain>(m)) {
    log::Info(kLog, "draining: finishing running requests, accepting none");
    engine->StartDraining();
    UpdateReady();
  } else if (auto* sd = std::get_if<proto::Shutdown>(&m)) {
    log::Info(kLog, "shutdown requested by the coordinator", {{"reason", sd->reason}});
    return false;
  } else if (auto* ack = std::get_if<proto::RegisterAck>(&m)) {
    if (!ack->accepted) {
      // An error exit, so that mpirun, cluster.sh or Kubernetes see the replica fail.
      refused = FailedPrecondition("the coordinator refused this replica: " + ack->message);
      return false;
    }
    if (!registered) log::Info(kLog, "registered with the coordinator");
    registered = true;
    asking_since_ns = unanswered_said_ns = 0;
    unavailable_said.clear();
    UpdateReady();
  } else if (auto* hb_ack = std::get_if<proto::HeartbeatAck>(&m)) {
    // Heard. Every Assign sent before this ack has been read by now, if it came at all (one
    // connection keeps the order): the next heartbeat says so, and what it does not hold of
    // them was lost on the way.
    if (hb_ack->has_last_assignment) seen_assignment = hb_ack->last_assignment;
  } else if (auto* err = std::get_if<proto::ErrorMessage>(&m)) {
    if (err->code == StatusCode::kNotFound) {
      // The coordinator restarted and does not know us: register again. At most once a
      // heartbeat interval (the loop asks again after that while unregistered): after an
      // outage, the heartbeats queued meanwhile arrive at once, each answered "not found", and a
      // Register for each would make the coordinator register this replica over and over.
      registered = false;
      UpdateReady();
      if (clock.NowNanos() - last_register_ns > config.worker.heartbeat_ms * 1'000'000) SendRegister();
    } else if (err->code == StatusCode::kUnavailable && !registered) {
      // Not registered yet, and asked to wait: the registration is sent again each interval.
      if (err->message != unavailable_said) {
        log::Warn(kLog, "the coordinator cannot register this replica yet; asking again every heartbeat",
                  {{"message", err->message}});
        unavailable_said = err->message;
      }
    } else {
      log::Warn(kLog, "error from the coordinator", {{"message", err->message}});
    }
  } else {
    log::Warn(kLog, "unexpected message from the coordinator",
              {{"message", proto::MessageName(m)}});
  }
  return true;
}

WorkerServer::WorkerServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorkerServer::~WorkerServer() = default;

bool WorkerServer::refused() const { return !impl_->refused.ok(); }

Result<std::unique_ptr<WorkerServer>> WorkerServer::Create(const ServerConfig& config,
                                                           const WorkerRunOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = options;
  BMAD_RETURN_IF_ERROR(impl->Load());
  return std::unique_ptr<WorkerServer>(new WorkerServer(std::move(impl)));
}

void WorkerServer::RequestStop() { impl_->stop_requested.store(true); }

void WorkerServer::RequestStopNow() {
  impl_->stop_now.store(true);
  impl_->stop_requested.store(true);
}

int WorkerServer::metrics_port() const { return impl_->metrics_server->port(); }

Status WorkerServer::Run() {
  Impl& w = *impl_;
  const int64_t heartbeat_ns = w.config.worker.heartbeat_ms * 1'000'000;
  const int64_t start_ns = w.clock.NowNanos();
  const size_t max_bytes = static_cast<size_t>(w.config.coordinator.max_message_bytes);
  parallel::LeaderExecutor* ranks = w.replica->leader_executor();
  // Keepalives come well within the other ranks' wait for the next plan.
  const int64_t keepalive_ns = w.config.parallel.step_timeout_ms * 1'000'000 / 4;
  w.SendRegister();
  w.SendHeartbeat();
  bool stopping = false;
  bool drain_expired = false;
  Status failure;
  w.last_plan_ns = w.clock.NowNanos();
  while (true) {
    if (w.stop_now.load()) break;
    const int64_t now = w.clock.NowNanos();
    if (ranks && !w.engine->HasWork() && now - w.last_plan_ns >= keepalive_ns) {
      failure = ranks->Keepalive();
      if (!failure.ok()) break;
      w.last_plan_ns = now;
    }
    if (w.options.max_run_ms > 0 && now - start_ns > w.options.max_run_ms * 1'000'000) {
      log::Warn(kLog, "stopping: max run time reached");
      break;
    }
    if (w.stop_requested.load() && !w.engine->draining()) {
      log::Info(kLog, "stop requested: draining");
      w.engine->StartDraining();
      w.UpdateReady();
    }
    if (w.engine->draining() && !w.engine->HasWork()) break;
    if (w.engine->draining()) {
      if (w.draining_since_ns == 0) w.draining_since_ns = now;
      const int64_t bound_ns = w.config.worker.drain_timeout_ms * 1'000'000;
      if (bound_ns > 0 && now - w.draining_since_ns >= bound_ns) {
        // Past the bound (a pod's grace period ends soon): what still runs moves, not dies.
        drain_expired = true;
        break;
      }
    }
    // Until registered, ask again every heartbeat interval (the coordinator may start later).
    if (!w.registered && now - w.last_register_ns > heartbeat_ns) w.SendRegister();
    if (now - w.last_heartbeat_ns >= heartbeat_ns) w.SendHeartbeat();

    // Wait for messages only when there is nothing to compute.
    int64_t wait_ns = w.last_heartbeat_ns + heartbeat_ns - now;
    if (ranks) wait_ns = std::min(wait_ns, w.last_plan_ns + keepalive_ns - now);
    const int64_t wait_ms = w.engine->HasWork() ? 0 : std::max<int64_t>(1, wait_ns / 1'000'000);
    zmq::pollitem_t item{static_cast<void*>(*w.socket), 0, ZMQ_POLLIN, 0};
    proto::PollSockets(&item, 1, std::chrono::milliseconds(wait_ms));
    if (item.revents & ZMQ_POLLIN) {
      w.socket->set(zmq::sockopt::rcvtimeo, 0);
      while (auto in = proto::ReceiveMessage(*w.socket, /*routed=*/false, max_bytes)) {
        if (!in->message.ok()) {
          log::Warn(kLog, "undecodable message from the coordinator", {{"error", in->message.status()}});
          continue;
        }
        if (!w.Handle(*in->message)) {
          stopping = true;
          break;
        }
        // After Handle: an "unknown replica" answer unregisters first, so /ready never reads
        // 200 in between.
        w.Heard(w.clock.NowNanos());
      }
    }
    if (stopping) break;
    // Only now, with every message that came during the last step read.
    w.CheckCoordinatorSilence(w.clock.NowNanos());
    if (!w.engine->HasWork()) w.AddReplacements();  // no step in flight
    if (w.engine->HasWork()) {
      w.outputs.clear();
      // A step may outlast the coordinator's liveness timeout: heartbeats go on meanwhile.
      w.step_heartbeat->Begin(w.HeartbeatMessage(), w.last_heartbeat_ns);
      failure = w.engine->Step(&w.outputs);
      w.last_heartbeat_ns = w.step_heartbeat->End();
      w.last_plan_ns = w.clock.NowNanos();
      for (engine::RequestOutput& out : w.outputs) w.SendOutput(out);
      if (!failure.ok()) break;
      w.AddReplacements();
    }
  }
  // The last messages (a Shutdown, the final heartbeat) get out before the socket closes, unless
  // the coordinator cannot take them within a second.
  w.socket->set(zmq::sockopt::linger, 1000);
  if (!failure.ok()) {
    // The replica cannot compute any more: the coordinator moves its requests elsewhere now,
    // rather than after the heartbeat timeout.
    log::Error(kLog, "replica failed; exiting", {{"replica", w.config.worker.replica_id}, {"error", failure}});
    w.Send(proto::Shutdown{"replica " + w.config.worker.replica_id + " failed: " + failure.ToString()});
    // A failed rank of an MPI job leaves by _Exit (worker_main: no destructors, MPI may hold a
    // collective), which dropped the Shutdown still queued in ZeroMQ about half the time: the
    // coordinator then moved the requests only at its liveness timeout. Ending the context here
    // waits for it to go out (up to the linger above); the socket is the context's only one.
    w.socket->close();
    w.context.close();
    return failure;
  }
  if ((w.stop_now.load() || drain_expired) && w.engine->HasWork()) {
    const size_t running = w.engine->ActiveRequestIds().size();
    log::Warn(kLog,
              drain_expired ? "draining past worker.drain_timeout_ms: stopping without finishing the running "
                              "requests, the coordinator moves them"
                            : "stopping now, without finishing the running requests: the coordinator moves them",
              {{"replica", w.config.worker.replica_id}, {"requests", static_cast<int64_t>(running)}});
    // No final heartbeat after it: that would make the replica look live again.
    w.Send(proto::Shutdown{"replica " + w.config.worker.replica_id + " was stopped before " +
                               std::to_string(running) + " running request(s) finished",
                           /*planned=*/true});
    if (ranks) (void)ranks->Shutdown("the leader stopped");
    log::Info(kLog, "replica stopped", {{"replica", w.config.worker.replica_id}});
    return Status::Ok();
  }
  if (!w.refused.ok()) {
    if (ranks) (void)ranks->Shutdown("the coordinator refused the replica");
    return w.refused;
  }
  if (ranks) {
    Status s = ranks->Shutdown("the leader stopped");
    if (!s.ok()) log::Warn(kLog, "cannot tell the other ranks to stop", {{"error", s}});
  }
  if (w.engine->draining()) {
    // Assignments that came during the last step are refused now (the engine is draining), not
    // left unread for the coordinator to time out.
    w.socket->set(zmq::sockopt::rcvtimeo, 0);
    while (auto in = proto::ReceiveMessage(*w.socket, /*routed=*/false, max_bytes)) {
      if (in->message.ok() && std::holds_alternative<proto::Assign>(*in->message)) {
        (void)w.Handle(*in->message);
      }
    }
  }
  // The coordinator learns the replica is gone at once: it routes around it and moves anything
  // it still counts as dispatched here (a final heartbeat made it look live until the liveness
  // timeout instead).
  w.Send(proto::Shutdown{"replica " + w.config.worker.replica_id + " stopped" +
                             (w.engine->draining() ? " after draining" : ""),
                         /*planned=*/true});
  log::Info(kLog, "replica stopped", {{"replica", w.config.worker.replica_id}});
  return Status::Ok();
}

}  // namespace bmad::worker
