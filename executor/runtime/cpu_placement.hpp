// cpu_placement.hpp: where a rank's threads run on the host's cores, and how its workers wait for each other.
// Placement picks one core per rank from this process's affinity mask (rank r: the mask's (r mod N)-th CPU)
// and pins either the whole rank process (every thread it starts afterwards inherits the core: its stream
// workers and Gloo's device-loop thread) or only its compute workers. Any launcher that forks rank
// processes (domino-exec, domino-profile) can place its ranks with place_rank + pin_process / the runner's
// compute_cpu.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace domino {

enum class CpuPlacement : uint8_t {
  None,     // nothing pinned: the kernel places every thread (the behaviour before placement existed)
  Rank,     // every thread of rank r on the rank's core: compute, communication, Gloo's loop, main
  Compute,  // only rank r's compute workers on its core; communication, Gloo's loop and main float
};

// What domino-exec does when not told, where the affinity mask holds a CPU per rank. On a quiet 2-vCPU VM,
// unpinned threads made a collective's transfer (from the last rank's arrival to its end) 4.5x its profiled
// time and rank placement 1.75-2.1x: a woken communication thread waited behind the other rank's compute on
// the core the kernel had put it on (docs/fidelity.md, "Ranks on their own cores").
inline constexpr CpuPlacement kDefaultPlacement = CpuPlacement::Rank;
// What domino-profile does when not told: as domino-exec runs the ranks, so that a probe measures the regime
// the training step runs in. Each pinned rank also runs an idle-priority poller (idle_poller.hpp): without it
// every message woke a halted vCPU (about 1.3 ms more per small message). Unpinned, on a 2-vCPU Intel VM the
// AllReduce probes were bimodal and their medians out of order (64 B 2.6 ms, 16 KiB 0.3 ms, 1.5 MiB 3.0 ms
// against 0.9 ms in training); pinned they grew with the message (docs/fidelity.md, "A second machine").
inline constexpr CpuPlacement kDefaultProfilePlacement = CpuPlacement::Rank;

// How a stream worker waits for an op of another stream (and the main thread for the workers).
enum class WorkerWait : uint8_t {
  Block,  // futex (std::atomic::wait) at once
  Spin,   // poll with a pause instruction for kSpinBeforeBlockUs, then block
};

inline constexpr int kSpinBeforeBlockUs = 50;

// Tells the core a spin loop runs here (frees the sibling hyperthread, saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Real-time scheduling of a rank: communication and the process's other threads (Gloo's loop, the barrier)
// run SCHED_FIFO, so that a collective that becomes ready preempts compute at once instead of waiting for a
// compute op to end, as a GPU runs its communication kernels beside compute. The compute worker stays under
// the normal policy: a SCHED_FIFO thread that computes for most of each second meets the kernel's real-time
// throttling (by default 50 ms of every second go to other threads), which held a CPU rank's compute off its
// core 50 ms at a time and made one iteration in four or five 18 % slower (docs/fidelity.md).
inline constexpr int kRealtimeCommPriority = 2;

// "none", "rank", "compute"; "block", "spin".
std::string placement_name(CpuPlacement p);
std::string wait_name(WorkerWait w);
// The value a name stands for; BadInput naming the accepted names otherwise.
CpuPlacement parse_placement(const std::string& name);
WorkerWait parse_wait(const std::string& name);

// The CPUs of this process's affinity mask, ascending (empty when it cannot be read).
std::vector<int> affinity_cpus();
// Whether a launcher bound this process to some cores: its mask `cpus` is narrower than the online CPUs.
bool bound_by_launcher(const std::vector<int>& cpus);

// Where one rank's threads go: -1 = not pinned.
struct RankCores {
  int process_cpu = -1;  // pin the whole process here (Rank)
  int compute_cpu = -1;  // pin the compute workers here (Rank and Compute)
};

// Rank `index` of `ranks` sharing the CPUs `cpus` (an affinity mask). A placement the mask cannot hold one
// core per rank for: `required` (the user asked for it, and the run is timed) -> BadInput naming the mask;
// otherwise (the default placement, or a --check run that only compares numbers) the ranks share cores round
// robin when `share` is set, and nothing is pinned when it is not. An empty mask pins nothing.
struct PlacementRequest {
  CpuPlacement placement = CpuPlacement::None;
  bool required = false;  // explicitly asked for
  bool share = false;     // fewer cores than ranks: share them round robin instead of pinning nothing
};
RankCores place_rank(const PlacementRequest& request, const std::vector<int>& cpus, int index, int ranks);

// Puts the calling thread under SCHED_FIFO at kRealtimeCommPriority (threads it starts afterwards inherit
// it). Throws BadInput when the process may not (needs root or CAP_SYS_NICE).
void enter_realtime();
// Puts the calling thread back under the normal policy (SCHED_OTHER) where it runs under SCHED_FIFO (the
// compute worker of a real-time rank). Throws Runtime when the kernel refuses.
void leave_realtime();

// Pins the calling thread to `cpu` (threads it starts afterwards inherit it); nothing for cpu < 0. Throws
// Runtime naming the CPU when the kernel refuses.
void pin_calling_thread(int cpu);

}  // namespace domino
