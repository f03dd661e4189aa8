// bmad-worker: the ranks of one mpirun job. Every parallel.tp × parallel.pp consecutive ranks
// form a replica; each replica's leader (stage 0, tp rank 0) runs the WorkerServer (engine,
// coordinator link), the other ranks compute their shard of each step the leader sends them.
// A replica of one rank does not start MPI at all.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/cli/flags.h"
#include "common/clock.h"
#include "common/config/server_startup.h"
#include "common/log.h"
#include "common/signal_shared_pointer.h"
#include "common/version.h"
#if defined(BMAD_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "worker/parallel/nccl_communicator.h"
#endif
#include "worker/parallel/abort_flag.h"
#include "worker/parallel/follower_loop.h"
#include "worker/parallel/mpi_session.h"
#include "worker/parallel/replica_communicators.h"
#include "worker/parallel/step_in_flight.h"
#include "worker/parallel/topology.h"
#include "worker/parallel/watchdog.h"
#include "worker/server/replica.h"
#include "worker/server/worker_server.h"

namespace {

constexpr const char* kLog = "worker";
// Set and cleared by main; the handlers may run on any thread (cleared before the server goes).
bmad::SignalSharedPointer<bmad::worker::WorkerServer> g_server;
std::atomic<int> g_signals{0};
// Set once this rank's replica has stopped and it waits in MPI_Finalize for the job's other
// replicas: then a SIGTERM/SIGINT ends the wait (not SIGUSR1: mpirun sends a drain to every
// rank, and the replicas still draining must not be ended by one that already stopped).
std::atomic<bool> g_finishing{false};

// A signal to stop: the first drains the leader, a second stops it without waiting for its
// requests (the coordinator moves them). One before the server exists (while the model loads)
// is applied once it does. Returns whether it was the first.
bool ApplyStopSignal() {
  const bool first = g_signals.fetch_add(1) == 0;
  g_server.With([first](bmad::worker::WorkerServer& server) {
    if (first) {
      server.RequestStop();
    } else {
      server.RequestStopNow();
    }
  });
  return first;
}

// SIGTERM/SIGINT between steps: the leader drains and then stops its ranks with a shutdown plan
// (the other ranks wait for it). During a step, or a second time: every communicator wait ends
// at once, because mpirun signals a job's survivors when one of its ranks died.
void OnSignal(int) {
  const bool first = ApplyStopSignal();
  if (!first || bmad::parallel::StepInFlight().load() || g_finishing.load()) bmad::parallel::RequestAbort();
}

// SIGUSR1: a drain asked for through mpirun. Open MPI's mpirun turns a SIGTERM into SIGTERM to
// the ranks a second later and SIGKILL a second after that (odls_base_sigkill_timeout), too
// soon to drain, but forwards SIGUSR1 to every rank as it comes; launchers (the Helm chart's,
// cluster.sh) send that instead. The leader takes it as a SIGTERM, a second one too; the other
// ranks take note only (their leader stops them once it has drained), and it never aborts a step.
void OnDrainSignal(int) { (void)ApplyStopSignal(); }

int Fail(const char* what, const bmad::Status& s) {
  bmad::log::Error(kLog, what, {{"error", s}});
  return 1;
}

// A rank that failed leaves at once: no MPI_Finalize (it would wait for the peer that is gone)
// and no destructors (a collective may still be pending in MPI). mpirun reports the exit and
// stops the job's other ranks.
[[noreturn]] void ExitNow(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

// The tp group's NCCL communicator for a replica on GPUs, on the backend's compute stream so
// all-reduces run in order with the ops (null: not a CUDA backend).
bmad::Result<std::unique_ptr<bmad::parallel::Communicator>> DeviceTp(
    bmad::parallel::MpiCommunicator& tp, bmad::kernels::Backend& backend) {
#if defined(BMAD_HAVE_CUDA)
  if (auto* cuda = dynamic_cast<bmad::kernels::CudaBackend*>(&backend)) {
    BMAD_ASSIGN_OR_RETURN(std::unique_ptr<bmad::parallel::NcclCommunicator> nccl,
                          bmad::parallel::NcclCommunicator::Create(tp, "tp", cuda->compute_stream()));
    return std::unique_ptr<bmad::parallel::Communicator>(std::move(nccl));
  }
#endif
  (void)tp;
  (void)backend;
  return std::unique_ptr<bmad::parallel::Communicator>();
}

// A rank other than its replica's leader: compute steps until the leader says stop.
int RunFollowerRank(const bmad::ServerConfig& config, const bmad::parallel::ReplicaTopology& topo,
                    bmad::parallel::ReplicaCommunicators& comms, bmad::parallel::Watchdog& watchdog) {
  auto replica = bmad::worker::Replica::Create(config, nullptr, bmad::SystemClock::Instance(),
                                               {&topo, &comms, &watchdog, DeviceTp});
  if (!replica.ok()) return Fail("cannot start", replica.status());
  bmad::log::Info(kLog, "rank ready",
                  {{"rank", topo.ToString()}, {"shard", (*replica)->model().shard().Describe()}});
  auto done = bmad::parallel::RunFollower(*comms.replica, *(*replica)->runner(), &watchdog);
  if (!done.ok()) {
    bmad::log::Error(kLog, "rank failed; exiting",
                     {{"rank", topo.ToString()}, {"error", done.status()}});
    return 1;
  }
  bmad::log::Info(kLog, "rank stopped",
                  {{"rank", topo.ToString()}, {"steps", done->steps}, {"reason", done->reason}});
  return 0;
}

// Ends MPI on a rank whose replica stopped cleanly. The replica's ranks meet first, within the
// step timeout: one of them hung or dead must not hang the rest. MPI_Finalize then waits for
// every rank of the job, and the job's other replicas (a world of several) serve on until they
// are told to stop, so that wait has no deadline: a rank that left without MPI_Finalize would
// make mpirun end the whole job, the other replicas with it (Open MPI does). A SIGTERM/SIGINT
// ends the wait early (g_finishing). Communicators go before MPI_Finalize; a failure on the
// way leaves at once (ExitNow), since destructors would try MPI_Finalize once more.
void FinishMpi(bmad::parallel::MpiSession& session, const bmad::parallel::ReplicaTopology& topo,
               bmad::parallel::ReplicaCommunicators& comms, std::unique_ptr<bmad::parallel::MpiCommunicator>& world,
               std::chrono::milliseconds timeout) {
  const bmad::Status met = comms.replica ? comms.replica->Barrier() : bmad::Status::Ok();
  if (!met.ok()) {
    // A peer is hung or gone: no MPI_Finalize (it would wait for it), no destructors.
    bmad::log::Error(kLog, "the replica's ranks did not stop together; leaving without MPI_Finalize",
                     {{"rank", topo.ToString()}, {"error", met}});
    ExitNow(1);
  }
  comms = {};
  world.reset();
  const bool others = topo.num_replicas() > 1;
  g_finishing.store(true);
  if (others && topo.is_leader()) {
    bmad::log::Info(kLog, "replica stopped; its ranks wait for the job's other replicas to stop",
                    {{"rank", topo.ToString()}, {"replicas", topo.num_replicas()}});
  }
  const bmad::Status done = session.Finalize(others ? bmad::parallel::MpiSession::kNoTimeout : timeout);
  if (!done.ok()) {
    bmad::log::Error(kLog, "MPI not finalised", {{"rank", topo.ToString()}, {"error", done}});
    ExitNow(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, log_level;
  std::vector<std::string> overrides;
  int64_t replica_index = 0, max_run_ms = 0;
  bmad::cli::Flags flags("bmad-worker --config FILE [--set section.key=value]...");
  flags.AddString("config", &config_path, "The cluster's YAML config file.");
  flags.AddList("set", &overrides, "Override one config key (e.g. worker.replica_id=r1).");
  flags.AddInt("replica-index", &replica_index,
               "This job's first replica's index (offsets the metrics port; the job's k-th "
               "replica adds k).",
               0, 65535);
  flags.AddString("log-level", &log_level, "debug, info, warn, error or off (default: log.level).");
  // Bounded so that the deadline in nanoseconds cannot overflow (about 292 years).
  flags.AddInt("max-run-ms", &max_run_ms, "Stop after this many milliseconds (tests; 0: never).", 0,
               INT64_MAX / 1'000'000);
  bool version = false;
  flags.AddBool("version", &version, "Print the version and exit.");
  std::vector<std::string> positional;
  bmad::Status s = flags.Parse(std::vector<std::string>(argv + 1, argv + argc), &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (s.ok() && version) {
    std::printf("bmad-worker %.*s\n", static_cast<int>(bmad::Version().size()), bmad::Version().data());
    return 0;
  }
  if (s.ok() && config_path.empty()) s = bmad::InvalidArgument("--config is required");
  if (s.ok() && !positional.empty()) s = bmad::InvalidArgument("unexpected argument '" + positional[0] + "'");
  if (!s.ok()) {
    std::fprintf(stderr, "bmad-worker: %s\n", s.message().c_str());
    return 2;
  }
  auto config = bmad::LoadServerConfig(config_path, overrides, log_level);
  if (!config.ok()) {
    std::fprintf(stderr, "bmad-worker: %s\n", config.status().message().c_str());
    return 2;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGUSR1, OnDrainSignal);

  const int tp = static_cast<int>(config->parallel.tp), pp = static_cast<int>(config->parallel.pp);
  std::unique_ptr<bmad::parallel::MpiSession> session;
  if (tp * pp > 1) {
    auto started = bmad::parallel::MpiSession::Start(&argc, &argv);
    if (!started.ok()) return Fail("cannot start MPI", started.status());
    session = std::move(*started);
  }
  // Where this process stands. With MPI up, MPI says (every rank then sees the same size: a
  // launcher may export the rank alone, PMIx's PMIX_RANK); a replica of one rank starts no MPI
  // and takes the launcher's word.
  const bmad::parallel::LaunchInfo launch = bmad::parallel::ReadLaunchInfo();
  auto topology = bmad::parallel::ReplicaTopology::Create(session ? session->world_rank() : launch.world_rank,
                                                          session ? session->world_size() : launch.world_size,
                                                          tp, pp);
  if (!topology.ok()) return Fail("cannot start", topology.status());
  bmad::ServerConfig& c = *config;
  if (topology->num_replicas() > 1) {
    c.worker.replica_id.append("-").append(std::to_string(topology->replica()));
  }
  bmad::worker::WorkerRunOptions options{static_cast<int>(replica_index) + topology->replica(),
                                         max_run_ms, {}};

  std::unique_ptr<bmad::parallel::MpiCommunicator> world;
  bmad::parallel::ReplicaCommunicators comms;
  std::unique_ptr<bmad::parallel::Watchdog> watchdog;
  if (session) {
    const std::chrono::milliseconds timeout(c.parallel.step_timeout_ms);
    auto w = bmad::parallel::MpiCommunicator::World(timeout);
    if (!w.ok()) return Fail("cannot start MPI", w.status());
    world = std::move(*w);
    auto built = bmad::parallel::BuildReplicaCommunicators(*world, *topology);
    if (!built.ok()) return Fail("cannot form the replica's groups", built.status());
    comms = std::move(*built);
    // When a step overruns, the watchdog first ends every communicator wait (the main thread
    // then takes its failure path: the leader tells the coordinator) and only if that does not
    // end the process within the grace period, ends it itself.
    watchdog = std::make_unique<bmad::parallel::Watchdog>(bmad::parallel::Watchdog::Options{
        c.worker.replica_id, topology->world_rank(), timeout,
        [] {
          bmad::parallel::RequestAbort();
          std::this_thread::sleep_for(std::chrono::seconds(2));
        },
        std::chrono::seconds(2), {}});
    if (!topology->is_leader()) {
      const int code = RunFollowerRank(c, *topology, comms, *watchdog);
      if (code != 0) ExitNow(code);
      watchdog.reset();
      FinishMpi(*session, *topology, comms, world, timeout);
      return 0;
    }
    options.rank = {&*topology, &comms, watchdog.get(), DeviceTp};
  }

  auto server = bmad::worker::WorkerServer::Create(c, options);
  if (!server.ok()) {
    const int code = Fail("cannot start", server.status());
    if (session) ExitNow(code);
    return code;
  }
  g_server.Set(server->get());
  // Told to stop while it started: it drains (nothing is running yet) and stops.
  if (g_signals.load() > 0) (*server)->RequestStop();
  if (g_signals.load() > 1) (*server)->RequestStopNow();
  bmad::Status run = (*server)->Run();
  g_server.Clear();  // before the server goes, below or with main
  // Refused by the coordinator, the replica's ranks were told to stop as after a drain: they end
  // MPI as then (the job's other replicas serve on), and the process exits non-zero.
  const bool refused = !run.ok() && (*server)->refused();
  if (!run.ok()) {
    const int code = Fail("stopped with an error", run);
    if (!refused) {
      if (session) ExitNow(code);
      return code;
    }
  }
  server->reset();
  if (session) {
    watchdog.reset();
    FinishMpi(*session, *topology, comms, world, std::chrono::milliseconds(c.parallel.step_timeout_ms));
  }
  return refused ? 1 : 0;
}
