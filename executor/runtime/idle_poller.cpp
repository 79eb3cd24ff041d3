// idle_poller.cpp: the SCHED_IDLE spinning thread of idle_poller.hpp.
#include "executor/runtime/idle_poller.hpp"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <string>

#include "executor/runtime/cpu_placement.hpp"
#include "sim/base/error.hpp"

namespace domino {

IdlePoller::IdlePoller() {
  std::promise<int> started;  // 0, or the errno of the failed scheduling change
  std::future<int> result = started.get_future();
  thread_ = std::thread([this, &started] {
    sched_param param{};
    const int rc = ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &param);
    started.set_value(rc);
    if (rc != 0) return;
    while (!stop_.load(std::memory_order_relaxed))
      for (int i = 0; i < 64; ++i) cpu_relax();
  });
  const int rc = result.get();
  if (rc != 0) {
    thread_.join();
    throw_runtime(std::string("cannot start a CPU poller of idle priority (SCHED_IDLE): ") +
                  std::strerror(rc));
  }
}

IdlePoller::~IdlePoller() {
  stop_.store(true, std::memory_order_relaxed);
  thread_.join();
}

}  // namespace domino
