// domino-profile: measures this machine through an executor backend (its own kernels and collectives) into
// a hardware profile (docs/profiling.md), or calibrates a profile on a measured trace (--calibrate).
#include "executor/cli/built_backends.hpp"
#include "executor/profiler/profile_run.hpp"
#include "sim/base/cli_parse.hpp"
#include "sim/base/error.hpp"


int main(int argc, char** argv) {
  return domino::run_main("domino-profile", [&]() -> int {
    domino::register_built_backends(nullptr);
    CLI::App app{"Measure this machine into a hardware profile, or calibrate a profile on a measured trace."};
    domino::prof::ProfileOptions o;
    std::string backends;
    for (const std::string& name : domino::backend_names()) backends += (backends.empty() ? "" : ", ") + name;
    app.add_option("--backend", o.backend, "the executor backend to measure (" + backends + ")")->capture_default_str();
    auto* tp = app.add_option("--tp", o.tp, "ranks in the AllReduce group (default 2)")
                   ->check(domino::positive_number());
    app.add_option("--link-gbps", o.link_gbps,
                   "measure through an emulated link of this rate (Gbit/s; needs root)")
        ->check(domino::positive_number());
    app.add_option("--for", o.for_model, "measure exactly the GEMM shapes and AllReduce sizes of these models' plans (comma-separated)");
    app.add_flag("--quick", o.quick, "fewer sizes and repeats (under 2 minutes)");
    app.add_option("-o,--output", o.output, "profile YAML to write")->required();
    app.add_option("--calibrate", o.calibrate_trace, "fit --profile to this measured trace (domino-exec --trace)");
    app.add_option("--profile", o.base_profile,
                   "profile to calibrate (default: the trace's, else the model's default); when measuring: take "
                   "devices_per_node and the inter-node link from it");
    app.add_option(
        "--fit", o.fit,
        "with --calibrate: fit only these parts (comma-separated: memory, gemm, attention, allreduce, "
        "allgather, reducescatter, sync, sync_growth, sync_iteration, interference, comm_delay, comm_start, "
        "stall, memory_rows, later_chunks, interference_iteration; default all, which keeps the arrival skew "
        "constant and leaves out comm_delay, comm_start, stall, memory_rows, later_chunks and "
        "interference_iteration: "
        "sync_growth also fits its growth with the compute between collectives; sync_iteration takes the "
        "skew that reproduces the iteration time of a trace whose streams do not overlap, such as "
        "megatron-sync; comm_delay a collective's delay beside compute, on an overlapped plan's trace; "
        "comm_start how long a collective due while its rank computes waits to start, on the same; "
        "stall the compute stream's time beyond its ops, on a no-comm trace; memory_rows what a memory-bound "
        "op on a column chunk pays per row, on the trace of a plan with column chunks; later_chunks the "
        "bandwidth of a row block's later column chunks, on the same; "
        "interference_iteration the "
        "compute's slowdown beside collectives with which an overlapped named strategy's trace, its schedule "
        "rebuilt from the trace's header and simulated, takes its measured iteration time)");
    app.add_option("--name", o.name, "profile name (default: the output file's name)");
    std::string placement;
    app.add_option(
        "--cpu-placement", placement,
        "where each measuring rank runs (CPU backend): none (the kernel places its threads) or rank (all "
        "of rank r's threads on the r-th CPU of the affinity mask, as domino-exec's default). Default " +
            domino::placement_name(domino::kDefaultProfilePlacement) +
            "; rank needs a CPU per rank in the mask");
    app.add_flag(
        "!--no-idle-poll", o.idle_poll,
        "with --cpu-placement rank: let each rank's CPU halt when it has nothing to run. By default "
        "a spinning thread of idle priority keeps it awake, so that a message reaching an idle rank "
        "does not wait for its CPU to wake up (on a virtual machine a halted CPU returns to the host)");
    app.add_flag("--realtime,!--no-realtime", o.realtime,
                 "run each measuring rank's threads SCHED_FIFO (root), communication above compute, as "
                 "domino-exec --realtime runs a plan: measure with it the profile of runs made with it. "
                 "Default off");
    app.add_flag("--collectives-after-compute", o.collectives_after_compute,
                 "CPU backend: time each collective after about 2 ms of GEMMs on the compute stream, as a "
                 "training step runs it, keeping the last rank's time (the transfer alone). Default: after "
                 "a barrier with nothing before it, as nccl-tests do");
    app.add_flag("!--no-drift-reference", o.drift_reference,
                 "CPU backend: keep the GEMM probes' times as measured. By default a small reference GEMM "
                 "is timed before every GEMM probe and each probe is scaled by how far the machine's speed "
                 "drifted around it (a shared VM's cores drift by 10-30 % over minutes)");
    app.add_option("--timeout", o.timeout_s, "give up measuring after this many seconds")
        ->check(domino::positive_number());
    app.set_version_flag("--version", std::string("domino-profile ") + DOMINO_VERSION);
    if (auto rc = domino::parse_command_line(app, argc, argv, "domino-profile")) return *rc;
    // An empty list would read as "not given" (all parts, the default workload): refused.
    for (const auto& [flag, value] :
         {std::pair{"--fit", &o.fit}, std::pair{"--for", &o.for_model}, std::pair{"--name", &o.name}})
      if (app.count(flag) > 0 && value->empty())
        domino::throw_bad_input(std::string(flag) + " was given empty");
    o.tp_given = tp->count() > 0;
    if (!placement.empty()) o.placement = domino::parse_placement(placement);
    if (!o.calibrate_trace.empty()) {
      domino::prof::run_calibrate(o);
      return 0;
    }
    domino::prof::run_measure(o);
    return 0;
  });
}
