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
};

// When one op ran, in microseconds from the start of the iteration.
struct OpTiming {
  int32_t op = 0;
  double start_us = 0;
  double end_us = 0;
};

enum class TimingMode { HostClock, DeviceEvents };

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

  std::vector<float> read_buffer(const Schedule& schedule, int32_t buffer);
};

// The region covering a whole buffer.
Region whole_buffer(const Schedule& schedule, int32_t buffer);

}  // namespace domino
