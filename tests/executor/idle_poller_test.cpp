// idle_poller_test.cpp: the CPU poller runs at idle priority on exactly the CPUs of the thread that made it,
// and is gone once destroyed.
#include "executor/runtime/idle_poller.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "executor/runtime/cpu_placement.hpp"
#include "tests/executor/thread_util.hpp"

namespace domino {
namespace {

using exectest::idle_priority_threads;
using exectest::IdleThread;

TEST(IdlePoller, SpinsAtIdlePriorityOnTheCallersCpuUntilDestroyed) {
  const std::vector<int> mask = affinity_cpus();
  ASSERT_FALSE(mask.empty());
  ASSERT_TRUE(idle_priority_threads().empty()) << "a SCHED_IDLE thread ran before the test";
  const int cpu = mask.back();  // not the first: the poller must follow the pin, not the process's mask
  std::vector<IdleThread> while_alive;
  std::thread pinned([&] {
    pin_calling_thread(cpu);
    IdlePoller poller;
    while_alive = idle_priority_threads();
  });
  pinned.join();
  ASSERT_EQ(while_alive.size(), 1u);
  EXPECT_EQ(while_alive[0].cpus, std::vector<int>{cpu});
  EXPECT_TRUE(idle_priority_threads().empty()) << "the poller outlived its object";
}

}  // namespace
}  // namespace domino
