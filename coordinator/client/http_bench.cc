#include "coordinator/client/http_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "coordinator/client/http_stream_request.h"
#include "worker/tools/length_distribution.h"

namespace bmad::client {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxRequests = 1000000;
constexpr int64_t kMaxPromptTokens = 1 << 22;
constexpr int64_t kMaxOutputTokens = 1 << 24;
constexpr double kMaxTimeoutS = 86400;
constexpr double kTickS = 0.02;                // how often the run checks deadlines and progress
constexpr uint32_t kDefaultLowTokenId = 100;   // below: often control and byte tokens
constexpr uint32_t kDefaultHighTokenId = 19999;

// Words for chat prompts: common enough to be about one token each in any English vocabulary.
constexpr const char* kWords[] = {
    "time", "people", "way", "day", "man", "thing", "woman", "life", "child", "world",
    "school", "state", "family", "student", "group", "country", "problem", "hand", "part",
    "place", "case", "week", "company", "system", "program", "question", "work", "number",
    "night", "point", "home", "water", "room", "mother", "area", "money", "story", "fact",
    "month", "lot", "right", "study", "book", "eye", "job", "word", "business", "issue",
    "side", "kind", "head", "house", "service", "friend", "father", "power", "hour", "game",
    "line", "end", "member", "law", "car", "city", "name", "team", "minute", "idea", "body",
    "back", "parent", "face", "level", "office", "door", "health", "art", "war", "history",
    "party", "result", "change", "morning", "reason", "research", "girl", "guy", "moment",
    "air", "teacher", "force", "education", "river", "stone", "light", "paper", "music"};

struct PlannedRequest {
  double arrival_s = 0;  // open loop only
  int64_t prompt_len = 0;
  int64_t output_len = 0;
  int64_t slo_ms = 0;    // > 0: sent with slo_ms (BenchHttpOptions::urgent_share)
};

// Each request's prompt comes from its own generator, so bodies are built when sent (no
// workload held in memory) and the same seed gives the same prompts whatever the timing.
std::mt19937_64 RequestRng(uint64_t seed, size_t index) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index), static_cast<uint32_t>(uint64_t{index} >> 32)};
  return std::mt19937_64(seq);
}

std::string RequestBody(const BenchHttpOptions& o, const std::string& model,
                        const PlannedRequest& p, size_t index) {
  std::mt19937_64 rng = RequestRng(o.seed, index);
  if (o.api == OpenAiApi::kChat) {
    std::string text;
    for (int64_t i = 0; i < p.prompt_len; ++i) {
      if (i) text += ' ';
      text += kWords[rng() % std::size(kWords)];
    }
    return ChatRequestBody(model, text, p.output_len);
  }
  uint32_t low = kDefaultLowTokenId, high = kDefaultHighTokenId;
  if (o.vocab_size > 0) {
    low = static_cast<uint32_t>(std::min<int64_t>(kDefaultLowTokenId, o.vocab_size / 4));
    high = static_cast<uint32_t>(o.vocab_size - 1);
  }
  std::uniform_int_distribution<uint32_t> id(low, high);
  std::vector<uint32_t> prompt(static_cast<size_t>(p.prompt_len));
  for (uint32_t& t : prompt) t = id(rng);
  return CompletionsRequestBody(model, prompt, p.output_len);
}

std::string WithSlo(std::string body, int64_t slo_ms) {
  if (slo_ms <= 0) return body;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(body);
  j["slo_ms"] = slo_ms;
  return j.dump();
}

std::vector<PlannedRequest> PlanWorkload(const BenchHttpOptions& o,
                                         const tools::LengthDistribution& prompt_len,
                                         const tools::LengthDistribution& output_len) {
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(o.rate > 0 ? o.rate : 1.0);
  std::vector<PlannedRequest> plan(static_cast<size_t>(o.requests));
  double t = 0;
  for (PlannedRequest& p : plan) {
    if (o.rate > 0) t += gap(rng);
    p.arrival_s = t;
    p.prompt_len = prompt_len.Sample(rng);
    p.output_len = output_len.Sample(rng);
  }
  // The first request goes at once, as vLLM's benchmark sends it: the Poisson process's first
  // gap would be idle time counted in the duration, not the server's.
  const double first = plan.empty() ? 0 : plan.front().arrival_s;
  for (PlannedRequest& p : plan) p.arrival_s -= first;
  // Drawn from a generator of their own: the arrivals and lengths are those of a run without.
  if (o.urgent_share > 0) {
    std::mt19937_64 urgent_rng(o.seed ^ 0x5eed0f5105ULL);
    std::bernoulli_distribution urgent(o.urgent_share);
    for (PlannedRequest& p : plan) p.slo_ms = urgent(urgent_rng) ? o.urgent_slo_ms : 0;
  }
  return plan;
}

double Ms(double seconds) { return seconds * 1000; }

}  // namespace

Status ValidateBenchHttpOptions(const BenchHttpOptions& o) {
  BMAD_RETURN_IF_ERROR(HttpTarget::Parse(o.url).status());
  if (o.requests < 1 || o.requests > kMaxRequests) {
    return InvalidArgument("--requests must be between 1 and " + std::to_string(kMaxRequests));
  }
  // Each value's own range first: a NaN or negative rate is not "no rate given".
  if (o.rate < 0 || !std::isfinite(o.rate)) return InvalidArgument("--rate must be a positive number");
  if (o.rate > 0 && o.rate < tools::kMinArrivalRate) {
    return InvalidArgument("--rate must be at least " + std::to_string(tools::kMinArrivalRate) + " requests/s");
  }
  if (o.concurrency < 0 || o.concurrency > kMaxBenchHttpConcurrency) {
    return InvalidArgument("--concurrency must be between 1 and " + std::to_string(kMaxBenchHttpConcurrency));
  }
  if ((o.rate > 0) == (o.concurrency > 0)) {
    return InvalidArgument("give exactly one of --rate (open loop) and --concurrency (closed loop)");
  }
  BMAD_ASSIGN_OR_RETURN(auto prompt_len, tools::LengthDistribution::Parse(o.prompt_len, "--prompt-len"));
  BMAD_ASSIGN_OR_RETURN(auto output_len, tools::LengthDistribution::Parse(o.output_len, "--output-len"));
  if (prompt_len.max() > kMaxPromptTokens) {
    return InvalidArgument("--prompt-len must be at most " + std::to_string(kMaxPromptTokens));
  }
  if (output_len.max() > kMaxOutputTokens) {
    return InvalidArgument("--output-len must be at most " + std::to_string(kMaxOutputTokens));
  }
  if (!(o.timeout_s > 0 && o.timeout_s <= kMaxTimeoutS)) {
    return InvalidArgument("--timeout-s must be above 0 and at most " + std::to_string(int(kMaxTimeoutS)));
  }
  if (o.vocab_size != 0 && (o.vocab_size < 8 || o.vocab_size > (int64_t{1} << 31))) {
    return InvalidArgument("--vocab-size must be at least 8 (and below 2^31)");
  }
  if (o.report_split_at < 0 || o.report_split_at > kMaxPromptTokens) {
    return InvalidArgument("--report-split-at must be between 0 (off) and " +
                           std::to_string(kMaxPromptTokens));
  }
  if (!(o.urgent_share >= 0 && o.urgent_share <= 1)) {
    return InvalidArgument("--urgent-share must be between 0 (off) and 1");
  }
  if (o.urgent_slo_ms < 0 || o.urgent_slo_ms > int64_t{std::numeric_limits<uint32_t>::max()}) {
    return InvalidArgument("--urgent-slo-ms must be between 1 and " +
                           std::to_string(std::numeric_limits<uint32_t>::max()));
  }
  if ((o.urgent_share > 0) != (o.urgent_slo_ms > 0)) {
    return InvalidArgument("give --urgent-share and --urgent-slo-ms together");
  }
  return Status::Ok();
}

namespace {

// Runs the requests (closed loop: `concurrency` workers; open loop: a thread per request,
// started at its arrival time) while the calling thread enforces deadlines and reports progress.
class BenchRun {
 public:
  BenchRun(const BenchHttpOptions& o, const HttpTarget& target, const std::string& model,
           std::vector<PlannedRequest> plan)
      : o_(o), target_(target), model_(model), plan_(std::move(plan)),
        outcomes_(plan_.size()), start_offsets_s_(plan_.size()), held_back_(plan_.size(), false),
        done_(plan_.size()), threads_(plan_.size()) {}

  void Run(const ProgressCallback& on_progress, double progress_interval_s) {
    start_ = Clock::now();
    if (o_.concurrency > 0) StartWorkers();
    size_t next_arrival = 0;
    double next_progress_s = progress_interval_s;  // nothing to say at the very start
    while (finished_.load() < static_cast<int64_t>(plan_.size())) {
      if (o_.rate > 0) {
        while (next_arrival < plan_.size() && plan_[next_arrival].arrival_s <= Elapsed() &&
               running_.size() < MaxInFlight()) {
          held_back_[next_arrival] = cap_hit_s_ >= plan_[next_arrival].arrival_s;
          StartOne(next_arrival++);
        }
        // Due but no room: every arrival due by now starts late.
        if (next_arrival < plan_.size() && plan_[next_arrival].arrival_s <= Elapsed()) cap_hit_s_ = Elapsed();
        Reap();
      }
      watchdog_.StopOverdue();
      if (on_progress && Elapsed() >= next_progress_s) {
        on_progress(Progress());
        next_progress_s = Elapsed() + progress_interval_s;
      }
      double wait_s = kTickS;
      // Until the next arrival; a full tick while the in-flight cap holds it back, since only a
      // request finishing can free a place (waiting 0 there spun a core the servers measured
      // against need).
      if (o_.rate > 0 && next_arrival < plan_.size() && running_.size() < MaxInFlight()) {
        wait_s = std::clamp(plan_[next_arrival].arrival_s - Elapsed(), 0.0, kTickS);
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    }
    for (std::thread& t : workers_) t.join();
    Reap();
    if (on_progress) {
      BenchProgress last = Progress();
      last.last = true;
      on_progress(last);
    }
  }

  BenchHttpReport Report() const {
    BenchHttpReport r;
    r.model = model_;
    r.requests = static_cast<int64_t>(plan_.size());
    std::vector<double> ttft, itl, tpot, e2e;
    std::vector<double> split_ttft[2], split_e2e[2];  // [0] short prompts, [1] long
    std::vector<double> slo_ttft[2], slo_e2e[2];      // [0] urgent, [1] relaxed
    std::map<std::string, int64_t> errors;
    for (size_t i = 0; i < plan_.size(); ++i) {
      const StreamOutcome& out = outcomes_[i];
      r.held_back += held_back_[i] ? 1 : 0;
      const bool urgent = plan_[i].slo_ms > 0;
      if (o_.urgent_share > 0) {
        (urgent ? r.urgent_sent : r.relaxed_sent) += 1;
        if (out.ok) {
          (urgent ? r.urgent : r.relaxed).succeeded += 1;
          slo_e2e[urgent ? 0 : 1].push_back(out.e2e_s);
          if (out.ttft_s >= 0) slo_ttft[urgent ? 0 : 1].push_back(out.ttft_s);
          if (urgent && out.e2e_s * 1000 <= static_cast<double>(plan_[i].slo_ms)) ++r.urgent_within_slo;
        }
      }
      r.duration_s = std::max(r.duration_s, start_offsets_s_[i] + out.e2e_s);
      if (!out.ok) {
        ++r.failed;
        ++errors[out.error];
        continue;
      }
      ++r.succeeded;
      r.output_tokens += out.output_tokens;
      r.prompt_tokens += out.prompt_tokens;
      r.usage_reports += out.usage_reported ? 1 : 0;
      // Only by the server's usage: without it, output_tokens counts events, which may hold
      // several tokens each.
      r.short_outputs += out.usage_reported && out.output_tokens < plan_[i].output_len ? 1 : 0;
      e2e.push_back(out.e2e_s);
      itl.insert(itl.end(), out.itl_s.begin(), out.itl_s.end());
      if (out.ttft_s >= 0) ttft.push_back(out.ttft_s);
      if (out.ttft_s >= 0 && out.output_tokens > 1) {
        tpot.push_back((out.e2e_s - out.ttft_s) / static_cast<double>(out.output_tokens - 1));
      }
      if (o_.report_split_at > 0) {
        const int cls = plan_[i].prompt_len < o_.report_split_at ? 0 : 1;
        (cls == 0 ? r.short_prompts : r.long_prompts).succeeded += 1;
        split_e2e[cls].push_back(out.e2e_s);
        if (out.ttft_s >= 0) split_ttft[cls].push_back(out.ttft_s);
      }
    }
    r.short_prompts.ttft_s = tools::LatencySummary::Of(std::move(split_ttft[0]));
    r.short_prompts.e2e_s = tools::LatencySummary::Of(std::move(split_e2e[0]));
    r.long_prompts.ttft_s = tools::LatencySummary::Of(std::move(split_ttft[1]));
    r.long_prompts.e2e_s = tools::LatencySummary::Of(std::move(split_e2e[1]));
    r.urgent.ttft_s = tools::LatencySummary::Of(std::move(slo_ttft[0]));
    r.urgent.e2e_s = tools::LatencySummary::Of(std::move(slo_e2e[0]));
    r.relaxed.ttft_s = tools::LatencySummary::Of(std::move(slo_ttft[1]));
    r.relaxed.e2e_s = tools::LatencySummary::Of(std::move(slo_e2e[1]));
    if (r.duration_s > 0) {
      r.requests_per_s = static_cast<double>(r.succeeded) / r.duration_s;
      r.output_tokens_per_s = static_cast<double>(r.output_tokens) / r.duration_s;
    }
    r.ttft_s = tools::LatencySummary::Of(std::move(ttft));
    r.itl_s = tools::LatencySummary::Of(std::move(itl));
    r.tpot_s = tools::LatencySummary::Of(std::move(tpot));
    r.e2e_s = tools::LatencySummary::Of(std::move(e2e));
    r.errors.assign(errors.begin(), errors.end());
    std::stable_sort(r.errors.begin(), r.errors.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    return r;
  }

 private:
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  BenchProgress Progress() const {
    BenchProgress p;
    p.finished = finished_.load();
    p.failed = failed_.load();
    p.total = static_cast<int64_t>(plan_.size());
    p.elapsed_s = Elapsed();
    return p;
  }

  void RunOne(size_t i) {
    start_offsets_s_[i] = Elapsed();
    StreamRequest request;
    request.path = std::string(ApiPath(o_.api));
    request.body = WithSlo(RequestBody(o_, model_, plan_[i], i), plan_[i].slo_ms);
    request.api_key = o_.api_key;
    request.timeout_s = o_.timeout_s;
    outcomes_[i] = RunStreamRequest(target_, request, &watchdog_);
    Finish(i);
  }

  void Finish(size_t i) {
    if (!outcomes_[i].ok) failed_.fetch_add(1);
    done_[i].store(true);
    finished_.fetch_add(1);
  }

  void StartWorkers() {
    const int64_t n = std::min<int64_t>(o_.concurrency, static_cast<int64_t>(plan_.size()));
    for (int64_t w = 0; w < n; ++w) {
      try {
        workers_.emplace_back([this] {
          for (size_t i; (i = next_.fetch_add(1)) < plan_.size();) RunOne(i);
        });
      } catch (const std::system_error&) {
        break;  // fewer workers than asked for: the run is slower, not wrong
      }
    }
    if (workers_.empty()) FailAll("could not start a thread");
  }

  void StartOne(size_t i) {
    try {
      threads_[i] = std::thread([this, i] { RunOne(i); });
      running_.push_back(i);
    } catch (const std::system_error&) {
      outcomes_[i].error = "could not start a thread";
      Finish(i);
    }
  }

  // Joins the open-loop threads that are done, so finished ones do not pile up.
  void Reap() {
    std::erase_if(running_, [this](size_t i) {
      if (!done_[i].load()) return false;
      threads_[i].join();
      return true;
    });
  }

  void FailAll(const std::string& why) {
    for (size_t i; (i = next_.fetch_add(1)) < plan_.size();) {
      outcomes_[i].error = why;
      Finish(i);
    }
  }

  const BenchHttpOptions& o_;
  const HttpTarget& target_;
  const std::string model_;
  const std::vector<PlannedRequest> plan_;
  Clock::time_point start_;
  RequestWatchdog watchdog_;
  // Slot i is written only by the thread running request i, and read after it is joined.
  std::vector<StreamOutcome> outcomes_;
  std::vector<double> start_offsets_s_;
  std::vector<bool> held_back_;  // open loop: sent late for want of room in flight
  double cap_hit_s_ = -1;        // when a due arrival last found open_loop_max_in_flight in flight
  size_t MaxInFlight() const { return static_cast<size_t>(std::max<int64_t>(1, o_.open_loop_max_in_flight)); }
  std::vector<std::atomic<bool>> done_;
  std::atomic<int64_t> finished_{0}, failed_{0};
  std::atomic<size_t> next_{0};                      // closed loop: the next request to send
  std::vector<std::thread> workers_;                 // closed loop
  std::vector<std::thread> threads_;                 // open loop: one per request
  std::vector<size_t> running_;                      // open loop: started, not yet joined
};

}  // namespace

Result<BenchHttpReport> RunBenchHttp(const BenchHttpOptions& o, const ProgressCallback& on_progress,
                                     double progress_interval_s) {
  BMAD_RETURN_IF_ERROR(ValidateBenchHttpOptions(o));
  BMAD_ASSIGN_OR_RETURN(const HttpTarget target, HttpTarget::Parse(o.url));
  BMAD_ASSIGN_OR_RETURN(auto prompt_len, tools::LengthDistribution::Parse(o.prompt_len, "--prompt-len"));
  BMAD_ASSIGN_OR_RETURN(auto output_len, tools::LengthDistribution::Parse(o.output_len, "--output-len"));
  std::string model = o.model;
  if (model.empty()) {
    Result<std::string> listed = FetchFirstModelId(target, o.api_key, std::min(o.timeout_s, 30.0));
    if (!listed.ok()) return listed.status().WithContext("finding the model (or pass --model)");
    model = *listed;
  }
  BenchRun run(o, target, model, PlanWorkload(o, prompt_len, output_len));
  run.Run(on_progress, progress_interval_s);
  return run.Report();
}

std::string BenchHttpReport::Text(const BenchHttpOptions& o) const {
  std::string out;
  char line[512];
  auto add = [&](const char* format, auto... args) {
    std::snprintf(line, sizeof line, format, args...);
    out += line;
  };
  add("bench http: %lld requests to %s, model %s, %s API, ", static_cast<long long>(requests),
      o.url.c_str(), model.c_str(), o.api == OpenAiApi::kChat ? "chat" : "completions");
  if (o.rate > 0) {
    add("open loop at %.3g req/s\n", o.rate);
  } else {
    add("closed loop with %lld in flight\n", static_cast<long long>(o.concurrency));
  }
  add("succeeded %lld, failed %lld, in %.2f s\n", static_cast<long long>(succeeded),
      static_cast<long long>(failed), duration_s);
  add("throughput: %.2f req/s, %.1f output tok/s (%lld output tokens%s)\n", requests_per_s,
      output_tokens_per_s, static_cast<long long>(output_tokens),
      succeeded == 0                ? ""
      : usage_reports == succeeded ? ", by the server's usage"
                                   : ", counted partly by events");
  if (short_outputs > 0) {
    add("warning: %lld requests ended short of their max_tokens (does the server honour ignore_eos?)\n",
        static_cast<long long>(short_outputs));
  }
  if (held_back > 0) {
    add("warning: %lld requests were sent late, %lld already in flight (their latencies count from "
        "when they were sent, and understate the server's under this load)\n",
        static_cast<long long>(held_back), static_cast<long long>(o.open_loop_max_in_flight));
  }
  auto row = [&](const char* name, const tools::LatencySummary& s) {
    if (s.count == 0) return add("%-24s no samples\n", name);
    add("%-24s mean %8.1f  p50 %8.1f  p90 %8.1f  p99 %8.1f\n", name, Ms(s.mean), Ms(s.p50),
        Ms(s.p90), Ms(s.p99));
  };
  row("time to first token ms", ttft_s);
  row("inter-token latency ms", itl_s);
  row("time per output token ms", tpot_s);
  row("end-to-end latency ms", e2e_s);
  if (o.report_split_at > 0) {
    for (const bool is_short : {true, false}) {
      const PromptClass& c = is_short ? short_prompts : long_prompts;
      add("prompts %s %lld tokens: %lld requests\n", is_short ? "<" : ">=",
          static_cast<long long>(o.report_split_at), static_cast<long long>(c.succeeded));
      row("  time to first token ms", c.ttft_s);
      row("  end-to-end latency ms", c.e2e_s);
    }
  }
  if (o.urgent_share > 0) {
    add("urgent (slo_ms %lld): %lld sent, %lld succeeded, %lld within it\n",
        static_cast<long long>(o.urgent_slo_ms), static_cast<long long>(urgent_sent),
        static_cast<long long>(urgent.succeeded), static_cast<long long>(urgent_within_slo));
    row("  time to first token ms", urgent.ttft_s);
    row("  end-to-end latency ms", urgent.e2e_s);
    add("others: %lld sent, %lld succeeded\n", static_cast<long long>(relaxed_sent),
        static_cast<long long>(relaxed.succeeded));
    row("  time to first token ms", relaxed.ttft_s);
    row("  end-to-end latency ms", relaxed.e2e_s);
  }
  add("errors: %lld\n", static_cast<long long>(failed));
  for (const auto& [message, count] : errors) {
    add("  %6lld x ", static_cast<long long>(count));
    out += message + "\n";
  }
  return out;
}

std::string BenchHttpReport::Json(const BenchHttpOptions& o) const {
  using nlohmann::ordered_json;
  ordered_json j;
  j["bench"] = "http";
  j["url"] = o.url;
  j["model"] = model;
  j["api"] = o.api == OpenAiApi::kChat ? "chat" : "completions";
  j["mode"] = o.rate > 0 ? "open" : "closed";
  if (o.rate > 0) {
    j["rate"] = o.rate;
  } else {
    j["concurrency"] = o.concurrency;
  }
  j["prompt_len"] = o.prompt_len;
  j["output_len"] = o.output_len;
  j["requests"] = requests;
  j["succeeded"] = succeeded;
  j["failed"] = failed;
  j["duration_s"] = duration_s;
  j["requests_per_s"] = requests_per_s;
  j["output_tokens_per_s"] = output_tokens_per_s;
  j["output_tokens"] = output_tokens;
  j["prompt_tokens"] = prompt_tokens;
  j["short_outputs"] = short_outputs;
  if (o.rate > 0) j["held_back"] = held_back;
  j["ttft_ms"] = ordered_json::parse(ttft_s.Json(1000));
  j["itl_ms"] = ordered_json::parse(itl_s.Json(1000));
  j["tpot_ms"] = ordered_json::parse(tpot_s.Json(1000));
  j["e2e_ms"] = ordered_json::parse(e2e_s.Json(1000));
  if (o.report_split_at > 0) {
    j["report_split_at"] = o.report_split_at;
    for (const bool is_short : {true, false}) {
      const PromptClass& c = is_short ? short_prompts : long_prompts;
      ordered_json part;
      part["succeeded"] = c.succeeded;
      part["ttft_ms"] = ordered_json::parse(c.ttft_s.Json(1000));
      part["e2e_ms"] = ordered_json::parse(c.e2e_s.Json(1000));
      j[is_short ? "short_prompts" : "long_prompts"] = std::move(part);
    }
  }
  if (o.urgent_share > 0) {
    j["urgent_share"] = o.urgent_share;
    j["urgent_slo_ms"] = o.urgent_slo_ms;
    for (const bool is_urgent : {true, false}) {
      const PromptClass& c = is_urgent ? urgent : relaxed;
      ordered_json part;
      part["sent"] = is_urgent ? urgent_sent : relaxed_sent;
      part["succeeded"] = c.succeeded;
      if (is_urgent) part["within_slo"] = urgent_within_slo;
      part["ttft_ms"] = ordered_json::parse(c.ttft_s.Json(1000));
      part["e2e_ms"] = ordered_json::parse(c.e2e_s.Json(1000));
      j[is_urgent ? "urgent" : "relaxed"] = std::move(part);
    }
  }
  ordered_json error_list = ordered_json::array();
  for (const auto& [message, count] : errors) {
    error_list.push_back({{"message", message}, {"count", count}});
  }
  j["errors"] = std::move(error_list);
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace bmad::client
