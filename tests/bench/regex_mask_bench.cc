// bmad-regex-mask-bench: what holding an output to a regular expression costs per token, on a
// model's vocabulary: RegexConstraint::Mask as the sampler calls it, against the walk it replaced
// (each token's bytes from the output's state, in id order: kept here as the baseline), over the
// same outputs. Each pattern's output is drawn token by token among what the pattern allows
// (seeded); both walks see the same states, their DFAs warm alike.
//
//   bmad-regex-mask-bench --model FILE [--steps 60] [--seed 5] [PATTERN...]
//
// Prints one JSON line per pattern: milliseconds per token of each (the median over the steps),
// and the steps taken (a bounded pattern may end first).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "common/status.h"
#include "worker/model/gguf/gguf_file.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/sampling/regex_constraint.h"
#include "worker/sampling/regex_dfa.h"

namespace {

using namespace bmad;
using Clock = std::chrono::steady_clock;

// The baseline: every token's bytes from the output's state, in id order, and the same pass
// over the scores Mask makes.
double FlatWalkMs(sampling::RegexDfa& dfa, int32_t state, const sampling::TokenTexts& texts, int32_t end_token,
                  std::vector<float>& scores) {
  const auto t0 = Clock::now();
  std::vector<uint64_t> bits((texts.size() + 63) / 64, 0);
  const std::vector<int32_t> state_set = dfa.Set(state);  // to find it again if the DFA starts over
  uint64_t generation = dfa.generation();
  for (size_t id = 0; id < texts.size(); ++id) {
    if (dfa.generation() != generation) {
      state = dfa.Intern(state_set);
      generation = dfa.generation();
    }
    bool fits = false;
    if (static_cast<int32_t>(id) == end_token) {
      fits = dfa.accepting(state);
    } else {
      const std::string_view text = texts.text(static_cast<int64_t>(id));
      int32_t s = text.empty() ? sampling::RegexDfa::kDead : state;
      for (const char c : text) {
        if (s == sampling::RegexDfa::kDead) break;
        const int32_t known = dfa.Known(s, static_cast<uint8_t>(c));
        s = known != sampling::RegexDfa::kUnknown ? known : dfa.Step(s, static_cast<uint8_t>(c));
      }
      fits = s != sampling::RegexDfa::kDead;
    }
    if (fits) bits[id / 64] |= uint64_t{1} << (id % 64);
  }
  for (size_t id = 0; id < scores.size(); ++id) {
    if (((bits[id / 64] >> (id % 64)) & 1) == 0) scores[id] = -std::numeric_limits<float>::infinity();
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int64_t steps = 60, seed = 5;
  cli::Flags flags("bmad-regex-mask-bench --model FILE [flags] [PATTERN...]");
  flags.AddString("model", &model, "A GGUF model whose vocabulary to use (required).");
  flags.AddInt("steps", &steps, "Tokens drawn per pattern, at most (default 60).");
  flags.AddInt("seed", &seed, "Seed of the draws (default 5).");
  std::vector<std::string> patterns;
  Status status = flags.Parse({argv + 1, argv + argc}, &patterns);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (status.ok() && model.empty()) status = InvalidArgument("--model is required");
  if (status.ok() && steps < 1) status = InvalidArgument("--steps must be a positive integer");
  if (!status.ok()) {
    std::fprintf(stderr, "bmad-regex-mask-bench: %s\n", status.ToString().c_str());
    return 2;
  }
  if (patterns.empty()) {
    patterns = {".*", "(yes|no|maybe|[A-Z][a-z]+( [a-z]+)*)", "[A-Z][a-z]{1,8}( [a-z]{1,8}){0,20}",
                "[a-z ]{1,400}", "[^\"]{0,500}", "\\d{1,3}(\\.\\d{1,3}){3}"};
  }
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(model);
  if (!file.ok()) {
    std::fprintf(stderr, "bmad-regex-mask-bench: %s\n", file.status().ToString().c_str());
    return 1;
  }
  Result<tokenizer::Tokenizer> tok = tokenizer::LoadTokenizer(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "bmad-regex-mask-bench: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> pieces(static_cast<size_t>(tok->vocab_size()));
  for (int32_t id = 0; id < tok->vocab_size(); ++id) pieces[static_cast<size_t>(id)] = tok->TokenPiece(id);
  const auto texts = std::make_shared<const sampling::TokenTexts>(pieces);
  const std::vector<int32_t> ends = tok->EndOfGenerationIds();
  const int32_t end_token = ends.empty() ? -1 : ends.front();
  for (const std::string& pattern : patterns) {
    Result<std::shared_ptr<const sampling::RegexNfa>> nfa = sampling::RegexNfa::Compile(pattern);
    if (!nfa.ok()) {
      std::fprintf(stderr, "bmad-regex-mask-bench: %s: %s\n", pattern.c_str(), nfa.status().ToString().c_str());
      return 1;
    }
    sampling::RegexConstraint constraint(texts, {end_token}, *nfa);
    sampling::RegexDfa baseline_dfa(*nfa);
    int32_t baseline_state = baseline_dfa.start();
    std::mt19937_64 random(static_cast<uint64_t>(seed));
    std::vector<double> mask_ms, flat_ms;
    std::vector<int32_t> generated;
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<float> scores(texts->size());
      for (float& s : scores) s = std::uniform_real_distribution<float>(0.0f, 1.0f)(random);
      std::vector<float> flat_scores = scores;
      const auto t0 = Clock::now();
      if (!constraint.Mask(scores).ok()) break;
      mask_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      flat_ms.push_back(FlatWalkMs(baseline_dfa, baseline_state, *texts, end_token, flat_scores));
      // The highest allowed score, as a greedy sampler over random logits; ends at the end token.
      const int32_t next = static_cast<int32_t>(std::max_element(scores.begin(), scores.end()) - scores.begin());
      if (next == end_token || std::isinf(scores[static_cast<size_t>(next)])) break;
      generated.push_back(next);
      if (!constraint.Sync(generated).ok()) break;
      // The output's state in the baseline's DFA: from its start, as a start-over may have
      // left the last one meaningless.
      baseline_state = baseline_dfa.start();
      for (const int32_t id : generated) {
        for (const char c : texts->text(id)) baseline_state = baseline_dfa.Step(baseline_state, static_cast<uint8_t>(c));
      }
    }
    std::printf("{\"pattern\":\"%s\",\"tokens\":%zu,\"mask_ms\":%.3f,\"flat_walk_ms\":%.3f}\n",
                JsonEscaped(pattern).c_str(), mask_ms.size(), Median(mask_ms), Median(flat_ms));
  }
  return 0;
}
