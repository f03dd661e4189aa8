// Greedy output equals llama.cpp's, token for token, for every model and prompt whose reference
// answer ../shared/models/README.md records: the test reads that file, so a reference added
// there is checked here without a code change.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "tests/support/paths.h"
#include "worker/model/llama/llama_model.h"
#include "worker/model/tokenizer/tokenizer.h"
#include "worker/tools/local_generate.h"

namespace bmad {
namespace {

struct Reference {
  std::string model;                 // file name in shared/models
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string generated_text;
  int64_t bos_only_tokens = 0;       // "From BOS alone, N greedy tokens start with ..."
  std::string bos_only_prefix;
};

std::vector<int32_t> ParseIds(const std::string& list) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

// Parses each "## FILE.gguf ..." section's "Reference answer" block.
std::vector<Reference> ParseReadme(const std::string& text) {
  std::vector<Reference> refs;
  const std::regex heading(R"re(\n## ([^\s/]+\.gguf)[^\n]*\n)re");
  std::vector<std::pair<size_t, std::string>> sections;
  for (std::sregex_iterator it(text.begin(), text.end(), heading), end; it != end; ++it) {
    sections.emplace_back(static_cast<size_t>(it->position()), (*it)[1].str());
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t stop = i + 1 < sections.size() ? sections[i + 1].first : text.size();
    const std::string body = text.substr(sections[i].first, stop - sections[i].first);
    std::smatch m;
    Reference r;
    r.model = sections[i].second;
    if (!std::regex_search(body, m, std::regex(R"re(prompt `"([^"`]*)"` → (?:tokens )?`\[([\d, ]+)\]`)re"))) {
      continue;  // no reference answer in this section (the legacy v1 file)
    }
    r.prompt = m[1];
    r.prompt_ids = ParseIds(m[2]);
    if (std::regex_search(body, m, std::regex(R"re(first \d+ generated tokens:\s*`\[([\d, ]+)\]`)re"))) {
      r.generated_ids = ParseIds(m[1]);
    }
    if (std::regex_search(body, m, std::regex(R"re(text \(JSON-escaped\):\s*`("[^`]*")`)re"))) {
      r.generated_text = nlohmann::json::parse(m[1].str()).get<std::string>();
    } else if (std::regex_search(body, m, std::regex(R"re(text of those \d+ tokens[^\n]*:\s*`([^`]*)`)re"))) {
      r.generated_text = m[1];
    }
    if (std::regex_search(body, m, std::regex(R"re(\(prompt = `\[1\]`\), (\d+) greedy tokens start with\s*`([^`]*)`)re"))) {
      r.bos_only_tokens = std::stoll(m[1]);
      r.bos_only_prefix = m[2];
    }
    refs.push_back(std::move(r));
  }
  return refs;
}

std::vector<Reference> LoadReferences() {
  std::ifstream in(testing::SharedModelsDir() + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseReadme(ss.str());
}

TEST(LlamaReferenceTest, ReadmeHasTheReferencesWeExpect) {
  const std::vector<Reference> refs = LoadReferences();
  ASSERT_GE(refs.size(), 2u) << "could not parse the reference answers from shared/models/README.md";
  int with_bos_only = 0;
  for (const Reference& r : refs) {
    EXPECT_FALSE(r.prompt_ids.empty()) << r.model;
    EXPECT_EQ(r.generated_ids.size(), 32u) << r.model;
    EXPECT_FALSE(r.generated_text.empty()) << r.model;
    with_bos_only += r.bos_only_tokens > 0;
  }
  EXPECT_GE(with_bos_only, 1);
}

TEST(LlamaReferenceTest, TokenizationMatches) {
  for (const Reference& r : LoadReferences()) {
    auto file = gguf::GgufFile::Open(testing::SharedModelsDir() + "/" + r.model);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto tok = tokenizer::LoadTokenizer(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_EQ(tok->Encode(r.prompt), r.prompt_ids) << r.model;
  }
}

// Greedy ids straight from the model (no tokenizer, no sampler): the prompt ids in, argmax out.
TEST(LlamaReferenceTest, GreedyIdsMatchTokenForToken) {
  for (const Reference& r : LoadReferences()) {
    kernels::CpuBackend backend;
    auto model = model::LlamaModel::Load(testing::SharedModelsDir() + "/" + r.model, backend);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model::LlamaModel& m = **model;
    model::KvCache cache(m.CacheShape(16, 16));
    std::vector<int32_t> table = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
    std::vector<int32_t> input = r.prompt_ids, out;
    int32_t pos = 0;
    for (size_t i = 0; i < r.generated_ids.size(); ++i) {
      const model::SequenceStep step{input, pos, table, true};
      ASSERT_TRUE(m.Forward(std::span(&step, 1), cache, logits.data()).ok());
      pos += static_cast<int32_t>(input.size());
      int32_t best = 0;
      backend.Argmax(logits.data(), 1, m.config().n_vocab, &best);
      out.push_back(best);
      input = {best};
    }
    EXPECT_EQ(out, r.generated_ids) << r.model;
  }
}

// The same through `bmad generate`'s path: tokenizer, sampler (temperature 0), detokenizer.
TEST(LlamaReferenceTest, GenerateTextMatches) {
  for (const Reference& r : LoadReferences()) {
    tools::LocalGenerateOptions o;
    o.model_path = testing::SharedModelsDir() + "/" + r.model;
    o.prompt = r.prompt;
    o.sampling.temperature = 0;
    o.sampling.max_tokens = static_cast<uint32_t>(r.generated_ids.size());
    std::string text;
    auto stats = tools::LocalGenerate(o, [&](std::string_view t) { text += t; });
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->generated_ids, r.generated_ids) << r.model;
    EXPECT_EQ(text, r.generated_text) << r.model;
    if (r.bos_only_tokens > 0) {
      o.prompt = "";  // BOS alone
      o.sampling.max_tokens = static_cast<uint32_t>(r.bos_only_tokens);
      std::string story;
      auto bos = tools::LocalGenerate(o, [&](std::string_view t) { story += t; });
      ASSERT_TRUE(bos.ok()) << bos.status().ToString();
      EXPECT_EQ(story.substr(0, r.bos_only_prefix.size()), r.bos_only_prefix) << r.model;
    }
  }
}

}  // namespace
}  // namespace bmad
