#include "coordinator/server/coordinator_server.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "common/log.h"
#include "common/proto/frames.h"
#include "coordinator/http/chat_format_detect.h"
#include "coordinator/http/chat_template.h"
#include "coordinator/server/coordinator_core.h"
#include "coordinator/server/http_frontend.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/llama/llama_config.h"

namespace bmad::coord {
namespace {

constexpr const char* kLog = "coordinator";
constexpr int64_t kTickNs = 20'000'000;  // liveness, queued dispatch, gauges
// The longest a round spends on client messages (at most 256 of them): a burst of submits
// that are slow to decode or check cannot hold up the workers' messages for long.
constexpr int64_t kClientBatchNs = 50'000'000;

// `queued_per_peer`: messages ZeroMQ holds from one connection before it stops reading it (the
// peer then waits on TCP): what a peer can make us hold is about that times the message limit.
std::unique_ptr<zmq::socket_t> BindRouter(zmq::context_t& context, const std::string& endpoint,
                                          size_t max_message_bytes, int queued_per_peer,
                                          std::string* bound, Status* status) {
  auto socket = std::make_unique<zmq::socket_t>(context, zmq::socket_type::router);
  socket->set(zmq::sockopt::linger, 0);
  proto::LimitInboundMessageSize(*socket, max_message_bytes);
  socket->set(zmq::sockopt::router_mandatory, 1);  // sending to a gone peer is an error we see
  // A peer that connects again under its routing id takes it over. Without this, a connection
  // left open by a partition (its FIN lost) keeps the id, and ZeroMQ drops every message of the
  // new one: a worker that reconnected after its heartbeats timed out was never heard again.
  socket->set(zmq::sockopt::router_handover, 1);
  socket->set(zmq::sockopt::sndhwm, 100000);
  socket->set(zmq::sockopt::rcvhwm, queued_per_peer);
  socket->set(zmq::sockopt::rcvtimeo, 0);
  try {
    socket->bind(endpoint);
  } catch (const zmq::error_t& e) {
    *status = IoError("cannot bind " + endpoint + ": " + e.what());
    return nullptr;
  }
  *bound = socket->get(zmq::sockopt::last_endpoint);
  return socket;
}

// A routing id as a log can show it: a worker's is text, ZeroMQ's own are 5 binary bytes.
std::string PrintableRoutingId(const std::string& id) {
  if (std::all_of(id.begin(), id.end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f; })) return id;
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char c : id) hex.append({kDigits[c >> 4], kDigits[c & 15]});
  return hex;
}

}  // namespace

CoordinatorServer::Core::Core(const ServerConfig& config, const CoordinatorRunOptions& options)
    : config_(config),
      options_(options),
      model_name_(config.model.ServedName()),
      // Replicas serving another model are refused at registration.
      replicas_(config.coordinator, clock_, model_name_),
      router_(config.router),
      requests_(config.coordinator.max_queued_per_priority, config.coordinator.priority_classes,
                config.scheduler.policy == SchedulerPolicy::kContinuous, config.scheduler.priority_decay,
                config.scheduler.default_slo_ms),
      last_assignment_(static_cast<uint32_t>(std::random_device{}())) {}

CoordinatorServer::Core::~Core() {
  http_.reset();  // stop HTTP threads before the state they post into goes away
  tokenizer_thread_.reset();  // likewise the tokenizer thread
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status CoordinatorServer::Core::Start() {
  const ServerConfig& c = config_;
  if (c.model.path.empty()) {
    return InvalidArgument("model.path is not set (the coordinator reads the model's vocabulary)");
  }
  // Only the vocabulary and the hyperparameters: the weights are mapped but never read here.
  BMAD_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(c.model.path));
  BMAD_ASSIGN_OR_RETURN(model::LlamaConfig model_config, model::ReadLlamaConfig(*file));
  BMAD_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::LoadTokenizer(*file));
  tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  BMAD_ASSIGN_OR_RETURN(context_length_,
                        model::ContextLengthToServe(model_config, c.model.context_length, c.model.path));
  served_context_length_.store(context_length_);  // until replicas say less
  block_size_ = c.cache.block_size;
  if (!c.coordinator.api_keys_file.empty()) {
    BMAD_ASSIGN_OR_RETURN(api_keys_, ApiKeys::Load(c.coordinator.api_keys_file, clock_));
    log::Info(kLog, "clients must present an API key",
              {{"api_keys_file", c.coordinator.api_keys_file}, {"keys", api_keys_->size()}});
  }
  {
    auto jinja = file->GetString("tokenizer.chat_template");
    const std::string text = jinja.ok() ? std::string(*jinja) : std::string();
    bool detected = false;
    BMAD_ASSIGN_OR_RETURN(chat_format_, http::ChooseChatFormat(c.model.chat_template, text, &detected));
    // What a template's eos_token writes: this model's end-of-sentence token.
    const tokenizer::Vocabulary& vocabulary = tokenizer_->vocabulary();
    if (vocabulary.eos_id >= 0 && static_cast<size_t>(vocabulary.eos_id) < vocabulary.texts.size()) {
      chat_format_.eos_text = vocabulary.texts[static_cast<size_t>(vocabulary.eos_id)];
    }
    // Each parser reads the calls of one tool layout: its template must be the one in use.
    const http::ChatTemplate parser_template =
        c.model.tool_call_parser == "llama3_json" ? http::ChatTemplate::kLlama31 : http::ChatTemplate::kChatML;
    if (!c.model.tool_call_parser.empty() && (!chat_format_.tools || chat_format_.chat_template != parser_template)) {
      return InvalidArgument("model.tool_call_parser " + c.model.tool_call_parser + " reads the calls of the " +
                             std::string(http::ChatTemplateName(parser_template)) +
                             " chat template's tool layout, and this model's template (" +
                             std::string(http::ChatTemplateName(chat_format_.chat_template)) + ") " +
                             (chat_format_.tools ? "is another" : "renders no tools in a layout bmad knows") +
                             ": hermes goes with chatml templates in Qwen2.5's and Qwen3's layout, llama3_json with "
                             "Llama 3.1's (or set model.chat_template)");
    }
    if (chat_format_.default_system_unread) {
      log::Warn(kLog, "the model's chat template has a default system message bmad cannot read; chat "
                      "requests without a system message get none",
                {{"chat_template", std::string(http::ChatTemplateName(chat_format_.chat_template))},
                 {"hint", "send the system message the model expects"}});
    }
    if (c.model.chat_template.empty() && !detected) {
      // A model's own format matters: prompts in another one degrade its answers quietly.
      const std::string fallback(http::ChatTemplateName(http::kDefaultChatTemplate));
      const std::string advice =
          "set model.chat_template to one of " + http::KnownChatTemplateNames() + " if another fits";
      if (text.empty()) {
        log::Info(kLog, "the model has no chat template; chat requests use " + fallback, {{"hint", advice}});
      } else {
        log::Warn(kLog, "the model's chat template is not one bmad recognises; chat requests use " + fallback,
                  {{"hint", advice}});
      }
    }
  }

  metrics_ = std::make_unique<CoordinatorMetrics>(registry_);
  Status s;
  const auto max_message_bytes = static_cast<size_t>(c.coordinator.max_message_bytes);
  // A replica streams a chunk per running request per step: many small messages. A client
  // sends submits and cancels: 1,000 queued per connection (it was 100,000) cuts what one
  // connection can make us hold a hundredfold, though with 64 MiB messages that is still
  // large: the client socket belongs on a network of trusted clients.
  worker_socket_ = BindRouter(context_, c.coordinator.worker_endpoint, max_message_bytes, 100000,
                              &worker_endpoint_, &s);
  if (!worker_socket_) return s;
  client_socket_ = BindRouter(context_, c.coordinator.client_endpoint, max_message_bytes, 1000,
                              &client_endpoint_, &s);
  if (!client_socket_) return s;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return IoError("eventfd failed");
  tokenizer_thread_ = std::make_unique<TokenizerThread>(
      *tokenizer_,
      [this](uint64_t job, std::vector<uint32_t> tokens) {
        InboxItem item;
        item.kind = InboxItem::Kind::kTokenized;
        item.job = job;
        item.tokens = std::move(tokens);
        Post(std::move(item));
      },
      options_.before_tokenize);

  metrics_server_ = std::make_unique<metrics::MetricsServer>(registry_);
  metrics_server_->SetReady(false);  // as the API's /ready: once a replica is live (Tick)
  loop_round_ns_.store(clock_.NowNanos());  // Run starts the loop next
  metrics_server_->SetLivenessCheck([this] { return LoopTurning(); });
  BMAD_RETURN_IF_ERROR(metrics_server_->Start(c.metrics.host, static_cast<int>(c.metrics.coordinator_port)));
  http_ = std::make_unique<HttpFrontend>(*this);
  BMAD_RETURN_IF_ERROR(http_->Start(c.coordinator.http_host, static_cast<int>(c.coordinator.http_port)));
  log::Info(kLog, "coordinator ready",
            {{"model", model_name_},
             {"context", context_length_},
             {"chat_template", std::string(http::ChatTemplateName(chat_format_.chat_template))},
             {"chat_default_system", chat_format_.default_system},
             {"clients", client_endpoint_},
             {"workers", worker_endpoint_},
             {"http", "http://" + c.coordinator.http_host + ":" + std::to_string(http_->port())},
             {"metrics", metrics_server_->url()}});
  return Status::Ok();
}

int CoordinatorServer::Core::http_port() const { return http_ ? http_->port() : 0; }

void CoordinatorServer::Core::Post(InboxItem item) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_.push_back(std::move(item));
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void CoordinatorServer::Core::DrainInbox() {
  uint64_t count;
  (void)!::read(wake_fd_, &count, sizeof count);
  std::deque<InboxItem> items;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    items.swap(inbox_);
  }
  for (InboxItem& item : items) {
    if (item.kind == InboxItem::Kind::kTokenized) {
      OnTokenized(item.job, std::move(item.tokens));
      continue;
    }
    if (item.kind == InboxItem::Kind::kAbandon) {
      // The HTTP client went away: cancel its requests (one per choice). By id: a cancel may
      // end other requests (a replica found dead migrates, and may fail, its requests).
      std::vector<uint64_t> ids;
      for (const CoordRequest* r : requests_.All()) {
        if (r->http == item.stream) ids.push_back(r->id);
      }
      for (uint64_t id : ids) {
        if (CoordRequest* r = requests_.Find(id)) Cancel(r, /*tell_client=*/false);
      }
      continue;
    }
    auto stream = item.stream;
    Status accepted;
    if (stop_requested_.load()) {
      accepted = Unavailable("the coordinator is shutting down");
      uint32_t requests = 0;
      for (const SubmitInput& in : item.inputs) requests += std::max<uint32_t>(in.choices, 1);
      CountRefused(accepted, requests);
    } else {
      accepted = AcceptChoices(std::move(item.inputs), stream);
    }
    if (!accepted.ok()) {
      StreamEvent e;
      e.kind = StreamEvent::Kind::kError;
      e.status = accepted;
      e.retry_after_ms = accepted.code() == StatusCode::kResourceExhausted ? 1000 : 0;
      stream->Push(std::move(e));
    }
  }
}

void CoordinatorServer::Core::SendToWorker(const std::string& replica_id, const proto::Message& m) {
  ReplicaState* replica = replicas_.Find(replica_id);
  if (!replica) return;
  Status s = proto::SendMessage(*worker_socket_, m, replica->routing_id);
  if (!s.ok()) {
    log::Warn(kLog, "replica unreachable", {{"replica", replica_id}, {"error", s}});
    replicas_.MarkDead(replica_id);
    Migrate(replica_id);
  }
}

void CoordinatorServer::Core::HandleWorkerMessage(const std::string& routing_id, proto::Message& m) {
  if (auto* reg = std::get_if<proto::Register>(&m)) {
    if (replicas_.IsRepeatRegistration(*reg, routing_id)) {
      // A stale copy (queued while the worker was cut off): welcomed again, nothing reset.
      (void)proto::SendMessage(*worker_socket_, proto::RegisterAck{true, "welcome"}, routing_id);
      return;
    }
    const ReplicaState* before = replicas_.Find(reg->info.replica_id);
    const bool restarted = before && before->incarnation != reg->incarnation;
    std::string evicted;
    Result<const ReplicaState*> r = replicas_.Register(*reg, routing_id, &evicted);
    if (!r.ok()) {
      // A "not now" comes again each heartbeat interval until the id is free: logged when it
      // changes, and again after a minute (the same words may come from another process by
      // then). Kept per known id, which bounds the map; new ids refused while the table is
      // full (they may be made up by the thousand) share one record.
      bool log_it = true;
      if (r.status().code() == StatusCode::kUnavailable) {
        const int64_t now = clock_.NowNanos();
        if (before) {
          RegistrationRefusal& said = registration_refusals_[reg->info.replica_id];
          log_it = said.message != r.status().message() || now - said.logged_ns >= 60'000'000'000;
          if (log_it) said = {r.status().message(), now};
        } else {
          log_it = now - table_full_logged_ns_ >= 60'000'000'000;
          if (log_it) table_full_logged_ns_ = now;
        }
      }
      if (log_it) log::Warn(kLog, "replica refused", {{"replica", reg->info.replica_id}, {"error", r.status()}});
      if (r.status().code() == StatusCode::kUnavailable) {
        // Not now: the worker stays unregistered and asks again each heartbeat interval.
        (void)proto::SendMessage(*worker_socket_,
                                 proto::ErrorMessage{StatusCode::kUnavailable, r.status().message(), 0, "", 0},
                                 routing_id);
      } else {
        (void)proto::SendMessage(*worker_socket_, proto::RegisterAck{false, r.status().message()}, routing_id);
      }
      return;
    }
    registration_refusals_.erase(reg->info.replica_id);
    if (!evicted.empty()) {
      // Its slot went to this newcomer: the long-dead replica is forgotten.
      log::Info(kLog, "forgot a long-dead replica to make room", {{"replica", evicted}, {"for", reg->info.replica_id}});
      registration_refusals_.erase(evicted);
      router_.Retire(evicted);
      metrics_->ForgetReplica(evicted);
    }
    if (restarted) {
      // A new process under the same name: what the old one was computing is gone.
      router_.Forget(reg->info.replica_id);
      Migrate(reg->info.replica_id);
    }
    log::Info(kLog, "replica registered",
              {{"replica", reg->info.replica_id},
               {"pool", std::string(EnumName(reg->info.pool))},
               {"kv_blocks", reg->info.kv_blocks},
               {"metrics", reg->info.metrics_address}});
    (void)proto::SendMessage(*worker_socket_, proto::RegisterAck{true, "welcome"}, routing_id);
    DispatchQueued();
  } else if (auto* hb = std::get_if<proto::Heartbeat>(&m)) {
    const ReplicaState* before = replicas_.Find(hb->replica_id);
    const bool was_full = before != nullptr && replicas_.IsFull(*before);
    Status s = replicas_.Heartbeat(*hb, routing_id);
    if (was_full && !replicas_.IsFull(*before)) room_changed_ = true;  // its queue emptied
    if (s.code() == StatusCode::kNotFound) {
      // We restarted (or it was declared dead): ask it to register again.
      (void)proto::SendMessage(*worker_socket_,
                               proto::ErrorMessage{StatusCode::kNotFound, "unknown replica; register", 0, "", 0},
                               routing_id);
    } else if (s.ok()) {
      // The replica's proof that we are alive: its /ready fails when these stop coming.
      // With the newest Assign number sent there: its echo in a later heartbeat says every
      // Assign up to it has been read, or lost (ReassignLost).
      const ReplicaState* replica = replicas_.Find(hb->replica_id);
      proto::HeartbeatAck ack;
      if (replica != nullptr && replica->assigned) {
        ack.last_assignment = replica->last_assignment;
        ack.has_last_assignment = true;
      }
      (void)proto::SendMessage(*worker_socket_, ack, routing_id);
      CancelOrphans(hb->replica_id, hb->active_request_ids);
      ReassignLost(hb->replica_id, *hb);
    }
  } else if (auto* chunk = std::get_if<proto::TokenChunk>(&m)) {
    const ReplicaState* replica = replicas_.FindByRoutingId(routing_id);
    if (!replica) {
      // A process no replica is registered under any more (another took its id while it was
      // paused or cut off, or we restarted): what it computes reaches nobody, and it would go
      // on to max_tokens holding KV memory. Stop it, on the connection it spoke from.
      if (chunk->finish_reason == proto::FinishReason::kNone) {
        (void)proto::SendMessage(*worker_socket_, proto::WorkerCancel{chunk->request_id}, routing_id);
      }
      return;
    }
    // A step ended there: its waiting requests had their turn, and it may take more.
    if (replicas_.Progressed(replica->info.replica_id)) room_changed_ = true;
    OnChunk(replica->info.replica_id, *chunk);
  } else if (auto* err = std::get_if<proto::ErrorMessage>(&m)) {
    const ReplicaState* replica = replicas_.FindByRoutingId(routing_id);
    OnWorkerError(replica ? replica->info.replica_id : "", *err);
  } else if (auto* down = std::get_if<proto::Shutdown>(&m)) {
    // The replica is going away (a rank failed, or it was stopped): do not wait for the
    // heartbeat timeout to move its requests.
    const ReplicaState* replica = replicas_.FindByRoutingId(routing_id);
    if (!replica) return;
    const std::string id = replica->info.replica_id;
    if (down->planned) {
      // Stopped on purpose (a scale-down, a rolling update): gone, not down. Its series go, or
      // bmad_coordinator_replica_up would read 0 for good and an alert on it never clear.
      log::Info(kLog, "replica stopped", {{"replica", id}, {"reason", down->reason}});
      replicas_.MarkStopped(id);
      Migrate(id);
      metrics_->ForgetReplica(id);
      return;
    }
    log::Warn(kLog, "replica reported it is going down", {{"replica", id}, {"reason", down->reason}});
    replicas_.MarkDead(id);
    Migrate(id);
  } else {
    log::Warn(kLog, "unexpected message from a worker", {{"message", proto::MessageName(m)}});
  }
}

void CoordinatorServer::Core::HandleClientMessage(const std::string& routing_id, proto::Message& m) {
  if (auto* submit = std::get_if<proto::Submit>(&m)) {
    if (api_keys_ && !api_keys_->Accepts(submit->api_key)) {
      const Status refused = Unauthenticated(submit->api_key.empty()
                                                 ? "this coordinator wants an API key (Submit.api_key; bmad --api-key)"
                                                 : "the API key is not one this coordinator accepts");
      CountRefused(refused);
      SendClientError(routing_id, refused, submit->client_request_id, 0);
      return;
    }
    SubmitInput in;
    in.received_ns = clock_.NowNanos();
    in.client_request_id = submit->client_request_id;
    in.model = submit->model;
    in.prompt_is_tokens = submit->prompt_is_tokens;
    in.prompt_text = std::move(submit->prompt_text);
    in.prompt_tokens = std::move(submit->prompt_tokens);
    in.sampling = std::move(submit->sampling);
    in.priority = submit->priority == proto::Submit::kDefaultPriority ? config_.coordinator.DefaultPriority()
                                                                      : submit->priority;
    in.slo_ms = submit->slo_ms;
    in.stream = submit->stream;
    if (!in.prompt_is_tokens && in.prompt_text.size() > options_.tokenize_inline_max_bytes &&
        CheckPromptTextMayFit(in.prompt_text.size()).ok()) {
      // Bounded like a priority class's queue, which these would join: a client that sends
      // long prompts faster than they tokenize is told to retry later.
      if (static_cast<int64_t>(tokenizing_.size()) >= config_.coordinator.max_queued_per_priority) {
        const Status busy = ResourceExhausted(std::to_string(tokenizing_.size()) +
                                              " prompts are being tokenized; retry later");
        CountRefused(busy);
        SendClientError(routing_id, busy, in.client_request_id, 1000);
        return;
      }
      const uint64_t job = next_tokenize_job_++;
      std::string text = std::move(in.prompt_text);
      tokenizing_[job] = TokenizingSubmit{routing_id, std::move(in), false};
      tokenizer_thread_->Submit(job, std::move(text));
      return;
    }
    AcceptFromSocket(routing_id, std::move(in));
  } else if (auto* cancel = std::get_if<proto::Cancel>(&m)) {
    if (cancel->request_id == 0) {
      // Still being tokenized: it is answered (cancelled) once its tokens are back.
      for (auto& [job, t] : tokenizing_) {
        if (t.routing_id == routing_id && t.input.client_request_id == cancel->client_request_id &&
            !t.cancelled) {
          t.cancelled = true;
          return;
        }
      }
    }
    CoordRequest* r = cancel->request_id ? requests_.Find(cancel->request_id)
                                         : requests_.FindByClient(routing_id, cancel->client_request_id);
    if (!r || r->client_routing_id != routing_id) {
      SendClientError(routing_id, NotFound("no such request in progress"), cancel->client_request_id, 0);
      return;
    }
    Cancel(r, /*tell_client=*/true);
  } else if (std::holds_alternative<proto::StatusQuery>(m)) {
    (void)proto::SendMessage(*client_socket_, BuildStatus(), routing_id);
  } else {
    SendClientError(routing_id,
                    InvalidArgument("clients may send submit, cancel or status_query, not " +
                                    std::string(proto::MessageName(m))),
                    "", 0);
  }
}

void CoordinatorServer::Core::AcceptFromSocket(const std::string& routing_id, SubmitInput in) {
  const std::string client_id = in.client_request_id;
  Result<CoordRequest*> r = Accept(std::move(in), routing_id, nullptr);
  if (!r.ok()) {
    SendClientError(routing_id, r.status(), client_id,
                    r.status().code() == StatusCode::kResourceExhausted ? 1000 : 0);
    return;
  }
  (void)proto::SendMessage(*client_socket_,
                           proto::Accepted{client_id, (*r)->id, static_cast<uint32_t>((*r)->prompt.size())},
                           routing_id);
}

void CoordinatorServer::Core::RefuseUnaccepted(const TokenizingSubmit& t) {
  const Status why = t.cancelled ? Cancelled("request '" + t.input.client_request_id +
                                             "' was cancelled before it was accepted")
                                 : Unavailable("the coordinator is shutting down");
  CountRefused(why);
  SendClientError(t.routing_id, why, t.input.client_request_id, 0);
}

void CoordinatorServer::Core::RefuseTokenizing() {
  for (const auto& [job, t] : tokenizing_) RefuseUnaccepted(t);
  tokenizing_.clear();  // their tokens, when they come, find no entry and are dropped
}

void CoordinatorServer::Core::OnTokenized(uint64_t job, std::vector<uint32_t> tokens) {
  auto it = tokenizing_.find(job);
  if (it == tokenizing_.end()) return;
  TokenizingSubmit t = std::move(it->second);
  tokenizing_.erase(it);
  if (t.cancelled || stop_requested_.load()) {
    RefuseUnaccepted(t);
    return;
  }
  t.input.prompt_tokens = std::move(tokens);
  t.input.prompt_is_tokens = true;
  AcceptFromSocket(t.routing_id, std::move(t.input));
}

proto::ClusterStatus CoordinatorServer::Core::BuildStatus() const {
  proto::ClusterStatus s;
  s.model_name = model_name_;
  for (const ReplicaState* r : replicas_.All()) {
    proto::ReplicaInfo info = r->info;
    info.live = r->live;
    info.in_flight = r->in_flight;
    info.routed_total = r->routed_total;
    s.replicas.push_back(std::move(info));
  }
  s.in_flight = static_cast<uint32_t>(requests_.size());
  s.requests_total = requests_received_.load();
  for (const CoordRequest* r : const_cast<RequestTable&>(requests_).All()) {
    if (r->state == RequestState::kQueued) ++s.queued;
  }
  return s;
}

void CoordinatorServer::Core::ReadClientMessages(int limit, size_t max_bytes, int64_t until_ns,
                                                 bool refuse_submits) {
  for (int i = 0; i < limit && clock_.NowNanos() < until_ns; ++i) {
    auto in = proto::ReceiveMessage(*client_socket_, true, max_bytes);
    if (!in) break;
    if (in->other_version != 0) {
      const Status refused = FailedPrecondition(
          "this coordinator speaks protocol version " + std::to_string(proto::kProtocolVersion) +
          ", the client " + std::to_string(in->other_version) + ": use a client of the same bmad release");
      RefuseOtherVersion(*client_socket_, *in, proto::ErrorMessage{refused.code(), refused.message(), 0, "", 0},
                         "client");
      continue;
    }
    if (!in->message.ok()) {
      SendClientError(in->routing_id, in->message.status().WithContext("bad message"), "", 0);
      continue;
    }
    if (refuse_submits && std::holds_alternative<proto::Submit>(*in->message)) {
      const Status refused = Unavailable("the coordinator is shutting down");
      CountRefused(refused);
      SendClientError(in->routing_id, refused, std::get<proto::Submit>(*in->message).client_request_id, 0);
      continue;
    }
    HandleClientMessage(in->routing_id, *in->message);
  }
}

void CoordinatorServer::Core::RefuseOtherVersion(zmq::socket_t& socket, const proto::Incoming& in,
                                                 const proto::Message& answer, const char* peer) {
  // Answered in its own version, in a layout every version shares: it learns why, instead of
  // waiting for an answer that never comes. Logged once a minute per connection.
  (void)proto::SendEncoded(socket, proto::EncodeStamped(answer, in.other_version), in.routing_id);
  const int64_t now = clock_.NowNanos();
  if (version_refusals_logged_.size() > 1024) version_refusals_logged_.clear();
  int64_t& logged = version_refusals_logged_[in.routing_id];
  if (logged != 0 && now - logged < 60'000'000'000) return;
  logged = now;
  log::Warn(kLog, std::string("refused a ") + peer + " of another protocol version",
            {{"connection", PrintableRoutingId(in.routing_id)}, {"error", in.message.status()}});
}

void CoordinatorServer::Core::ReadWorkerMessages(int limit, size_t max_bytes) {
  for (int i = 0; i < limit; ++i) {
    auto in = proto::ReceiveMessage(*worker_socket_, true, max_bytes);
    if (!in) return;
    if (in->other_version != 0) {
      RefuseOtherVersion(*worker_socket_, *in,
                         proto::RegisterAck{false, "this coordinator speaks protocol version " +
                                                       std::to_string(proto::kProtocolVersion) + ", the worker " +
                                                       std::to_string(in->other_version) +
                                                       ": run the same bmad release on both"},
                         "worker");
      continue;
    }
    if (!in->message.ok()) {
      log::Warn(kLog, "undecodable message from a worker", {{"error", in->message.status()}});
      continue;
    }
    HandleWorkerMessage(in->routing_id, *in->message);
  }
}

void CoordinatorServer::Core::Tick() {
  for (const std::string& dead : replicas_.ExpireDead()) {
    log::Warn(kLog, "replica dead: no heartbeat", {{"replica", dead},
                                                  {"timeout_ms", config_.coordinator.liveness_timeout_ms}});
    router_.Forget(dead);
    Migrate(dead);
  }
  DispatchQueued();
  if (api_keys_) api_keys_->Recheck();
  live_replicas_.store(replicas_.LiveCount());
  served_context_length_.store(ServedContextLength());
  metrics_server_->SetReady(replicas_.LiveCount() > 0 && !stopping());
  metrics_->live_replicas.Set(double(replicas_.LiveCount()));
  metrics_->queue_depth.Set(double(requests_.size()));
  size_t queued = 0;
  for (const CoordRequest* r : requests_.All()) queued += r->state == RequestState::kQueued;
  metrics_->queued.Set(double(queued));
  const std::vector<ReplicaView> views = Views();
  const std::vector<double> weights = router_.Weights(views);
  const std::vector<const ReplicaState*> states = replicas_.All();
  for (size_t i = 0; i < views.size(); ++i) {
    const ReplicaView& v = views[i];
    if (i < states.size() && states[i]->stopped) continue;  // gone: its series were dropped
    metrics_->SetReplicaUp(v.id, std::string(EnumName(v.pool)), v.live);
    // A replica taken for dead carries nothing: its last heartbeat's figure would show it busy
    // on every dashboard for as long as it stays down.
    metrics_->ReplicaLoad(v.id).Set(v.live ? router_.Load(v) : 0.0);
    metrics_->ReplicaWeight(v.id).Set(weights[i]);
    metrics_->ReplicaFull(v.id).Set(v.live && v.full ? 1.0 : 0.0);
  }
}

bool CoordinatorServer::Core::NoReplicaCanServeWhatIsLeft() {
  for (const CoordRequest* r : requests_.All()) {
    if (r->state != RequestState::kQueued) return false;
  }
  for (const ReplicaState* replica : replicas_.All()) {
    if (replica->live && !replica->draining) return false;
  }
  return true;
}

bool CoordinatorServer::Core::LoopTurning() const {
  return clock_.NowNanos() - loop_round_ns_.load() <= options_.loop_stall_limit_ms * 1'000'000;
}

Status CoordinatorServer::Core::Run() {
  const int64_t start = clock_.NowNanos();
  const size_t max_bytes = static_cast<size_t>(config_.coordinator.max_message_bytes);
  int64_t stop_deadline = 0;
  while (true) {
    const int64_t now = clock_.NowNanos();
    loop_round_ns_.store(now);
    if (options_.on_loop_round) options_.on_loop_round();
    if (options_.max_run_ms > 0 && now - start > options_.max_run_ms * 1'000'000) {
      log::Warn(kLog, "stopping: max run time reached");
      break;
    }
    if (stop_requested_.load() && stop_deadline == 0) {
      log::Info(kLog, "stopping: finishing in-flight requests", {{"in_flight", requests_.size()}});
      stop_deadline = now + config_.coordinator.drain_timeout_ms * 1'000'000;
      RefuseTokenizing();  // not yet accepted: refused now, like new submits
    }
    if (stop_deadline != 0 && (requests_.size() == 0 || now >= stop_deadline)) break;
    if (stop_deadline != 0 && NoReplicaCanServeWhatIsLeft()) {
      log::Info(kLog, "stopping: no live replica takes the queued requests; not waiting out the drain",
                {{"queued", requests_.size()}});
      break;
    }

    zmq::pollitem_t items[3] = {{static_cast<void*>(*worker_socket_), 0, ZMQ_POLLIN, 0},
                                {static_cast<void*>(*client_socket_), 0, ZMQ_POLLIN, 0},
                                {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    proto::PollSockets(items, 3, std::chrono::milliseconds(10));
    // A bounded batch from each source per round keeps one busy source from starving the others.
    if (items[0].revents & ZMQ_POLLIN) ReadWorkerMessages(256, max_bytes);
    if (items[1].revents & ZMQ_POLLIN) {
      // Refused from the moment a stop is asked, not from the next round: a Submit sent after
      // RequestStop() returned is never accepted.
      ReadClientMessages(256, max_bytes, clock_.NowNanos() + kClientBatchNs,
                         /*refuse_submits=*/stop_deadline != 0 || stop_requested_.load());
    }
    if (items[2].revents & ZMQ_POLLIN) DrainInbox();
    if (now - last_tick_ns_ >= kTickNs) {
      // Liveness is judged on every heartbeat that has arrived: a round slowed down by its
      // clients must not leave heartbeats unread and declare their replicas dead.
      ReadWorkerMessages(4096, max_bytes);
      Tick();
      last_tick_ns_ = now;
    }
    if (room_changed_) {
      // Once a round, not at each message: a batch of finished requests costs one pass.
      room_changed_ = false;
      DispatchQueued();
    }
  }
  // Nobody is left without an answer: requests still running at the drain deadline (or at
  // max_run_ms) fail, their replicas told to stop them; what is being tokenized, and HTTP
  // submits posted meanwhile, are refused. HTTP handlers wait on these answers, and the server
  // joins its handlers when it stops.
  stop_requested_.store(true);
  // Submits already on their way to the client socket (come during the last round, or past a
  // round's batch) are answered too: refused, counted. Read until none has come for 50 ms (at
  // most half a second): the socket closes after this, and whatever is left is lost unanswered.
  const int64_t last_reads_until = clock_.NowNanos() + 500'000'000;
  while (clock_.NowNanos() < last_reads_until) {
    zmq::pollitem_t client_item{static_cast<void*>(*client_socket_), 0, ZMQ_POLLIN, 0};
    proto::PollSockets(&client_item, 1, std::chrono::milliseconds(50));
    if (!(client_item.revents & ZMQ_POLLIN)) break;
    ReadClientMessages(1 << 16, max_bytes, last_reads_until, /*refuse_submits=*/true);
  }
  if (requests_.size() > 0) {
    log::Warn(kLog, "stopping with requests unfinished: failing them", {{"requests", requests_.size()}});
  }
  FailAll(Unavailable("the coordinator stopped before the request finished"));
  RefuseTokenizing();
  DrainInbox();
  // Those last answers, and the cancels to replicas, are only queued: closing with linger 0
  // would drop what the I/O thread has not sent yet. A peer that cannot take them within a
  // second loses them.
  client_socket_->set(zmq::sockopt::linger, 1000);
  worker_socket_->set(zmq::sockopt::linger, 1000);
  loop_done_.store(true);
  log::Info(kLog, "coordinator stopped", {{"requests", requests_received_.load()}});
  return Status::Ok();
}

// ---- the public facade ----

CoordinatorServer::CoordinatorServer(std::unique_ptr<Core> core) : core_(std::move(core)) {}
CoordinatorServer::~CoordinatorServer() = default;

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(const ServerConfig& config,
                                                                     const CoordinatorRunOptions& options) {
  auto core = std::make_unique<Core>(config, options);
  BMAD_RETURN_IF_ERROR(core->Start());
  return std::unique_ptr<CoordinatorServer>(new CoordinatorServer(std::move(core)));
}

Status CoordinatorServer::Run() { return core_->Run(); }
void CoordinatorServer::RequestStop() { core_->RequestStop(); }
int CoordinatorServer::http_port() const { return core_->http_port(); }
int CoordinatorServer::metrics_port() const { return core_->metrics_port(); }
std::string CoordinatorServer::client_endpoint() const { return core_->client_endpoint(); }
std::string CoordinatorServer::worker_endpoint() const { return core_->worker_endpoint(); }

}  // namespace bmad::coord
