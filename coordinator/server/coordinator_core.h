// The coordinator's event loop and all the state it owns (see coordinator_server.h). Internal:
// only coordinator_server.cc, coordinator_requests.cc and http_frontend.cc include it.
#pragma once

#include <atomic>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "common/clock.h"
#include "common/config/config.h"
#include "common/metrics/metrics_server.h"
#include "common/metrics/registry.h"
#include "common/proto/frames.h"
#include "common/proto/messages.h"
#include "coordinator/http/chat_template.h"
#include "coordinator/router/replica_registry.h"
#include "coordinator/router/router.h"
#include "coordinator/server/api_keys.h"
#include "coordinator/server/coordinator_metrics.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/http_stream.h"
#include "coordinator/server/request_table.h"
#include "coordinator/server/submit_input.h"
#include "coordinator/server/tokenizer_thread.h"
#include "worker/model/tokenizer/tokenizer.h"

namespace bmad::coord {

class HttpFrontend;

// What HTTP handler threads and the tokenizer thread send to the loop.
struct InboxItem {
  enum class Kind { kSubmit, kAbandon, kTokenized } kind = Kind::kSubmit;
  std::vector<SubmitInput> inputs;  // kSubmit: one per prompt of the HTTP request
  std::shared_ptr<HttpStream> stream;
  uint64_t job = 0;               // kTokenized: the socket submit's tokenizing job
  std::vector<uint32_t> tokens;   //   and its prompt's tokens
};

class CoordinatorServer::Core {
 public:
  Core(const ServerConfig& config, const CoordinatorRunOptions& options);
  ~Core();
  Status Start();
  Status Run();
  void RequestStop() { stop_requested_.store(true); }
  bool stopping() const { return stop_requested_.load(); }
  // False once the event loop has not turned for options.loop_stall_limit_ms (any thread).
  bool LoopTurning() const;
  int64_t loop_stall_limit_ms() const { return options_.loop_stall_limit_ms; }
  // The event loop has returned: nothing posted now is read.
  bool loop_done() const { return loop_done_.load(); }
  // From any thread: queue an item for the loop and wake it.
  void Post(InboxItem item);

  // Read-only facts the HTTP frontend needs (set before Start returns, never change).
  const std::string& model_name() const { return model_name_; }
  int64_t context_length() const { return context_length_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const http::ChatFormat& chat_format() const { return chat_format_; }
  size_t live_replicas() const { return live_replicas_.load(); }
  // The context the live replicas serve (vLLM's max_model_len): the model's, or less where every
  // replica's KV cache holds less. Any thread; as of the event loop's last tick.
  int64_t served_context_length() const { return served_context_length_.load(); }
  metrics::Registry& registry() { return registry_; }
  const ServerConfig& config() const { return config_; }
  // The keys clients must present; null when coordinator.api_keys_file is empty. Any thread.
  ApiKeys* api_keys() const { return api_keys_.get(); }
  // Counts requests an HTTP handler refused itself (a body that does not parse, prompts that
  // cannot be read, the event loop gone) as CountRefused counts those the loop refuses, so that
  // the metrics do not depend on the door. Any thread: the series it touches exist from the start.
  void CountRefusedHttp(const Status& why, uint32_t requests = 1) { CountRefused(why, requests); }
  // Counts a completion request refused for want of a valid key. Any thread.
  void CountUnauthenticatedHttp() {
    ++requests_received_;
    metrics_->requests_total.Increment();
    metrics_->rejected_unauthenticated->Increment();
  }
  // Another API call (models, tokenize) refused so: a rejection, not a request to the cluster.
  void CountUnauthenticatedOther() { metrics_->rejected_unauthenticated->Increment(); }
  // OK when a text prompt of this many bytes may fit the context; else the OutOfRange error its
  // client gets, without tokenizing it (4 MB took seconds). Any thread.
  Status CheckPromptTextMayFit(size_t bytes) const;

  int http_port() const;
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }
  std::string client_endpoint() const { return client_endpoint_; }
  std::string worker_endpoint() const { return worker_endpoint_; }

 private:
  // Sockets and periodic work (coordinator_server.cc).
  void HandleWorkerMessage(const std::string& routing_id, proto::Message& message);
  void HandleClientMessage(const std::string& routing_id, proto::Message& message);
  // A socket submit whose prompt is tokens (or short text): accept it, answer Accepted or an
  // error.
  void AcceptFromSocket(const std::string& routing_id, SubmitInput input);
  // A long text prompt's tokens are back from the tokenizer thread.
  void OnTokenized(uint64_t job, std::vector<uint32_t> tokens);
  struct TokenizingSubmit;
  // Answers a submit that will not be accepted: cancelled if its client cancelled it, else
  // refused (stopping).
  void RefuseUnaccepted(const TokenizingSubmit& t);
  // Answers every submit still being tokenized that way (stopping).
  void RefuseTokenizing();
  void DrainInbox();
  // Reads and handles up to `limit` messages waiting on the worker socket, without waiting.
  void ReadWorkerMessages(int limit, size_t max_bytes);
  // Reads up to `limit` messages from the client socket, until `until_ns`; with `refuse_submits`
  // (stopping) a Submit is answered "shutting down" instead of accepted.
  void ReadClientMessages(int limit, size_t max_bytes, int64_t until_ns, bool refuse_submits);
  // Answers a message of another protocol version with `answer`, stamped with its version.
  void RefuseOtherVersion(zmq::socket_t& socket, const proto::Incoming& in, const proto::Message& answer,
                          const char* peer);
  void Tick();
  // Stopping: true when the drain can answer no one, every request left queued with no live
  // replica that takes new work (none registered, or each one draining too); they would only
  // fail at the deadline.
  bool NoReplicaCanServeWhatIsLeft();
  void SendToWorker(const std::string& replica_id, const proto::Message& message);
  proto::ClusterStatus BuildStatus() const;

  // The life of a request (coordinator_requests.cc).
  // Checks a submit and builds its request, not admitted (no id, nothing counted). Errors are
  // the client's answer.
  Result<std::unique_ptr<CoordRequest>> Prepare(SubmitInput input) const;
  // kInvalidArgument when the request's Assign, with as many generated tokens as it may carry
  // when migrated, could exceed coordinator.max_message_bytes.
  Status CheckAssignFits(int64_t prompt_tokens, const proto::SamplingParams& sampling) const;
  // The longest sequence a request can be served with now: the model's context length, cut to
  // the largest context a live, accepting replica registered (a worker's is cut to what its KV
  // cache holds); the model's alone while no replica is live (the request queues).
  int64_t ServedContextLength() const;
  // Admits a prepared request (counted; kAccepted pushed to `http`) and dispatches it. Errors:
  // the request table's (a full class), counted as refused.
  Result<CoordRequest*> Admit(std::unique_ptr<CoordRequest> request, const std::string& client_routing_id,
                              std::shared_ptr<HttpStream> http);
  // Prepare and Admit, a refusal counted.
  Result<CoordRequest*> Accept(SubmitInput input, const std::string& client_routing_id,
                               std::shared_ptr<HttpStream> http);
  // An HTTP request's requests: `choices` of each input (one input per prompt), all accepted
  // (each pushing kAccepted on `http`, prompt by prompt, choice by choice) or none: every prompt
  // is checked first, and a bad one refuses them all (the error names the prompt when there are
  // several).
  Status AcceptChoices(std::vector<SubmitInput> inputs, const std::shared_ptr<HttpStream>& http);
  // Offers `r` to the replica the router picks; false when no replica could take it (none live,
  // accepting and with the context it needs): it stays queued.
  bool Dispatch(CoordRequest* r);
  // The context a replica needs to serve `r` from where it stands (ContextNeeded), and whether a
  // live replica registered one at least that long.
  static int64_t ContextNeeded(const CoordRequest& r);
  bool LiveContextHolds(const CoordRequest& r) const;
  void DispatchQueued();
  void OnChunk(const std::string& replica_id, proto::TokenChunk& chunk);
  void OnWorkerError(const std::string& replica_id, const proto::ErrorMessage& error);
  void Migrate(const std::string& replica_id);
  // Takes a request off its replica (dead, or it lost the request) back to the queue, to be
  // assigned again from the tokens streamed; a migration, and its queue timeout starts again.
  void Requeue(CoordRequest* r);
  // Cancels, on the replica, every request it reports running that is not ours there (moved
  // away while it was taken for dead, finished, or from before a coordinator restart).
  void CancelOrphans(const std::string& replica_id, const std::vector<uint64_t>& running);
  // Takes back, and assigns again, every request of the replica's that its heartbeat does not
  // list under the request's current assignment when that was assigned no later than the
  // heartbeat's last_assignment (the replica took its Assign, or lost it on the way, and holds
  // it no more, yet its last chunk never came), or sent longer ago than a replica may go
  // without reading its messages (the Assign never reached it, and no later one came).
  void ReassignLost(const std::string& replica_id, const proto::Heartbeat& heartbeat);
  // A request its replica lost (`what` says how): queued again, to continue from the tokens its
  // client has, and its copy on the replica, if any, cancelled; failed after kMaxLosses.
  // Dispatches nothing: the caller runs DispatchQueued.
  void TakeBackLost(CoordRequest* r, const std::string& what);
  // Cancel and Fail end the request (the client told), then tell its replica to stop it.
  void Cancel(CoordRequest* r, bool tell_client);
  void Fail(CoordRequest* r, const Status& status);
  // Fails every request left (the coordinator stops).
  void FailAll(const Status& status);
  // The replica a request is assigned to, "" while it is queued.
  static std::string AssignedReplica(const CoordRequest& r);
  void StopOnReplica(const std::string& replica_id, uint64_t request_id);
  // Counts a request as finished with `outcome` (ok, cancelled, error) and takes it off its
  // replica's in-flight count. Done before its client is told, so that a client reading
  // /metrics after its answer finds the request counted; the caller then removes it.
  void CountFinished(CoordRequest& r, const std::string& outcome);
  // Observes the request's wait in the queue (arrival to `left_queue_ns`), once.
  void CountQueueWait(CoordRequest& r, int64_t left_queue_ns);
  // Counts `requests` answered with `why` instead of being accepted: in requests_total and in
  // rejections_total by reason (overloaded, unavailable, invalid), or, when their client
  // cancelled them first (kCancelled), in requests_finished_total{status="cancelled"}.
  void CountRefused(const Status& why, uint32_t requests = 1);
  // Delivers to the client; false when the client is gone (the request is then cancelled).
  bool Deliver(CoordRequest* r, proto::TokenChunk chunk);
  void SendClientError(const std::string& routing_id, const Status& s,
                       const std::string& client_request_id, uint32_t retry_after_ms);
  std::vector<ReplicaView> Views() const;

  ServerConfig config_;
  CoordinatorRunOptions options_;
  SystemClock& clock_ = SystemClock::Instance();
  std::string model_name_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<ApiKeys> api_keys_;
  int64_t context_length_ = 0;
  http::ChatFormat chat_format_;
  int64_t block_size_ = 16;  // of the replicas (prefix hashes must match theirs)

  metrics::Registry registry_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  std::unique_ptr<HttpFrontend> http_;

  // When the event loop last began a round (SystemClock nanoseconds); the probes read it.
  std::atomic<int64_t> loop_round_ns_{0};
  zmq::context_t context_{1};
  std::unique_ptr<zmq::socket_t> worker_socket_;
  std::unique_ptr<zmq::socket_t> client_socket_;
  std::string client_endpoint_, worker_endpoint_;

  ReplicaRegistry replicas_;
  // Per replica id: the latest "not now" its registration got, and when it was logged (it is
  // logged when it changes, or a minute later).
  struct RegistrationRefusal {
    std::string message;
    int64_t logged_ns = 0;
  };
  std::unordered_map<std::string, RegistrationRefusal> registration_refusals_;
  // New ids refused while every replica slot is taken: when last logged (none yet: the lowest).
  int64_t table_full_logged_ns_ = std::numeric_limits<int64_t>::min() / 2;
  std::unordered_map<std::string, int64_t> version_refusals_logged_;  // by connection
  Router router_;
  RequestTable requests_;
  std::atomic<uint64_t> requests_received_{0};  // HTTP threads count the 401s they answer
  // The number of the last Assign sent (to any replica); the next one is one more. The start is
  // drawn at random for each coordinator process: request ids restart from 1 with the process,
  // and a replica may still run a copy of a request the last coordinator gave it under an id
  // this one is about to reuse. Only the number tells that copy's chunks from those of the new
  // request.
  uint32_t last_assignment_ = 0;

  // Socket submits whose text prompts the tokenizer thread has: answered when it is done,
  // with an error instead of Accepted if the client cancelled meanwhile; at most
  // coordinator.max_queued_per_priority of them.
  struct TokenizingSubmit {
    std::string routing_id;
    SubmitInput input;  // its prompt text moved to the tokenizer thread
    bool cancelled = false;
  };
  std::unordered_map<uint64_t, TokenizingSubmit> tokenizing_;
  uint64_t next_tokenize_job_ = 1;
  std::unique_ptr<TokenizerThread> tokenizer_thread_;

  std::mutex inbox_mutex_;
  std::deque<InboxItem> inbox_;
  int wake_fd_ = -1;  // eventfd: HTTP threads wake the loop
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> loop_done_{false};
  std::atomic<size_t> live_replicas_{0};
  std::atomic<int64_t> served_context_length_{0};
  int64_t last_tick_ns_ = 0;
  // A replica may take more than it did (a request there ended or moved, a full one's queue
  // emptied): the loop offers the queue again at the end of its round.
  bool room_changed_ = false;
};

}  // namespace bmad::coord
