// idle_poller.hpp: keeps the calling thread's CPUs out of their idle state while an object lives. A CPU with
// nothing to run halts; on a virtual machine a halted vCPU leaves the host, and a thread woken there (Gloo's
// device loop receiving a peer's message, the communication worker woken by it) waits for the host to bring
// it back. The poller is a thread of the lowest scheduling class (SCHED_IDLE) spinning on the same CPUs: it
// runs only when nothing else wants the CPU and gives it up at once to any thread that wakes there.
#pragma once

#include <atomic>
#include <thread>

namespace domino {

class IdlePoller {
 public:
  // Starts the poller on the calling thread's affinity mask (pin the thread first). Throws domino::Error
  // (runtime) when the thread cannot be made SCHED_IDLE: a poller of normal priority would take the CPU
  // from the threads it is meant to serve.
  IdlePoller();
  ~IdlePoller();
  IdlePoller(const IdlePoller&) = delete;
  IdlePoller& operator=(const IdlePoller&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace domino
