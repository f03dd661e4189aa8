#include "coordinator/client/client.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>

#include <zmq.hpp>

#include "common/config/endpoint.h"
#include "common/proto/frames.h"

namespace bmad::client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Longest single wait on the socket while a cancel flag is watched: how late a cancel is seen.
constexpr milliseconds kCancelPollSlice{100};
// How long a send may wait for a connection when the caller gave no deadline (Cancel).
constexpr milliseconds kCancelSendTimeout{1000};
// The longest a call waits for the connection itself: ZeroMQ retries every 100 ms, so a
// coordinator that is up is connected long before this; one that is down should not cost the
// whole (possibly long) request timeout to notice.
constexpr milliseconds kConnectTimeout{5000};
// After a chunk finishing with reason "error", how long to wait for the Error saying why.
constexpr milliseconds kErrorReasonGrace{500};
// Chunks beyond max_tokens that may carry no tokens (e.g. a last chunk with only a finish
// reason and usage); more than this is an endless stream, not a slow one.
constexpr uint32_t kSpareChunks = 16;
// max_tokens 0 leaves the bound to the server; this is the bound we enforce then.
constexpr uint64_t kMaxTokensWhenUnbounded = 1u << 24;

double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// What one incoming message meant for the request being generated.
enum class Step { kIgnored, kProgress, kFinished, kFinishedWithError };

// The request's state machine: matches messages to the request, checks chunk order, and
// assembles the result. Pure logic; the socket loop lives in Client::Generate.
class RequestTracker {
 public:
  RequestTracker(const proto::Submit& submit, GenerateResult* result,
                 const ChunkCallback& on_chunk, Clock::time_point sent)
      : result_(result), on_chunk_(on_chunk), sent_(sent) {
    result_->client_request_id = submit.client_request_id;
    const uint64_t max_tokens = submit.sampling.max_tokens;
    max_tokens_ = max_tokens ? max_tokens : kMaxTokensWhenUnbounded;
  }

  // An error Status when the message ends the request with an error (the coordinator's Error,
  // or a protocol violation as kDataLoss).
  Result<Step> OnMessage(const proto::Message& message) {
    if (const auto* a = std::get_if<proto::Accepted>(&message)) return OnAccepted(*a);
    if (const auto* c = std::get_if<proto::TokenChunk>(&message)) return OnChunk(*c);
    if (const auto* e = std::get_if<proto::ErrorMessage>(&message)) return OnError(*e);
    return Step::kIgnored;
  }

  std::string Describe() const {
    std::string out = "request '" + result_->client_request_id + "'";
    if (result_->request_id) out += " (id " + std::to_string(result_->request_id) + ")";
    return out + ", " + std::to_string(result_->token_ids.size()) + " tokens so far";
  }

 private:
  bool IsOurs(uint64_t request_id, const std::string& client_request_id) const {
    if (!client_request_id.empty()) return client_request_id == result_->client_request_id;
    return request_id != 0 && request_id == result_->request_id;
  }

  Result<Step> OnAccepted(const proto::Accepted& a) {
    // Only the first counts as progress: a coordinator repeating it must not keep a request that
    // makes none waiting for ever.
    if (!IsOurs(a.request_id, a.client_request_id) || finished_ || accepted_) return Step::kIgnored;
    accepted_ = true;
    if (result_->request_id == 0) result_->request_id = a.request_id;
    result_->prompt_tokens = a.prompt_tokens;
    return Step::kProgress;
  }

  Result<Step> OnChunk(const proto::TokenChunk& c) {
    if (!IsOurs(c.request_id, c.client_request_id) || finished_) return Step::kIgnored;
    if (result_->request_id == 0) result_->request_id = c.request_id;
    if (c.sequence != result_->chunks) {
      return DataLoss("chunk " + std::to_string(c.sequence) + " of " + Describe() +
                      " arrived when chunk " + std::to_string(result_->chunks) +
                      " was expected: the coordinator sent chunks out of order");
    }
    if (c.token_offset != result_->token_ids.size()) {
      return DataLoss("chunk " + std::to_string(c.sequence) + " of " + Describe() +
                      " starts at token offset " + std::to_string(c.token_offset));
    }
    if (result_->token_ids.size() + c.token_ids.size() > max_tokens_ ||
        result_->chunks >= max_tokens_ + kSpareChunks) {
      return DataLoss("the coordinator sent more than max_tokens (" + std::to_string(max_tokens_) +
                      ") tokens for " + Describe());
    }
    const Clock::time_point now = Clock::now();
    if (result_->first_token_s < 0 && (!c.token_ids.empty() || !c.text.empty())) {
      result_->first_token_s = SecondsBetween(sent_, now);
    }
    result_->token_ids.insert(result_->token_ids.end(), c.token_ids.begin(), c.token_ids.end());
    result_->text += c.text;
    result_->logprobs.insert(result_->logprobs.end(), c.logprobs.begin(), c.logprobs.end());
    result_->top_token_ids.insert(result_->top_token_ids.end(), c.top_token_ids.begin(), c.top_token_ids.end());
    result_->top_logprobs.insert(result_->top_logprobs.end(), c.top_logprobs.begin(), c.top_logprobs.end());
    ++result_->chunks;
    result_->total_s = SecondsBetween(sent_, now);
    if (on_chunk_) on_chunk_(c);
    if (c.finish_reason == proto::FinishReason::kNone) return Step::kProgress;
    finished_ = true;
    result_->finish_reason = c.finish_reason;
    result_->usage = c.usage;
    return c.finish_reason == proto::FinishReason::kError ? Step::kFinishedWithError
                                                          : Step::kFinished;
  }

  Result<Step> OnError(const proto::ErrorMessage& e) {
    // An Error with no ids answers a Submit the coordinator could not read: ours, since one
    // request at a time is in flight on this client.
    const bool anonymous = e.request_id == 0 && e.client_request_id.empty();
    if (!anonymous && !IsOurs(e.request_id, e.client_request_id)) return Step::kIgnored;
    std::string message = e.message.empty() ? "the coordinator refused the request" : e.message;
    if (e.retry_after_ms) message += " (retry after " + std::to_string(e.retry_after_ms) + " ms)";
    const StatusCode code = e.code == StatusCode::kOk ? StatusCode::kInternal : e.code;
    return Status(code, std::move(message));
  }

  GenerateResult* result_;
  const ChunkCallback& on_chunk_;
  Clock::time_point sent_;
  uint64_t max_tokens_ = 0;
  bool finished_ = false;
  bool accepted_ = false;
};

}  // namespace

struct Client::Impl {
  std::string endpoint;
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  std::string request_id_prefix;
  uint64_t requests_made = 0;

  std::string NewRequestId() { return request_id_prefix + std::to_string(++requests_made); }

  // Waits until the DEALER has a live connection (ZMQ_IMMEDIATE keeps messages from queueing
  // on a connection that does not exist yet), then sends without blocking.
  Status Send(const proto::Message& message, Clock::time_point deadline) {
    while (true) {
      zmq::pollitem_t item{static_cast<void*>(socket), 0, ZMQ_POLLOUT, 0};
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      try {
        zmq::poll(&item, 1, std::max(left, milliseconds(0)));
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) return Unavailable(std::string("polling the socket failed: ") + e.what());
      }
      if (item.revents & ZMQ_POLLOUT) return proto::SendMessage(socket, message);
      if (left <= milliseconds(0)) {
        return Unavailable("no connection to the coordinator at " + endpoint);
      }
    }
  }

  // One message, or std::nullopt once `until` passes or `*cancel` becomes true.
  std::optional<proto::Incoming> Receive(Clock::time_point until, const std::atomic<bool>* cancel) {
    while (true) {
      if (cancel && cancel->load()) return std::nullopt;
      auto left = std::chrono::ceil<milliseconds>(until - Clock::now());
      if (left <= milliseconds(0)) return std::nullopt;
      if (cancel) left = std::min(left, kCancelPollSlice);
      socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(left.count()));
      if (auto in = proto::ReceiveMessage(socket, /*routed=*/false)) return in;
    }
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::endpoint() const { return impl_->endpoint; }

Result<std::unique_ptr<Client>> Client::Connect(const std::string& endpoint) {
  if (endpoint.empty()) return InvalidArgument("the coordinator endpoint is empty");
  auto impl = std::make_unique<Impl>();
  impl->endpoint = endpoint.find("://") == std::string::npos ? "tcp://" + endpoint : endpoint;
  std::random_device seed;
  std::mt19937_64 rng((uint64_t{seed()} << 32) ^ seed());
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "c%016llx-", static_cast<unsigned long long>(rng()));
  impl->request_id_prefix = prefix;
  // Checked first: ZeroMQ takes a port past 65535 modulo 65536, and an address it cannot reach
  // only as a connection that never comes ("no connection to the coordinator").
  std::string problem = EndpointProblem(impl->endpoint);
  if (problem.empty() && impl->endpoint.ends_with(":*")) problem = "a client connects to a port, not *";
  if (!problem.empty()) return InvalidArgument("coordinator endpoint '" + endpoint + "': " + problem);
  try {
    impl->socket.set(zmq::sockopt::linger, 0);
    impl->socket.set(zmq::sockopt::immediate, 1);
    impl->socket.connect(impl->endpoint);
  } catch (const zmq::error_t& e) {
    return InvalidArgument("cannot use coordinator endpoint '" + endpoint + "': " + e.what());
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Status Client::Cancel(const std::string& client_request_id, uint64_t request_id) {
  return impl_->Send(proto::Cancel{client_request_id, request_id},
                     Clock::now() + kCancelSendTimeout);
}

Result<GenerateResult> Client::Generate(const proto::Submit& submit_in,
                                        const ChunkCallback& on_chunk, milliseconds timeout,
                                        const std::atomic<bool>* cancel) {
  if (timeout <= milliseconds(0)) return InvalidArgument("the timeout must be positive");
  proto::Submit submit = submit_in;
  if (submit.client_request_id.empty()) submit.client_request_id = impl_->NewRequestId();
  BMAD_RETURN_IF_ERROR(impl_->Send(submit, Clock::now() + std::min(timeout, kConnectTimeout))
                           .WithContext("sending the request"));

  GenerateResult result;
  const Clock::time_point sent = Clock::now();
  RequestTracker tracker(submit, &result, on_chunk, sent);
  Clock::time_point quiet_until = sent + timeout;
  bool awaiting_error_reason = false;
  Status last_garbage;
  auto cancel_request = [&] {
    // Best effort: the request is being abandoned either way.
    (void)Cancel(result.client_request_id, result.request_id);
  };

  while (true) {
    std::optional<proto::Incoming> in = impl_->Receive(quiet_until, cancel);
    if (!in) {
      if (awaiting_error_reason) {
        return Internal("the coordinator ended " + tracker.Describe() +
                        " with finish reason 'error' and sent no error message");
      }
      cancel_request();
      if (cancel && cancel->load()) return Cancelled("cancelled by the client: " + tracker.Describe());
      std::string message =
          result.request_id != 0 && result.token_ids.empty() && submit.stream
              // Accepted, then nothing streamed: the coordinator answers, no replica has yet.
              ? "the coordinator at " + impl_->endpoint + " accepted the request but sent no token in " +
                    std::to_string(timeout.count()) + " ms (" + tracker.Describe() +
                    "): it is queued while no replica is live or free to take it (bmad status lists "
                    "them), or its prompt takes longer than that to prefill"
              : "no answer from the coordinator at " + impl_->endpoint + " for " +
                    std::to_string(timeout.count()) + " ms (" + tracker.Describe() + ")";
      if (!last_garbage.ok()) {
        message += "; ignored " + std::to_string(result.ignored_frames) +
                   " frames, the last undecodable one: " + last_garbage.message();
      }
      return DeadlineExceeded(std::move(message));
    }
    if (!in->message.ok()) {
      // The socket itself failed (context terminated): nothing more will come.
      if (in->message.status().code() == StatusCode::kUnavailable) return in->message.status();
      ++result.ignored_frames;
      last_garbage = in->message.status();
      continue;
    }
    Result<Step> step = tracker.OnMessage(*in->message);
    if (!step.ok()) {
      if (step.status().code() == StatusCode::kDataLoss) cancel_request();
      return step.status();
    }
    if (awaiting_error_reason) continue;  // only the Error saying why matters now
    switch (*step) {
      case Step::kIgnored:
        // Deliberately not extending quiet_until: chatter about other requests must not keep
        // a dead request waiting forever.
        ++result.ignored_frames;
        break;
      case Step::kProgress:
        quiet_until = Clock::now() + timeout;
        break;
      case Step::kFinished:
        return result;
      case Step::kFinishedWithError:
        awaiting_error_reason = true;
        quiet_until = Clock::now() + std::min(timeout, kErrorReasonGrace);
        break;
    }
  }
}

Result<proto::ClusterStatus> Client::QueryStatus(milliseconds timeout) {
  if (timeout <= milliseconds(0)) return InvalidArgument("the timeout must be positive");
  const Clock::time_point deadline = Clock::now() + timeout;
  BMAD_RETURN_IF_ERROR(impl_->Send(proto::StatusQuery{}, Clock::now() + std::min(timeout, kConnectTimeout))
                           .WithContext("asking for the status"));
  int ignored = 0;
  while (std::optional<proto::Incoming> in = impl_->Receive(deadline, nullptr)) {
    if (!in->message.ok()) {
      if (in->message.status().code() == StatusCode::kUnavailable) return in->message.status();
      ++ignored;
      continue;
    }
    if (auto* status = std::get_if<proto::ClusterStatus>(&*in->message)) return std::move(*status);
    // An Error with request ids belongs to an abandoned request; one without answers us.
    if (const auto* e = std::get_if<proto::ErrorMessage>(&*in->message)) {
      if (e->request_id == 0 && e->client_request_id.empty()) {
        return Status(e->code == StatusCode::kOk ? StatusCode::kInternal : e->code,
                      e->message.empty() ? "the coordinator refused the status query" : e->message);
      }
    }
    ++ignored;
  }
  return DeadlineExceeded("no cluster status from the coordinator at " + impl_->endpoint +
                          " within " + std::to_string(timeout.count()) + " ms" +
                          (ignored ? " (ignored " + std::to_string(ignored) + " other frames)" : ""));
}

}  // namespace bmad::client
