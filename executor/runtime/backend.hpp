// backend.hpp: the interface between the runtime (rank_runner) and a device backend (CPU now, CUDA later).
//
// Who does what:
//  - The RUNTIME walks the schedule and owns the order. For every stream of the IR it runs one host worker
//    thread that takes that stream's ops in program order. Before an op it waits (host side, no spinning)
//    until each of the op's deps has been *issued* by its own stream's worker in this iteration, then calls
//    StreamDriver::wait_for(dep) for each dep, then StreamDriver::issue(op), then marks the op issued.
//    The runtime never reorders ops and never decides anything the IR does not say.
//  - A BACKEND owns memory, kernels, collectives and time measurement, through one StreamDriver per stream:
//      CPU : issue() runs the op to completion on the calling thread between two steady_clock reads;
//            wait_for() has nothing left to do (a dep marked issued has already finished).
//      CUDA: issue() records a start event, enqueues the op (cuBLAS / own kernels / NCCL) on the driver's
//            CUDA stream, records an end event and returns at once; wait_for(dep) is
//            cudaStreamWaitEvent(this stream, end event of dep); finish_iteration() synchronises and turns
//            the events into microseconds from the iteration's start event. No host sync inside an iteration.
//  - Times are microseconds from the iteration start; every rank starts an iteration right after a barrier.
//
// Life cycle, per rank: make_backend(name) -> prepare(schedule, ctx) once (allocate every buffer once,
// initialise parameters and data deterministically: see param_init.hpp) -> make_stream_driver(s) for each
// stream -> per iteration: begin_iteration(step) on the main thread, then the workers drive the streams.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/runtime/optimizer_settings.hpp"
#include "sim/ir/schedule.hpp"

namespace domino {

class GlooComm;

using SteadyClock = std::chrono::steady_clock;

// What a backend knows about its rank and run.
struct RankContext {
  int rank = 0;
  int world = 1;
  uint64_t seed = 1;
  OptimizerHyper hyper;
  int threads = 1;              // host threads the backend's math may use
  GlooComm* comm = nullptr;     // the rank's Gloo group: CPU collectives; other backends exchange their
                                // own ids (e.g. the NCCL unique id) through comm->store()
  double link_latency_us = 0;   // emulated per-hop link latency, added in code before each AllReduce
  int timeout_s = 30;           // seconds a silent peer may take before it counts as dead (--timeout)
  std::string collective_algorithm;  // "": the library picks; else one of the backend's
                                     // forceable_collective_algorithms (domino-profile measures each)
  // false (domino-profile's probes): parameters need not hold initial_values, only varied finite values, so a
  // backend may draw them cheaply where they live (a device: instead of filling and uploading gigabytes from
  // the host; the CPU: instead of hashing every element of a probe's cold buffer sets).
  bool reproducible_values = true;
};

// When one op ran, in microseconds from the start of the iteration.
struct OpTiming {
  int32_t op = 0;
  double start_us = 0;
  double end_us = 0;
};

enum class TimingMode { HostClock, DeviceEvents };

// How domino-profile measures best on a backend (executor/profiler): what differs between devices.
struct ProfilingTraits {
  DType gemm_dtype = DType::FP32;      // the GEMM size grid's dtype: what models compute in on this backend
  int min_chain = 1;                   // a probe's op is issued at least this many times back to back per
                                       // iteration (a device that queues work hides launch gaps only then)
  double probe_budget_us = 600'000;    // measured time worth spending on one compute probe (--quick: 1/10)
  bool gemms_in_op_dtype = false;      // true: a GEMM computes in its op's dtype; false: always in fp32
  // Passes over a compute stage's probes, each taking its share of every probe's samples, pooled: a host's
  // speed drifts by 10-20 % within a minute on the 2-vCPU machines, and probes timed each in one go took the
  // speed of their moment, so that shapes measured seconds apart disagreed among themselves (eight 64-row
  // block products against their 512-row op: 0.96-1.33 in one quick profile), which the tuner then read as
  // a reason to slice one way or the other.
  int compute_passes = 3;
  // GEMMs whose rows slice the sequence of several batch entries are also probed whole, their products back
  // to back: on the host, the products after the first find the shared operand in cache (in training, the
  // eight 32-row weight-gradient products of a 4-way sequence slice took 0.97x the time of eight lone
  // products, whole-row GEMMs 1.1-1.3x theirs). A cost model that does not read such rows (a gpu section)
  // leaves them off.
  bool whole_blocked_gemms = true;
};

// Where the ranks of one host allocate their memory and how much is free there now (one pool: the
// machine's memory, or one device).
struct MemoryPool {
  std::string name;                // "this machine", "CUDA device 0"
  std::string measure;             // how available_bytes was read: "available (MemAvailable)"
  int64_t available_bytes = 0;
  std::vector<int> local_ranks;    // the host's ranks that allocate here
};

// What the ranks of a schedule will take from their host, and what the host has: the facts of domino-exec's
// preflight (executor/job/preflight.hpp), known before any rank starts.
struct HostFootprint {
  int64_t bytes_per_rank = 0;      // what one rank allocates for the schedule (a lower bound)
  int busy_threads_per_rank = 1;   // host threads one rank keeps computing
  std::vector<MemoryPool> pools;   // empty: what is free cannot be told here (memory is then not checked)
};

// Which of a host's ranks a footprint covers: every rank this process will start (self < 0), or one rank
// of an outside launch (self: its local rank), where only the pools that rank allocates from matter.
struct HostRanks {
  std::vector<int> local_ranks;
  int self = -1;
};

// Executes the ops of one stream. All calls for one driver come from one worker thread.
class StreamDriver {
 public:
  virtual ~StreamDriver() = default;
  // Called once on the worker thread before anything else (CUDA: cudaSetDevice).
  virtual void attach_thread() {}
  // t0: the host time the iteration started (every rank: right after a barrier).
  virtual void begin_iteration(SteadyClock::time_point t0) = 0;
  // Orders this stream after `dep` (an op of another stream that its worker has already issued).
  virtual void wait_for(const Op& dep) = 0;
  // Issues `op` and records its start and end (CPU: runs it to completion).
  virtual void issue(const Op& op) = 0;
  // Blocks until everything issued on this stream has finished (before NaN scans and dumps).
  virtual void synchronize() {}
  // Blocks until the iteration's work on this stream is done; returns the timings of its ops.
  virtual std::vector<OpTiming> finish_iteration() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual TimingMode timing_mode() const = 0;
  // Whether runs scan every op's outputs for NaN/Inf unless told not to (--no-nan-check). Worth it where
  // the scan is cheap next to the op; not where it would serialise the device after every op.
  virtual bool scans_for_nan_by_default() const { return true; }
  // Allocates every buffer of the schedule once and initialises parameters, optimizer states and data.
  virtual void prepare(const Schedule& schedule, const RankContext& ctx) = 0;
  virtual std::unique_ptr<StreamDriver> make_stream_driver(Stream stream) = 0;
  // Main thread, before the workers start iteration `step` (1-based optimizer step).
  virtual void begin_iteration(int64_t step) = 0;
  // A dense fp32 copy of a region, rows x cols in region order (checks, dumps, the loss). Callers make
  // sure the op that wrote it has finished (StreamDriver::synchronize).
  virtual std::vector<float> read_region(const Region& region) = 0;
  // True when every element of the region is finite. Backends may override with a device-side scan.
  virtual bool region_finite(const Region& region);
  // Bytes this rank allocated for the run (buffers + workspaces), constant after prepare().
  virtual int64_t peak_memory_bytes() const = 0;
  // Several plans about to be prepared one after another in this process (an interleaved launch), each on its
  // own backend: a backend whose memory's speed depends on where a plan's buffers land sets out all of their
  // memory alike here, before any of them is prepared (CPU: one shuffled pool, executor/cpu/cpu_arena.hpp).
  virtual void reserve_for_plans(const std::vector<const Schedule*>& /*schedules*/) {}
  // Bytes of those on huge pages after prepare() (host memory: a memory-bound op's speed depends on it);
  // -1 when the backend does not know or it does not apply.
  virtual int64_t huge_page_bytes() const { return -1; }
  // What the ranks of `schedule` will need on this host with `threads` math threads each, and what is free
  // where they allocate. Must not initialise a device in this process (the launcher forks the ranks
  // afterwards). The default: the schedule's own bytes (schedule_memory_bytes), nothing known to be free.
  virtual HostFootprint host_footprint(const Schedule& schedule, int threads, const HostRanks& ranks) const;
  // What domino-profile needs to know to measure this backend; must not touch a device (called before fork).
  virtual ProfilingTraits profiling_traits() const { return {}; }
  // The AllReduce algorithms (profile names: "ring", "nvls") this rank's collectives can be forced to, one
  // communicator each (RankContext::collective_algorithm), for a group of `world` ranks on this machine.
  // Empty: the library has one algorithm (stored as the ring curve). Called inside a rank process.
  virtual std::vector<std::string> forceable_collective_algorithms(int world) const {
    (void)world;
    return {};
  }

  std::vector<float> read_buffer(const Schedule& schedule, int32_t buffer);
};

// The region covering a whole buffer.
Region whole_buffer(const Schedule& schedule, int32_t buffer);

}  // namespace domino
