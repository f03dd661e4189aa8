#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/config/config_loader.h"

namespace bmad {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ConfigTest, EmptyDocumentGivesDefaults) {
  ConfigLoad load = LoadConfigText("", "empty.yaml");
  ASSERT_TRUE(load.ok()) << load.errors[0].ToString();
  EXPECT_EQ(load.config.scheduler.max_batch_tokens, 512);
  EXPECT_EQ(load.config.scheduler.max_wait_ms, 200);
  EXPECT_EQ(load.config.cache.block_size, 8);
  EXPECT_EQ(load.config.router.policy, RouterPolicy::kWeighted);
  EXPECT_DOUBLE_EQ(load.config.router.weight_queue, 0.6);
}

TEST(ConfigTest, LoadsEveryKindOfValue) {
  const char* yaml = R"(
log:
  level: debug
model:
  path: /models/m.gguf
scheduler:
  policy: static
  max_batch_tokens: 1024
  priority_decay: 2.5
cache:
  kv_bytes: 64MiB
  prefix_caching: false
parallel:
  pp: 2
  stage_layers: [3, 2]
worker:
  pool: long_tail
)";
  ConfigLoad load = LoadConfigText(yaml, "t.yaml");
  ASSERT_TRUE(load.ok()) << load.errors[0].ToString();
  const ServerConfig& c = load.config;
  EXPECT_EQ(c.log.level, log::Level::kDebug);
  EXPECT_EQ(c.model.path, "/models/m.gguf");
  EXPECT_EQ(c.scheduler.policy, SchedulerPolicy::kStatic);
  EXPECT_EQ(c.scheduler.max_batch_tokens, 1024);
  EXPECT_DOUBLE_EQ(c.scheduler.priority_decay, 2.5);
  EXPECT_EQ(c.cache.kv_bytes, 64ll << 20);
  EXPECT_FALSE(c.cache.prefix_caching);
  EXPECT_EQ(c.parallel.stage_layers, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(c.worker.pool, ReplicaPool::kLongTail);
}

TEST(ConfigTest, ReportsEveryProblemWithKeyAndPosition) {
  const char* yaml =
      "scheduler:\n"
      "  max_seqs: 8\n"
      "  max_batch_tokens: lots\n"     // line 3: wrong type
      "  bogus_key: 1\n"               // line 4: unknown key
      "cache:\n"
      "  block_size: 0\n"              // line 6: out of range
      "router:\n"
      "  policy: random\n";            // line 8: bad enum
  ConfigLoad load = LoadConfigText(yaml, "bad.yaml");
  ASSERT_EQ(load.errors.size(), 4u);
  auto find = [&](const std::string& key) -> const ConfigError* {
    for (const auto& e : load.errors)
      if (e.key == key) return &e;
    return nullptr;
  };
  const ConfigError* type = find("scheduler.max_batch_tokens");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->line, 3);
  EXPECT_EQ(type->column, 21);
  EXPECT_NE(type->message.find("expected an integer"), std::string::npos);
  EXPECT_EQ(type->ToString(),
            "bad.yaml:3:21: scheduler.max_batch_tokens: expected an integer, got 'lots'");
  const ConfigError* unknown = find("scheduler.bogus_key");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->line, 4);
  EXPECT_NE(unknown->message.find("unknown key"), std::string::npos);
  EXPECT_NE(unknown->message.find("max_wait_ms"), std::string::npos);  // lists known keys
  const ConfigError* range = find("cache.block_size");
  ASSERT_NE(range, nullptr);
  EXPECT_EQ(range->line, 6);
  EXPECT_NE(range->message.find("between 1 and 1024"), std::string::npos);
  const ConfigError* choice = find("router.policy");
  ASSERT_NE(choice, nullptr);
  EXPECT_NE(choice->message.find("weighted, round_robin, least_loaded"), std::string::npos);
  // A bad value leaves the default in place.
  EXPECT_EQ(load.config.cache.block_size, 8);
}

TEST(ConfigTest, UnknownSectionAndStructuralErrors) {
  ConfigLoad load = LoadConfigText("shceduler:\n  max_seqs: 2\nlog: 5\n", "s.yaml");
  ASSERT_EQ(load.errors.size(), 2u);
  EXPECT_EQ(load.errors[0].key, "log");
  EXPECT_NE(load.errors[0].message.find("expected a mapping"), std::string::npos);
  EXPECT_EQ(load.errors[1].key, "shceduler");
  EXPECT_EQ(load.errors[1].line, 1);
  EXPECT_NE(load.errors[1].message.find("unknown section"), std::string::npos);

  ConfigLoad top = LoadConfigText("- a\n- b\n", "list.yaml");
  ASSERT_EQ(top.errors.size(), 1u);
  EXPECT_NE(top.errors[0].message.find("top level"), std::string::npos);

  ConfigLoad list = LoadConfigText("parallel:\n  stage_layers: [1, x]\n  tp: [2]\n", "l.yaml");
  ASSERT_EQ(list.errors.size(), 2u);
  EXPECT_EQ(list.errors[0].key, "parallel.tp");
  EXPECT_EQ(list.errors[1].key, "parallel.stage_layers[1]");
}

// An empty value is reported on its key's line (yaml-cpp marks it where the next key starts).
TEST(ConfigTest, AnEmptyValueIsReportedOnItsKeysLine) {
  ConfigLoad load = LoadConfigText("scheduler:\n  max_seqs:\n  max_wait_ms: 5\n", "e.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].key, "scheduler.max_seqs");
  EXPECT_EQ(load.errors[0].line, 2);
  EXPECT_EQ(load.errors[0].column, 3);
  EXPECT_NE(load.errors[0].message.find("null value"), std::string::npos);
}

TEST(ConfigTest, SyntaxErrorHasPosition) {
  ConfigLoad load = LoadConfigText("scheduler:\n  max_seqs: [1, 2\n", "syntax.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_GT(load.errors[0].line, 0);
  EXPECT_NE(load.errors[0].message.find("YAML syntax error"), std::string::npos);
}

TEST(ConfigTest, NestingPastYamlCppsLimitIsNamed) {
  // yaml-cpp's own words were "bad file".
  const std::string deep = "model:\n  path: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  ConfigLoad load = LoadConfigText(deep, "deep.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(load.errors[0].message.find("YAML nested too deeply"), std::string::npos) << load.errors[0].message;
}

TEST(ConfigTest, AnIntegerPast64BitsIsOutOfRange) {
  ConfigLoad load = LoadConfigText("worker:\n  threads: 99999999999999999999999\n", "big.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(load.errors[0].message.find("must be between 0 and"), std::string::npos) << load.errors[0].message;
  EXPECT_NE(load.errors[0].message.find("got 99999999999999999999999"), std::string::npos);
  // With a '+' too.
  ConfigLoad plus = LoadConfigText("worker:\n  threads: +99999999999999999999999\n", "plus.yaml");
  ASSERT_EQ(plus.errors.size(), 1u);
  EXPECT_NE(plus.errors[0].message.find("must be between 0 and"), std::string::npos) << plus.errors[0].message;
  // A size whose suffix takes it past 64 bits too (it was "expected an integer").
  ConfigLoad size = LoadConfigText("worker:\n  arena_bytes: 99999999999T\n", "size.yaml");
  ASSERT_EQ(size.errors.size(), 1u);
  EXPECT_NE(size.errors[0].message.find("must be between"), std::string::npos) << size.errors[0].message;
  EXPECT_NE(size.errors[0].message.find("got 99999999999T"), std::string::npos) << size.errors[0].message;
}

TEST(ConfigTest, APlusSignedNumberIsTheNumberAsInYaml) {
  // YAML 1.2's core schema reads +8000 as 8000; it used to be "expected an integer".
  ConfigLoad load = LoadConfigText("coordinator:\n  http_port: +8000\n  queue_timeout_ms: +1500\n"
                                   "router:\n  weight_queue: +.5\n"
                                   "cache:\n  kv_bytes: +64MiB\n",
                                   "plus.yaml");
  ASSERT_TRUE(load.errors.empty()) << load.errors[0].message;
  EXPECT_EQ(load.config.coordinator.http_port, 8000);
  EXPECT_EQ(load.config.coordinator.queue_timeout_ms, 1500);
  EXPECT_DOUBLE_EQ(load.config.router.weight_queue, 0.5);
  EXPECT_EQ(load.config.cache.kv_bytes, 64ll << 20);
  // One sign, before the digits.
  for (const char* bad : {"++8000", "+-8000", "+", "8+000"}) {
    ConfigLoad refused = LoadConfigText(std::string("coordinator:\n  http_port: ") + bad + "\n", "bad.yaml");
    ASSERT_EQ(refused.errors.size(), 1u) << bad;
    EXPECT_NE(refused.errors[0].message.find("expected an integer"), std::string::npos) << refused.errors[0].message;
  }
}

TEST(ConfigTest, AReplicaIdTooLongForTheWorkersRoutingIdIsRefused) {
  // The worker's ZeroMQ routing id is the replica id and a 17-byte incarnation, and ZeroMQ
  // takes at most 255 bytes: a 239-byte id made the socket option throw at start-up, an abort
  // instead of a config error.
  ConfigLoad ok = LoadConfigText("worker:\n  replica_id: " + std::string(200, 'r') + "\n", "ok.yaml");
  EXPECT_TRUE(ok.errors.empty()) << ok.errors[0].message;
  ConfigLoad load = LoadConfigText("worker:\n  replica_id: " + std::string(239, 'r') + "\n", "long.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].key, "worker.replica_id");
  EXPECT_NE(load.errors[0].message.find("is 239 bytes long, at most 200 allowed"), std::string::npos)
      << load.errors[0].message;
}

TEST(ConfigTest, AnUnknownChatTemplateIsRefusedByTheCheckToo) {
  // Only the coordinator refused it, at start: `bmad config check` passed the file.
  EXPECT_TRUE(LoadConfigText("model:\n  chat_template: llama3.1\n", "ok.yaml").errors.empty());
  EXPECT_TRUE(LoadConfigText("model:\n  chat_template: \"\"\n", "auto.yaml").errors.empty());
  ConfigLoad load = LoadConfigText("model:\n  chat_template: llama-3\n", "bad.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].key, "model.chat_template");
  EXPECT_NE(load.errors[0].message.find("'llama-3', not one of chatml, llama2, llama3, llama3.1"), std::string::npos)
      << load.errors[0].message;
}

TEST(ConfigTest, ASecondYamlDocumentIsAnErrorNotDropped) {
  // Only the first was read, silently: model.path came out "a".
  ConfigLoad load = LoadConfigText("model:\n  path: a\n---\nmodel:\n  path: b\n", "multi.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].ToString().rfind("multi.yaml:4:", 0), 0u) << load.errors[0].ToString();
  EXPECT_NE(load.errors[0].message.find("a config file holds one YAML document"), std::string::npos);
  // One document, with its optional start and end markers, and a trailing empty one, are fine.
  EXPECT_TRUE(LoadConfigText("---\nmodel:\n  path: a\n...\n", "one.yaml").ok());
  EXPECT_TRUE(LoadConfigText("model:\n  path: a\n---\n", "trailing.yaml").ok());
}

TEST(ConfigTest, CrossKeyRulesPointAtTheKey) {
  ConfigLoad load = LoadConfigText("parallel:\n  pp: 3\n  stage_layers: [1, 2]\n", "x.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].key, "parallel.stage_layers");
  EXPECT_EQ(load.errors[0].line, 3);
  EXPECT_NE(load.errors[0].message.find("parallel.pp is 3"), std::string::npos);

  ConfigLoad seqs =
      LoadConfigText("scheduler:\n  max_seqs: 100\n  max_batch_tokens: 10\n", "y.yaml");
  ASSERT_EQ(seqs.errors.size(), 1u);
  EXPECT_EQ(seqs.errors[0].key, "scheduler.max_seqs");

  // A value an override set is blamed on the override, not on the file's line for that key
  // (which holds another value).
  ConfigLoad overridden = LoadConfigText("scheduler:\n  max_seqs: 64\n", "z.yaml", {"scheduler.max_seqs=1000"});
  ASSERT_EQ(overridden.errors.size(), 1u);
  EXPECT_EQ(overridden.errors[0].key, "scheduler.max_seqs");
  EXPECT_EQ(overridden.errors[0].source, "<override>");
  EXPECT_EQ(overridden.errors[0].line, 0);
  EXPECT_NE(overridden.errors[0].message.find("is 1000"), std::string::npos);
}

TEST(ConfigTest, OverridesApplyAfterTheFile) {
  ConfigLoad load = LoadConfigText("worker:\n  replica_id: a\n", "o.yaml",
                                   {"worker.replica_id=b", "parallel.stage_layers=[2]",
                                    "worker.pool=long_tail"});
  ASSERT_TRUE(load.ok()) << load.errors[0].ToString();
  EXPECT_EQ(load.config.worker.replica_id, "b");
  EXPECT_EQ(load.config.parallel.stage_layers, std::vector<int64_t>{2});
  EXPECT_EQ(load.config.worker.pool, ReplicaPool::kLongTail);

  ConfigLoad bad = LoadConfigText("", "o.yaml", {"worker.nope=1", "noequals", "cache.block_size=x"});
  ASSERT_EQ(bad.errors.size(), 3u);
  EXPECT_EQ(bad.errors[0].key, "worker.nope");
  EXPECT_EQ(bad.errors[0].source, "<override>");
  // An override has no line and column to name; its errors help as a file's do.
  EXPECT_EQ(bad.errors[0].ToString().rfind("<override>: worker.nope: unknown key (known keys: ", 0), 0u)
      << bad.errors[0].ToString();
  EXPECT_NE(bad.errors[0].message.find("replica_id"), std::string::npos) << bad.errors[0].message;
  EXPECT_EQ(bad.errors[1].ToString(), "<override>: noequals: expected section.key=value");
  ConfigLoad section = LoadConfigText("", "o.yaml", {"workers.pool=long_tail"});
  ASSERT_EQ(section.errors.size(), 1u);
  EXPECT_NE(section.errors[0].message.find("unknown section 'workers' (known sections:"),
            std::string::npos)
      << section.errors[0].ToString();
}

TEST(ConfigTest, AnOverrideOfATextKeyTakesTheTextAsWritten) {
  // A path may hold what YAML would read as a comment or a mapping; quoted, the text is YAML.
  ConfigLoad load = LoadConfigText("", "o.yaml",
                                   {"model.path=/models/a #1: final!.gguf", "worker.replica_id='it''s'",
                                    "model.name=\"served: one\""});
  ASSERT_TRUE(load.ok()) << load.errors[0].ToString();
  EXPECT_EQ(load.config.model.path, "/models/a #1: final!.gguf");
  EXPECT_EQ(load.config.worker.replica_id, "it's");
  EXPECT_EQ(load.config.model.name, "served: one");
  // Other keys still read YAML, and bad YAML is named.
  ConfigLoad bad = LoadConfigText("", "o.yaml", {"parallel.stage_layers=[2"});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].key, "parallel.stage_layers");
  EXPECT_NE(bad.errors[0].message.find("bad value"), std::string::npos) << bad.errors[0].ToString();
}

TEST(ConfigTest, DumpLoadsBackToTheSameConfig) {
  ServerConfig config;
  config.model.path = "/m with space.gguf";
  config.parallel.pp = 2;
  config.parallel.stage_layers = {4, 8};
  config.router.weight_memory = 0.25;
  config.scheduler.policy = SchedulerPolicy::kFcfs;
  const std::string yaml = DumpConfigYaml(config);
  ConfigLoad load = LoadConfigText(yaml, "dump.yaml");
  ASSERT_TRUE(load.ok()) << load.errors[0].ToString() << "\n" << yaml;
  EXPECT_EQ(DumpConfigYaml(load.config), yaml);
  EXPECT_EQ(load.config.model.path, "/m with space.gguf");
  EXPECT_EQ(load.config.parallel.stage_layers, (std::vector<int64_t>{4, 8}));
  // Numbers as written, exactly (0.6 was dumped as 0.59999999999999998).
  EXPECT_NE(yaml.find("weight_queue: 0.6\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("weight_memory: 0.25\n"), std::string::npos) << yaml;
  EXPECT_EQ(load.config.router.weight_queue, config.router.weight_queue);
}

TEST(ConfigTest, GetOneValue) {
  ConfigLoad load = LoadConfigText("parallel:\n  pp: 2\n  stage_layers: [3, 4]\n", "g.yaml");
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(*GetConfigValue(load.config, "parallel.pp"), "2");
  EXPECT_EQ(*GetConfigValue(load.config, "parallel.stage_layers"), "3,4");
  EXPECT_EQ(*GetConfigValue(load.config, "worker.pool"), "normal");
  EXPECT_EQ(*GetConfigValue(load.config, "coordinator.http_host"), "127.0.0.1");
  EXPECT_EQ(GetConfigValue(load.config, "nope.key").status().code(), StatusCode::kNotFound);
  // A number comes back whole (it was 6 significant digits: 0.123457).
  ConfigLoad precise = LoadConfigText("router:\n  weight_queue: 0.1234567891\n", "p.yaml");
  ASSERT_TRUE(precise.ok());
  EXPECT_EQ(*GetConfigValue(precise.config, "router.weight_queue"), "0.1234567891");
  EXPECT_EQ(*GetConfigValue(precise.config, "router.weight_memory"), "0.1");
}

TEST(ConfigTest, MissingFileIsAnError) {
  ConfigLoad load = LoadConfigFile("/nonexistent/bmad.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(load.errors[0].ToString().find("cannot open"), std::string::npos);
  Result<ServerConfig> r = ReadConfigFile("/nonexistent/bmad.yaml");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(ConfigTest, EveryKeyIsDocumentedWithItsDefault) {
  const std::string doc = ReadFile(std::string(BMAD_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_FALSE(doc.empty());
  for (const std::string& key : ListConfigKeys()) {
    EXPECT_NE(doc.find("`" + key + "`"), std::string::npos)
        << key << " is missing from docs/configuration.md";
  }
  EXPECT_NE(doc.find(ConfigReferenceMarkdown()), std::string::npos)
      << "docs/configuration.md's key reference is stale: replace it with the output of "
         "`build/bin/bmad config docs`";
}

TEST(ConfigTest, ShippedExampleConfigsAreValid) {
  for (const char* file : {"/deploy/config/local.yaml"}) {
    ConfigLoad load = LoadConfigFile(std::string(BMAD_SOURCE_DIR) + file);
    EXPECT_TRUE(load.ok()) << file << ": " << (load.ok() ? "" : load.errors[0].ToString());
  }
}

}  // namespace
}  // namespace bmad

namespace bmad {
namespace {

TEST(ModelConfigTest, ServedNameIsTheNameElseTheFileStem) {
  ModelConfig m;
  m.path = "/models/llama-2-7b.Q8_0.gguf";
  EXPECT_EQ(m.ServedName(), "llama-2-7b.Q8_0");
  m.path = "stories260K.gguf";
  EXPECT_EQ(m.ServedName(), "stories260K");
  m.name = "my-model";
  EXPECT_EQ(m.ServedName(), "my-model");
}

TEST(ConfigTest, AFileFarTooLongForAConfigIsRefusedUnread) {
  ConfigLoad load = LoadConfigFile("/dev/zero");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].ToString(), "/dev/zero: is larger than 1048576 bytes, the most read");
}

TEST(ConfigTest, ADirectoryIsNotAnEmptyConfig) {
  const std::string dir = ::testing::TempDir();
  ConfigLoad load = LoadConfigFile(dir);
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(load.errors[0].ToString().find("is a directory"), std::string::npos)
      << load.errors[0].ToString();
  EXPECT_FALSE(ReadConfigFile(dir).ok());
}

TEST(ConfigTest, ARepeatedKeyOrSectionIsAnError) {
  // yaml-cpp keeps both entries and lookups find the first, so the second was silently ignored.
  ConfigLoad key = LoadConfigText("coordinator:\n  http_port: 8000\n  http_port: 8001\n", "k.yaml");
  ASSERT_EQ(key.errors.size(), 1u);
  EXPECT_EQ(key.errors[0].key, "coordinator.http_port");
  EXPECT_EQ(key.errors[0].line, 3);
  EXPECT_NE(key.errors[0].message.find("appears twice"), std::string::npos);

  ConfigLoad section = LoadConfigText("scheduler:\n  max_seqs: 2\nscheduler:\n  max_seqs: 3\n", "s.yaml");
  ASSERT_EQ(section.errors.size(), 1u);
  EXPECT_EQ(section.errors[0].key, "scheduler");
  EXPECT_EQ(section.errors[0].line, 3);
  EXPECT_NE(section.errors[0].message.find("appears twice"), std::string::npos);
}

TEST(ConfigTest, EndpointPortsAreChecked) {
  // ZeroMQ would bind tcp://...:99999 to another port and say nothing.
  for (const char* bad : {"tcp://127.0.0.1:99999", "tcp://127.0.0.1:-5", "tcp://127.0.0.1:abc",
                          "tcp://127.0.0.1:0", "tcp://127.0.0.1:", "tcp://127.0.0.1",
                          "tcp://:5555", "ipc://", "udp://127.0.0.1:5555", "inproc://workers"}) {
    ConfigLoad load = LoadConfigText(std::string("coordinator:\n  client_endpoint: \"") + bad + "\"\n",
                                     "e.yaml");
    ASSERT_EQ(load.errors.size(), 1u) << bad;
    EXPECT_EQ(load.errors[0].key, "coordinator.client_endpoint") << bad;
    EXPECT_NE(load.errors[0].message.find(bad), std::string::npos) << load.errors[0].message;
  }
  for (const char* good : {"tcp://127.0.0.1:5555", "tcp://*:65535", "tcp://127.0.0.1:*",
                           "tcp://[::1]:1", "ipc:///tmp/bmad.sock"}) {
    ConfigLoad load = LoadConfigText(std::string("coordinator:\n  client_endpoint: \"") + good + "\"\n",
                                     "e.yaml");
    EXPECT_TRUE(load.ok()) << good << ": " << load.errors[0].ToString();
  }
}

TEST(ConfigTest, TheCorsOriginIsNoneAnyOrOneOrigin) {
  for (const char* good : {"", "*", "https://chat.example.com", "http://localhost:3000", "http://[::1]:8080"}) {
    ConfigLoad load = LoadConfigText(std::string("coordinator:\n  http_cors_origin: \"") + good + "\"\n", "c.yaml");
    EXPECT_TRUE(load.ok()) << good << ": " << load.errors[0].ToString();
  }
  for (const char* bad : {"chat.example.com", "https://chat.example.com/", "https://a.com, https://b.com",
                          "https://", "ftp://x.com", "**"}) {
    ConfigLoad load = LoadConfigText(std::string("coordinator:\n  http_cors_origin: \"") + bad + "\"\n", "c.yaml");
    ASSERT_EQ(load.errors.size(), 1u) << bad;
    EXPECT_EQ(load.errors[0].key, "coordinator.http_cors_origin") << bad;
    EXPECT_NE(load.errors[0].message.find(bad), std::string::npos) << load.errors[0].message;
  }
}

TEST(ConfigTest, TheCoordinatorsPortsMustDiffer) {
  ConfigLoad load =
      LoadConfigText("coordinator:\n  http_port: 9400\nmetrics:\n  coordinator_port: 9400\n", "p.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].key, "metrics.coordinator_port");
  EXPECT_EQ(load.errors[0].message,
            "port 9400 is coordinator.http_port's too (the coordinator listens on both, on host 127.0.0.1)");
  // 0 picks a free port for each: no clash.
  EXPECT_TRUE(LoadConfigText("coordinator:\n  http_port: 0\nmetrics:\n  coordinator_port: 0\n", "z.yaml").ok());
  // Its sockets too (only the coordinator found out, at start: "address in use"), whatever the
  // spelling of the host, a wildcard clashing with every host.
  struct Case {
    std::string yaml;
    std::string key;
    std::string message;
  };
  std::vector<Case> clashes = {
      {"coordinator:\n  http_port: 23101\n  client_endpoint: tcp://127.0.0.1:23101\n", "coordinator.client_endpoint",
       "port 23101 is coordinator.http_port's too (the coordinator listens on both, on host 127.0.0.1)"},
      {"coordinator:\n  client_endpoint: tcp://127.0.0.1:23101\n  worker_endpoint: tcp://0.0.0.0:23101\n",
       "coordinator.worker_endpoint",
       "port 23101 is coordinator.client_endpoint's too (the coordinator listens on both, on hosts 127.0.0.1 and 0.0.0.0)"},
      {"metrics:\n  coordinator_port: 23104\ncoordinator:\n  worker_endpoint: tcp://*:23104\n", "coordinator.worker_endpoint",
       "port 23104 is metrics.coordinator_port's too"},
  };
  clashes.push_back({"coordinator:\n  client_endpoint: ipc:///tmp/c\n  worker_endpoint: ipc:///tmp/c\n",
                     "coordinator.worker_endpoint", "must differ from coordinator.client_endpoint"});
  for (const Case& c : clashes) {
    ConfigLoad clash = LoadConfigText(c.yaml, "c.yaml");
    ASSERT_EQ(clash.errors.size(), 1u) << c.yaml;
    EXPECT_EQ(clash.errors[0].key, c.key) << c.yaml;
    EXPECT_NE(clash.errors[0].message.find(c.message), std::string::npos) << clash.errors[0].message;
  }
  // Two specific hosts may share a port; an ipc:// endpoint and a * port have none to share.
  for (const char* fine : {"coordinator:\n  http_host: 10.0.0.5\n  http_port: 23101\n  client_endpoint: tcp://127.0.0.1:23101\n",
                           "coordinator:\n  client_endpoint: ipc:///tmp/c\n  worker_endpoint: tcp://127.0.0.1:*\n",
                           "coordinator:\n  client_endpoint: tcp://127.0.0.1:*\n  worker_endpoint: tcp://127.0.0.1:*\n"}) {
    ConfigLoad load = LoadConfigText(fine, "f.yaml");
    EXPECT_TRUE(load.ok()) << fine << load.errors[0].ToString();
  }
}

TEST(ConfigTest, TheLivenessTimeoutCoversTwoHeartbeats) {
  ConfigLoad load = LoadConfigText(
      "coordinator:\n  liveness_timeout_ms: 1000\nworker:\n  heartbeat_ms: 3000\n", "h.yaml");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_EQ(load.errors[0].key, "coordinator.liveness_timeout_ms");
  EXPECT_EQ(load.errors[0].line, 2);  // points at the key in the file
  EXPECT_NE(load.errors[0].message.find("less than twice worker.heartbeat_ms (3000)"), std::string::npos)
      << load.errors[0].message;
  // Through --set too.
  ConfigLoad overridden = LoadConfigText("", "o.yaml", {"worker.heartbeat_ms=1001"});
  ASSERT_EQ(overridden.errors.size(), 1u);
  EXPECT_EQ(overridden.errors[0].key, "coordinator.liveness_timeout_ms");
  EXPECT_TRUE(LoadConfigText("worker:\n  heartbeat_ms: 1000\n", "ok.yaml").ok());  // exactly twice
}

// A replica's heartbeat lists every request it holds: the message limit must take the largest
// (12 bytes a request, up to max_seqs + max_waiting, and 4096 more), or a busy replica's
// heartbeats are refused and it is taken for dead.
TEST(ConfigTest, TheMessageLimitHoldsAFullReplicasHeartbeat) {
  ConfigLoad small = LoadConfigText("coordinator:\n  max_message_bytes: 4096\n", "m.yaml");
  ASSERT_EQ(small.errors.size(), 1u);
  EXPECT_EQ(small.errors[0].key, "coordinator.max_message_bytes");
  EXPECT_NE(small.errors[0].message.find("less than a replica's heartbeat may need (54016 bytes"), std::string::npos)
      << small.errors[0].message;  // 12 x (64 + 4096) + 4096
  EXPECT_TRUE(LoadConfigText("coordinator:\n  max_message_bytes: 54016\n", "ok.yaml").ok());
  // A long waiting queue needs more than the default 64 MiB.
  ConfigLoad queue = LoadConfigText("scheduler:\n  max_waiting: 16000000\n", "q.yaml");
  ASSERT_EQ(queue.errors.size(), 1u);
  EXPECT_EQ(queue.errors[0].key, "coordinator.max_message_bytes");
}

}  // namespace
}  // namespace bmad
