#include "common/signal_shared_pointer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace bmad {
namespace {

using namespace std::chrono_literals;

struct Server {
  std::atomic<int> stops{0};
  void RequestStop() { stops.fetch_add(1); }
};

TEST(SignalSharedPointerTest, AHandlerReachesTheObjectOnlyWhileItIsSet) {
  SignalSharedPointer<Server> pointer;
  Server server;
  EXPECT_FALSE(pointer.With([](Server& s) { s.RequestStop(); }));
  pointer.Set(&server);
  EXPECT_TRUE(pointer.With([](Server& s) { s.RequestStop(); }));
  pointer.Clear();
  EXPECT_FALSE(pointer.With([](Server& s) { s.RequestStop(); }));
  EXPECT_EQ(server.stops.load(), 1);
}

TEST(SignalSharedPointerTest, ClearWaitsForAHandlerStillUsingTheObject) {
  SignalSharedPointer<Server> pointer;
  Server server;
  pointer.Set(&server);
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::jthread handler([&] {
    pointer.With([&](Server& s) {
      inside = true;
      while (!release.load()) std::this_thread::sleep_for(1ms);
      s.RequestStop();  // the object must still be there
    });
  });
  while (!inside.load()) std::this_thread::sleep_for(1ms);
  std::atomic<bool> cleared{false};
  std::jthread main_thread([&] {
    pointer.Clear();
    cleared = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(cleared.load()) << "Clear returned while a handler was inside";
  release = true;
  main_thread.join();
  EXPECT_TRUE(cleared.load());
  EXPECT_EQ(server.stops.load(), 1);
}

// From a real handler, as the servers' mains use it.
SignalSharedPointer<Server> g_pointer;
void OnSignal(int) { g_pointer.With([](Server& s) { s.RequestStop(); }); }

TEST(SignalSharedPointerTest, WorksFromASignalHandler) {
  Server server;
  g_pointer.Set(&server);
  auto* previous = std::signal(SIGUSR2, OnSignal);
  std::raise(SIGUSR2);
  g_pointer.Clear();
  std::raise(SIGUSR2);  // cleared: reaches nothing
  std::signal(SIGUSR2, previous);
  EXPECT_EQ(server.stops.load(), 1);
}

}  // namespace
}  // namespace bmad
