// One rank of the peer-death test (peer_death_test.cc runs 4 of them under mpirun): rank 1
// SIGKILLs itself while the others wait in an all-reduce it will never join. Each survivor
// prints one line, "survivor rank R: CODE after N ms: message", and waits for mpirun to end it.
//
// Usage: bmad_parallel_peer_death_rank TIMEOUT_MS
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "worker/parallel/abort_flag.h"
#include "worker/parallel/mpi_communicator.h"
#include "worker/parallel/mpi_session.h"

namespace {

int Fail(const bmad::Status& status) {
  std::fprintf(stderr, "peer_death_rank: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace bmad::parallel;
  const long timeout_ms = argc > 1 ? std::atol(argv[1]) : 20000;
  // mpirun sends SIGTERM to the survivors when a rank dies: it must end their waits.
  if (auto s = InstallAbortSignalHandler(SIGTERM); !s.ok()) return Fail(s);
  auto session = MpiSession::Start(&argc, &argv);
  if (!session.ok()) return Fail(session.status());
  auto world = MpiCommunicator::World(std::chrono::milliseconds(timeout_ms));
  if (!world.ok()) return Fail(world.status());
  if (auto s = (*world)->Barrier(); !s.ok()) return Fail(s);  // every rank is up

  if ((*world)->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    raise(SIGKILL);
  }
  float data[64] = {};
  const auto start = std::chrono::steady_clock::now();
  const bmad::Status status = (*world)->AllReduceSum(data, 64);
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  std::printf("survivor rank %d: %s after %lld ms: %s\n", (*world)->rank(),
              std::string(bmad::StatusCodeName(status.code())).c_str(),
              static_cast<long long>(elapsed_ms), status.message().c_str());
  std::fflush(stdout);
  // mpirun is tearing the job down and will SIGKILL us shortly. Leaving first would not help:
  // MPI_Finalize would wait for the dead rank, and a survivor that exits early makes mpirun
  // kill the others at once, possibly before they print. So wait for the kill, boundedly.
  std::this_thread::sleep_for(std::chrono::seconds(10));
  _exit(0);
}
