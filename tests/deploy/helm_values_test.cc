// The Helm chart's values (helm/bmad/values.yaml, values.schema.json) checked with the real helm:
// the defaults and every file under helm/bmad/examples lint and render; helm refuses a
// misspelt key or a value of the wrong type or range, naming it (without the schema it would
// ignore the first and render the second into a manifest Kubernetes refuses, or worse, accepts);
// the free-form sections (the bmad config file, labels, scheduling, the model volume) stay open;
// the security contexts reach the pods they are meant for, and those worker pods cannot run
// under are refused; the pods run under their ServiceAccount, with no API token; the
// ServiceMonitor carries the labels, interval and timeout given; a worker's drain ends before
// its pod is killed.
//
// helm comes from deploy/install-helm.sh, as for helm_chart_test.cc. Without helm this test
// fails; it never skips.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "tests/deploy/deploy_test_util.h"

namespace bmad::testing {
namespace {

using namespace std::chrono_literals;

// The files under helm/bmad/examples, sorted by name.
std::vector<std::string> ExampleValueFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kChart + "/examples")) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// helm's refusal of `values`, as values.schema.json words it: "" when helm refused them so,
// else what happened instead.
std::string SchemaRefusal(const std::vector<std::string>& values, CommandResult* result) {
  *result = Template(values);
  if (result->status == 0) return "rendered";
  if (result->err.find("schema") == std::string::npos) return "refused, but not by the schema: " + result->err;
  return "";
}

TEST(HelmValuesTest, TheDefaultsAndEveryExampleLintAndRender) {
  REQUIRE_HELM();
  const std::vector<std::string> examples = ExampleValueFiles();
  ASSERT_FALSE(examples.empty()) << "helm/bmad/examples holds no values file";
  std::vector<std::vector<std::string>> value_sets = {{}};
  for (const std::string& file : examples) value_sets.push_back({"-f", file});
  for (const std::vector<std::string>& values : value_sets) {
    const std::string what = values.empty() ? "the defaults" : values[1];
    std::vector<std::string> lint = {Helm(), "lint", "--strict", kChart};
    lint.insert(lint.end(), values.begin(), values.end());
    CommandResult linted = RunCommand(lint, 120s);
    EXPECT_EQ(linted.status, 0) << what << ":\n" << linted.out << linted.err;
    // With and without the Prometheus operator's CRDs (the ServiceMonitor's values are checked
    // either way; it is rendered only with them).
    for (const bool operator_crds : {false, true}) {
      std::vector<std::string> args = values;
      if (operator_crds) args.insert(args.end(), {"--api-versions", "monitoring.coreos.com/v1"});
      const Rendered r = Render(args);
      EXPECT_EQ(r.Kind("Deployment").size(), 1u) << what;
      EXPECT_FALSE(r.Kind("LeaderWorkerSet").empty()) << what;
      EXPECT_EQ(r.Kind("ServiceMonitor").size(), operator_crds ? 1u : 0u) << what;
    }
  }
}

// A misspelt key was ignored: `--set pools.normal.replcas=4` rendered one replica and said nothing.
TEST(HelmValuesTest, AMisspeltKeyIsRefusedByName) {
  REQUIRE_HELM();
  struct Case {
    std::string set;     // the misspelt --set
    std::string parent;  // the section holding it ("" for the top level)
    std::string key;     // the key helm names as unknown
  };
  const std::vector<Case> cases = {
      {"worker.replcas=2", "", "worker"},  // workers, and a section of its own
      {"pools.normal.replcas=4", "pools.normal", "replcas"},
      {"pools.shortTail.enabled=true", "pools", "shortTail"},
      {"image.tags=0.2.0", "image", "tags"},
      {"coordinator.service.typ=LoadBalancer", "coordinator.service", "typ"},
      {"coordinator.probes.liveness.timeoutSeconds=3", "coordinator.probes.liveness", "timeoutSeconds"},
      {"workers.extraArg={--log-level,debug}", "workers", "extraArg"},
      {"serviceMonitor.intervall=30s", "serviceMonitor", "intervall"},
  };
  for (const Case& c : cases) {
    CommandResult r;
    EXPECT_EQ(SchemaRefusal({"--set", c.set}, &r), "") << c.set;
    EXPECT_NE(r.err.find(c.key), std::string::npos) << c.set << ": " << r.err;
    EXPECT_NE(r.err.find("not allowed"), std::string::npos) << c.set << ": " << r.err;
    if (!c.parent.empty()) {
      EXPECT_TRUE(HelmErrorNamesValue(r.err, c.parent)) << c.set << ": " << r.err;
    }
  }
}

// A value of the wrong type or out of range rendered a manifest Kubernetes refuses at apply
// time (a port "abc", a label value 1), or one it takes in another sense (the string "false" is
// true in a template's `if`).
TEST(HelmValuesTest, AValueOfTheWrongTypeOrRangeIsRefusedByName) {
  REQUIRE_HELM();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--set", "ports.http=abc"}, "ports.http"},
      {{"--set", "ports.http=70000"}, "ports.http"},
      {{"--set", "ports.ssh=0"}, "ports.ssh"},
      {{"--set", "pools.normal.replicas=-1", "--set", "pools.longTail.replicas=3"}, "pools.normal.replicas"},
      {{"--set", "pools.normal.replicas=abc"}, "pools.normal.replicas"},
      {{"--set", "pools.longTail.podsPerReplica=0"}, "pools.longTail.podsPerReplica"},
      {{"--set", "pools.normal.ranksPerPod=two"}, "pools.normal.ranksPerPod"},
      {{"--set", "pools.normal.podDisruptionBudget.maxUnavailable=half"}, "pools.normal.podDisruptionBudget.maxUnavailable"},
      {{"--set", "pools.normal.autoscaling.maxReplicas=0"}, "pools.normal.autoscaling.maxReplicas"},
      {{"--set", "image.pullPolicy=Sometimes"}, "image.pullPolicy"},
      {{"--set", "coordinator.service.type=ExternalName"}, "coordinator.service.type"},
      {{"--set", "coordinator.terminationGracePeriodSeconds=-5"}, "coordinator.terminationGracePeriodSeconds"},
      {{"--set-string", "networkPolicy.enabled=false"}, "networkPolicy.enabled"},
      {{"--set", "commonLabels.tier=1"}, "commonLabels.tier"},
      {{"--set", "workers.shmSize=16GB"}, "workers.shmSize"},
      {{"--set", "serviceMonitor.interval=fast"}, "serviceMonitor.interval"},
      {{"--set", "serviceMonitor.scrapeTimeout=10"}, "serviceMonitor.scrapeTimeout"},
      {{"--set", "model.mountPath=models"}, "model.mountPath"},
      {{"--set", "fullnameOverride=My_Release"}, "fullnameOverride"},
  };
  for (const auto& [values, key] : cases) {
    CommandResult r;
    EXPECT_EQ(SchemaRefusal(values, &r), "") << values[1];
    EXPECT_TRUE(HelmErrorNamesValue(r.err, key)) << values[1] << ": " << r.err;
  }
}

// The schema leaves the free-form sections open: any config key (`bmad config check` judges
// those: helm_chart_test.cc), labels, annotations, scheduling, resources, any volume source for
// the model; and takes each documented spelling of the values that have several.
TEST(HelmValuesTest, FreeFormSectionsAndEveryDocumentedSpellingAreTaken) {
  REQUIRE_HELM();
  const Rendered r = Render({
      "--set", "config.worker.no_such_key=1",
      "--set", "commonLabels.team=ml",
      "--set", "coordinator.podAnnotations.example\\.com/owner=ml",
      "--set", "coordinator.nodeSelector.disk=ssd",
      "--set", "coordinator.resources.limits.cpu=4",
      "--set-json", R"(pools.normal.tolerations=[{"key": "gpu", "operator": "Exists"}])",
      "--set-json", R"(pools.normal.affinity={"podAntiAffinity": {}})",
      "--set", "model.volume.persistentVolumeClaim=null",
      "--set", "model.volume.nfs.server=nfs.example.com",
      "--set", "model.volume.nfs.path=/export/models",
      "--set", "pools.normal.ranksPerPod=1",          // a count, or "" (the default) for one per GPU
      "--set", "pools.longTail.ranksPerPod=null",
      "--set", "pools.normal.podDisruptionBudget.maxUnavailable=50%",  // a count or a percentage
      "--set", "coordinator.podDisruptionBudget.enabled=true",
      "--set", "coordinator.podDisruptionBudget.minAvailable=0",
      "--set", "pools.normal.autoscaling.waitingRequestsPerReplica=500m",  // a quantity or a number
      "--set-json", R"(workers.extraArgs=["--threads", 4])",  // --set makes a number of a numeric argument
  });
  ASSERT_FALSE(r.objects.empty());
  const YAML::Node coordinator = r.Get("Deployment", "bmad-coordinator");
  EXPECT_EQ(coordinator["metadata"]["labels"]["team"].as<std::string>(), "ml");
  const YAML::Node pod = coordinator["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["annotations"]["example.com/owner"].as<std::string>(), "ml");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["disk"].as<std::string>(), "ssd");
  bool nfs = false;
  for (const YAML::Node& v : pod["spec"]["volumes"]) {
    if (v["name"].as<std::string>() == "model") nfs = v["nfs"] && !v["persistentVolumeClaim"];
  }
  EXPECT_TRUE(nfs) << "the model volume is any volume source";
  EXPECT_NE(r.Get("ConfigMap", "bmad-config")["data"]["bmad.yaml"].as<std::string>().find("no_such_key"),
            std::string::npos);
  EXPECT_EQ(r.Get("PodDisruptionBudget", "bmad-normal")["spec"]["maxUnavailable"].as<std::string>(), "50%");
}

// Security contexts: none by default (the image runs as root, which multi-pod groups need); the
// chart-wide ones reach every pod and container; the coordinator's or a pool's own replace them.
TEST(HelmValuesTest, SecurityContextsReachEveryPodAndComponentsMayHaveTheirOwn) {
  REQUIRE_HELM();
  for (const YAML::Node& pod : PodTemplates(Render({}))) {
    EXPECT_FALSE(pod["spec"]["securityContext"]) << "none by default: the pods run as root, as they did";
    for (const YAML::Node& c : pod["spec"]["containers"]) EXPECT_FALSE(c["securityContext"]);
  }

  const Rendered r = Render({
      "--set", "podSecurityContext.seccompProfile.type=RuntimeDefault",
      "--set", "securityContext.allowPrivilegeEscalation=false",
      "--set-json", R"(coordinator.podSecurityContext={"runAsNonRoot": true, "runAsUser": 1000, "fsGroup": 1000})",
      "--set-json", R"(coordinator.securityContext={"readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}})",
      // A single-pod pool may run as non-root too.
      "--set-json", R"(pools.longTail.podSecurityContext={"runAsNonRoot": true, "runAsUser": 1000})",
  });
  const std::vector<YAML::Node> pods = PodTemplates(r);
  ASSERT_EQ(pods.size(), 5u) << "the coordinator, and a leader and a worker template per pool";
  for (const YAML::Node& pod : pods) {
    const YAML::Node labels = pod["metadata"]["labels"];
    // "coordinator", or "worker <pool>" for a pool's leader and worker templates.
    std::string what = labels["app.kubernetes.io/component"].as<std::string>();
    if (labels["bmad.io/pool"]) what.append(" ").append(labels["bmad.io/pool"].as<std::string>());
    const YAML::Node pod_context = pod["spec"]["securityContext"];
    const YAML::Node container_context = pod["spec"]["containers"][0]["securityContext"];
    ASSERT_TRUE(pod_context && container_context) << what;
    if (what == "coordinator") {
      // Its own, whole: not merged with the chart-wide ones.
      EXPECT_EQ(pod_context["runAsUser"].as<int>(), 1000);
      EXPECT_TRUE(pod_context["runAsNonRoot"].as<bool>());
      EXPECT_FALSE(pod_context["seccompProfile"]);
      EXPECT_TRUE(container_context["readOnlyRootFilesystem"].as<bool>());
      EXPECT_EQ(container_context["capabilities"]["drop"][0].as<std::string>(), "ALL");
      EXPECT_FALSE(container_context["allowPrivilegeEscalation"]);
      continue;
    }
    EXPECT_FALSE(container_context["allowPrivilegeEscalation"].as<bool>()) << what;
    if (what == "worker long_tail") {
      EXPECT_EQ(pod_context["runAsUser"].as<int>(), 1000) << what;
      EXPECT_FALSE(pod_context["seccompProfile"]) << what;
    } else {
      EXPECT_EQ(pod_context["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault") << what;
      EXPECT_FALSE(pod_context["runAsUser"]) << what;
    }
  }
}

// What cannot work is refused by name: a multi-pod group's sshd and ssh need root, and every
// worker pod writes to its root filesystem (/tmp).
TEST(HelmValuesTest, RefusesSecurityContextsWorkerPodsCannotRunUnder) {
  REQUIRE_HELM();
  const std::string multi_pod = kChart + "/examples/multi-node.yaml";  // both pools: 2 pods a replica
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"-f", multi_pod, "--set", "podSecurityContext.runAsNonRoot=true", "--set", "podSecurityContext.runAsUser=1000"},
       "pools.longTail: podsPerReplica is 2, so its pods must run as root"},
      {{"-f", multi_pod, "--set", "pools.normal.securityContext.runAsUser=1000"},
       "pools.normal: podsPerReplica is 2, so its pods must run as root"},
      {{"--set", "securityContext.readOnlyRootFilesystem=true"}, "readOnlyRootFilesystem cannot work for worker pods"},
  };
  for (const auto& [values, message] : refused) {
    CommandResult r = Template(values);
    EXPECT_NE(r.status, 0) << values[values.size() - 1];
    EXPECT_NE(r.err.find(message), std::string::npos) << values[values.size() - 1] << ": " << r.err;
  }
  // The container's user wins over the pod's, as in Kubernetes: root here.
  CommandResult root = Template({"-f", multi_pod, "--set", "podSecurityContext.runAsUser=1000", "--set",
                                 "securityContext.runAsUser=0"});
  EXPECT_EQ(root.status, 0) << root.err;
  // A read-only root filesystem for the coordinator alone is fine: it writes no file.
  CommandResult coordinator = Template({"--set", "coordinator.securityContext.readOnlyRootFilesystem=true"});
  EXPECT_EQ(coordinator.status, 0) << coordinator.err;
}

// The pods run under the release's own ServiceAccount (or one named), with no API token mounted:
// bmad never calls the Kubernetes API.
TEST(HelmValuesTest, PodsRunUnderTheirServiceAccountWithoutAnApiToken) {
  REQUIRE_HELM();
  auto expect_pods_use = [](const Rendered& r, const std::string& account, bool token, const std::string& what) {
    const std::vector<YAML::Node> pods = PodTemplates(r);
    EXPECT_EQ(pods.size(), 5u) << what;
    for (const YAML::Node& pod : pods) {
      ASSERT_TRUE(pod["spec"]["serviceAccountName"]) << what;
      EXPECT_EQ(pod["spec"]["serviceAccountName"].as<std::string>(), account) << what;
      ASSERT_TRUE(pod["spec"]["automountServiceAccountToken"]) << what;
      EXPECT_EQ(pod["spec"]["automountServiceAccountToken"].as<bool>(), token) << what;
    }
  };
  const Rendered defaults = Render({});
  ASSERT_EQ(defaults.Kind("ServiceAccount").size(), 1u);
  const YAML::Node account = defaults.Get("ServiceAccount", "bmad");
  EXPECT_FALSE(account["automountServiceAccountToken"].as<bool>());
  EXPECT_FALSE(account["metadata"]["annotations"]);
  expect_pods_use(defaults, "bmad", false, "defaults");

  // Named and annotated, e.g. for a cloud identity.
  const Rendered named = Render({"--set", "serviceAccount.name=bmad-serving", "--set",
                                 "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/bmad"});
  EXPECT_EQ(named.Get("ServiceAccount", "bmad-serving")["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
                .as<std::string>(),
            "arn:aws:iam::1:role/bmad");
  expect_pods_use(named, "bmad-serving", false, "named");

  // Not created: an existing one, or the namespace's default.
  const Rendered existing = Render({"--set", "serviceAccount.create=false", "--set", "serviceAccount.name=shared"});
  EXPECT_TRUE(existing.Kind("ServiceAccount").empty());
  expect_pods_use(existing, "shared", false, "an existing one");
  expect_pods_use(Render({"--set", "serviceAccount.create=false"}), "default", false, "the default one");

  // A token for whoever wants one, on the pods and as the created account's default.
  const Rendered token = Render({"--set", "automountServiceAccountToken=true"});
  EXPECT_TRUE(token.Get("ServiceAccount", "bmad")["automountServiceAccountToken"].as<bool>());
  expect_pods_use(token, "bmad", true, "with a token");
}

// The ServiceMonitor carries the labels a Prometheus selects it by (kube-prometheus-stack: its
// release's name), on top of the chart's, and scrapes every endpoint at the interval and timeout
// given.
TEST(HelmValuesTest, TheServiceMonitorCarriesItsLabelsIntervalAndTimeout) {
  REQUIRE_HELM();
  const std::vector<std::string> operator_crds = {"--api-versions", "monitoring.coreos.com/v1"};
  const Rendered defaults = Render(operator_crds);
  ASSERT_EQ(defaults.Kind("ServiceMonitor").size(), 1u);
  for (const YAML::Node& endpoint : defaults.Kind("ServiceMonitor")[0]["spec"]["endpoints"]) {
    EXPECT_EQ(endpoint["interval"].as<std::string>(), "15s");
    EXPECT_FALSE(endpoint["scrapeTimeout"]) << "Prometheus's own by default";
  }
  std::vector<std::string> values = operator_crds;
  values.insert(values.end(), {"--set", "serviceMonitor.labels.release=kube-prometheus-stack", "--set",
                               "serviceMonitor.interval=30s", "--set", "serviceMonitor.scrapeTimeout=20s"});
  const Rendered r = Render(values);
  ASSERT_EQ(r.Kind("ServiceMonitor").size(), 1u);
  const YAML::Node monitor = r.Kind("ServiceMonitor")[0];
  EXPECT_EQ(monitor["metadata"]["labels"]["release"].as<std::string>(), "kube-prometheus-stack");
  EXPECT_EQ(monitor["metadata"]["labels"]["app.kubernetes.io/instance"].as<std::string>(), "bmad");
  ASSERT_GT(monitor["spec"]["endpoints"].size(), 0u);
  for (const YAML::Node& endpoint : monitor["spec"]["endpoints"]) {
    EXPECT_EQ(endpoint["interval"].as<std::string>(), "30s");
    EXPECT_EQ(endpoint["scrapeTimeout"].as<std::string>(), "20s");
  }
  // A timeout longer than the interval: Prometheus would refuse the scrape config.
  for (const auto& [interval, timeout] : std::vector<std::pair<std::string, std::string>>{{"10s", "20s"}, {"1m", "1m500ms"}}) {
    std::vector<std::string> longer = operator_crds;
    longer.insert(longer.end(), {"--set", "serviceMonitor.interval=" + interval, "--set",
                                 "serviceMonitor.scrapeTimeout=" + timeout});
    const CommandResult r = Template(longer);
    EXPECT_NE(r.status, 0) << timeout;
    EXPECT_NE(r.err.find("serviceMonitor.scrapeTimeout (" + timeout + ") is longer than serviceMonitor.interval (" +
                         interval + ")"),
              std::string::npos)
        << r.err;
  }
  for (const auto& [interval, timeout] : std::vector<std::pair<std::string, std::string>>{{"1m30s", "90s"}, {"1m", "59s999ms"}}) {
    std::vector<std::string> within = operator_crds;
    within.insert(within.end(), {"--set", "serviceMonitor.interval=" + interval, "--set",
                                 "serviceMonitor.scrapeTimeout=" + timeout});
    const CommandResult r = Template(within);
    EXPECT_EQ(r.status, 0) << interval << " " << timeout << ": " << r.err;
  }
}

// A draining worker stops before its grace period ends, so that what still runs moves to other
// replicas instead of dying with the pod: the chart bounds the drain 15 s short of the grace
// period unless the config says otherwise, and refuses a bound of 0 or one the period does not
// cover.
TEST(HelmValuesTest, AWorkersDrainEndsBeforeItsPodIsKilled) {
  REQUIRE_HELM();
  const auto drain_ms = [](const Rendered& r) {
    const YAML::Node config = YAML::Load(r.Get("ConfigMap", "bmad-config")["data"]["bmad.yaml"].as<std::string>());
    return config["worker"]["drain_timeout_ms"].as<int64_t>();
  };
  EXPECT_EQ(drain_ms(Render({})), 285000);  // the default grace period: 300 s
  EXPECT_EQ(drain_ms(Render({"--set", "workers.terminationGracePeriodSeconds=60"})), 45000);
  EXPECT_EQ(drain_ms(Render({"--set", "config.worker.drain_timeout_ms=100000"})), 100000);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--set", "config.worker.drain_timeout_ms=0"}, "config.worker.drain_timeout_ms 0 (no bound)"},
      {{"--set", "config.worker.drain_timeout_ms=296000"},
       "workers.terminationGracePeriodSeconds (300) is shorter than config.worker.drain_timeout_ms (296000 ms)"},
  };
  for (const auto& [values, message] : refused) {
    const CommandResult r = Template(values);
    EXPECT_NE(r.status, 0) << values[1];
    EXPECT_NE(r.err.find(message), std::string::npos) << values[1] << ": " << r.err;
  }
  EXPECT_EQ(Template({"--set", "config.worker.drain_timeout_ms=295000"}).status, 0);
}

}  // namespace
}  // namespace bmad::testing
