// exec_options.cpp: domino-exec's command line (CLI11): the flags of what to run and how, the backend
// choice, and whatever flags the backends add themselves.
#include "executor/job/exec_options.hpp"

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <utility>

#include "executor/job/backends.hpp"
#include "sim/base/cli_parse.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

std::string absolute(const std::string& path) {
  return path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
}

struct ShapeFlags {
  int tp = 0, seq_len = 0, micro_batch = 0;
};

void add_job_flags(CLI::App& app, JobRequest* j, ShapeFlags* shape) {
  app.add_option("target", j->target, "plan file, or a model name/file together with --strategy");
  app.add_option("--model", j->model, "the model of the plan (default: the model the plan names)");
  app.add_option("--strategy", j->strategy, "named strategy: megatron-sync, megatron-async, domino-ds, domino-deep, no-comm");
  app.add_option("--tp", shape->tp, "tensor-parallel degree (default: the plan's or the model's)")
      ->check(positive_number());
  app.add_option("--seq-len", shape->seq_len, "override the model's sequence length")
      ->check(positive_number());
  app.add_option("--micro-batch", shape->micro_batch, "override the model's micro-batch")
      ->check(positive_number());
  app.add_option("--ranks", j->ranks, "rank processes (default and only supported value: the TP degree)");
  app.add_flag("--force", j->force, "run a plan made for another model or TP degree");
  app.add_option("--plans", j->plans,
                 "several plans of one model in one launch, iterations interleaved: plan files and/or named "
                 "strategies (the model: positional, --model, or the first plan file's)");
  app.add_option("--plans-file", j->plans_file, "like --plans: one plan file or strategy name per line");
}

struct NanFlags {
  bool on = false, off = false;  // --nan-check, --no-nan-check; neither: the backend's default
};

// Placement and wait as given on the command line (names; empty: not given).
struct PlacementFlags {
  std::string placement, wait;
};

void add_placement_flags(CLI::App& app, PlacementFlags* p) {
  app.add_option(
      "--cpu-placement", p->placement,
      "where each rank's threads run (CPU backend): none (the kernel places them), rank (rank r's "
      "threads, Gloo's included, all on the r-th CPU of the affinity mask), compute (only rank r's "
      "compute thread there; communication floats). Default " +
          placement_name(kDefaultPlacement) +
          "; a given placement needs a CPU per rank in the mask (a default one is then dropped, "
          "--check shares CPUs)");
  app.add_option("--worker-wait", p->wait,
                 "how the per-stream workers wait for each other: block (futex at once) or spin (poll " +
                     std::to_string(kSpinBeforeBlockUs) + " us first). Default " + wait_name(kDefaultWait));
}

void add_realtime_flags(CLI::App& app, RunSettings* r) {
  app.add_flag(
      "--realtime,!--no-realtime", r->realtime,
      std::string("run each rank's threads SCHED_FIFO (root): other processes wait while the ranks run, "
                  "communication preempts compute at once. Default ") +
          (kDefaultRealtime ? "on" : "off"));
}

void apply_placement_flags(const PlacementFlags& p, RunSettings* r) {
  if (!p.placement.empty()) r->placement = parse_placement(p.placement);
  if (!p.wait.empty()) r->wait = parse_wait(p.wait);
}

void add_run_flags(CLI::App& app, RunSettings* r, NanFlags* nan) {
  app.add_option("--iters", r->iters, "timed iterations (default 5)");
  app.add_option("--warmup", r->warmup, "warm-up iterations before the timed ones (default 2)");
  app.add_option(
      "--visit-warmup", r->visit_warmup,
      "with --plans: untimed iterations of a plan right before each of its timed ones, so that each "
      "timed iteration follows one of its own plan as in training (default 0)");
  app.add_option("--seed", r->seed, "seed of the weights and data (default 1)");
  app.add_option("--optimizer", r->optimizer, "adam (default) or sgd (with momentum)")
      ->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--lr", r->lr, "learning rate (default 1e-3)");
  app.add_option("--weight-decay", r->weight_decay,
                 "weight decay of the weight matrices and embeddings, not of biases and norms (default 0.01, "
                 "Megatron-LM's; AdamW: decoupled)");
  app.add_option("--threads", r->threads, "Eigen threads per rank (default 1)");
  app.add_option("--trace", r->trace_path, "write the measured Chrome trace here");
  app.add_flag(
      "--trace-iterations", r->trace_iterations,
      "write every timed iteration's spans into the trace as well (domino.iteration_spans; calibration "
      "pools them), not only those of the iteration nearest the median time");
  app.add_option("--json", r->json_path, "write a summary (iteration time median/p10/p90, memory, loss) here");
  app.add_option("--out", r->out_dir,
                 "with --plans: write DIR/<plan>.trace.json, DIR/<plan>.json and DIR/interleave.json");
  app.add_option("--link-gbps", r->link_gbps, "emulate a link of this many Gbit/s per rank (network namespaces, root)");
  app.add_option("--link-latency-us", r->link_latency_us, "emulated per-hop link latency, added before each AllReduce");
  app.add_flag("--check", r->check,
               "compare loss and every gradient with megatron-sync and with tp=1 (1 iteration each)");
  app.add_option("--dump-tensors", r->dump_dir, "write weights, inputs and every op output of one iteration as .npy");
  app.add_option("--dump-iter", r->dump_iter, "iteration to dump, 0-based, warm-up included (default 0)");
  app.add_flag("--nan-check", nan->on,
               "scan every op's outputs for NaN/Inf (default on the CPU; on CUDA it synchronises after every op)");
  app.add_flag("--no-nan-check", nan->off, "do not scan op outputs for NaN/Inf");
  app.add_option("--timeout", r->timeout_s, "seconds before a silent peer counts as dead (default 30)");
  app.add_flag("--quiet", r->quiet, "no per-iteration lines");
  app.add_flag("--no-preflight{false}", r->preflight,
               "start the ranks without first checking that the plan fits this host's memory and cores");
  app.add_option("--bind-address", r->bind_address, "address for Gloo's TCP device (env mode; default: the "
                                                    "address that reaches MASTER_ADDR)");
}

// --plans runs its own outputs and iteration order: the single-plan flags that would contradict them are
// refused rather than ignored.
void validate_several_plans(const ExecOptions& o) {
  const RunSettings& r = o.run;
  const std::pair<bool, const char*> refused[] = {
      {!o.job.strategy.empty(), "--strategy (name the strategies in --plans)"},
      {o.job.force, "--force (every plan must be made for the model)"},
      {!r.trace_path.empty() || !r.json_path.empty(), "--trace/--json (use --out DIR: one trace and summary per plan)"},
      {r.check, "--check"},
      {!r.dump_dir.empty(), "--dump-tensors"}};
  for (const auto& [given, what] : refused)
    if (given) throw_bad_input(std::string("--plans/--plans-file cannot be combined with ") + what);
}

void validate(const ExecOptions& o) {
  const RunSettings& r = o.run;
  if (runs_several_plans(o.job)) validate_several_plans(o);
  else if (!r.out_dir.empty()) throw_bad_input("--out is for --plans (one plan: --trace and --json)");
  else if (o.job.target.empty() && o.job.model.empty()) throw_bad_input("give a plan file, or a model with --strategy NAME");
  if (r.iters < 1) throw_bad_input("--iters must be at least 1");
  if (r.warmup < 0) throw_bad_input("--warmup must not be negative");
  if (r.visit_warmup < 0) throw_bad_input("--visit-warmup must not be negative");
  if (r.visit_warmup > 0 && !runs_several_plans(o.job))
    throw_bad_input("--visit-warmup is for --plans (one plan runs its iterations back to back already)");
  if (r.threads < 1) throw_bad_input("--threads must be at least 1");
  if (!(r.link_gbps >= 0 && std::isfinite(r.link_gbps) && r.link_latency_us >= 0 &&
        std::isfinite(r.link_latency_us)))
    throw_bad_input("--link-gbps and --link-latency-us must be finite and not negative");
  if (r.timeout_s < 1) throw_bad_input("--timeout must be at least 1 second");
  if (!(r.lr > 0)) throw_bad_input("--lr must be positive");
  if (!(r.weight_decay >= 0 && r.weight_decay < 1)) throw_bad_input("--weight-decay must be in [0, 1)");
  if (r.dump_iter < 0) throw_bad_input("--dump-iter must not be negative");
}

// A flag of a backend the run does not use would change nothing: refused, not ignored.
void refuse_other_backends_flags(const CLI::App& app, const std::string& backend) {
  for (const std::string& name : backend_names()) {
    if (name == backend) continue;
    const CLI::App* group = nullptr;
    try {
      group = app.get_option_group(backend_flag_group(name));
    } catch (const CLI::OptionNotFound&) {
      continue;  // this backend adds no flags
    }
    for (const CLI::Option* flag : group->get_options())
      if (flag->count() > 0)
        throw_bad_input(flag->get_name() + " is a flag of the " + name +
                        " backend; this run uses --backend " + backend);
  }
}

}  // namespace

bool parse_exec_options(int argc, const char* const* argv, ExecOptions* out, const BackendFlagAdder& backend_flags) {
  ExecOptions o;
  CLI::App app{
      "domino-exec: runs a plan's tensor-parallel training for real (one process per rank) and records the "
      "measured timeline.\n  domino-exec PLAN.yaml [--model MODEL]\n  domino-exec MODEL --strategy NAME\n"
      "  domino-exec [MODEL] --plans PLAN|NAME... [--out DIR]"};
  app.set_version_flag("--version", std::string("domino-exec ") + DOMINO_VERSION);
  ShapeFlags shape;
  NanFlags nan;
  PlacementFlags placement;
  add_job_flags(app, &o.job, &shape);
  add_run_flags(app, &o.run, &nan);
  add_placement_flags(app, &placement);
  add_realtime_flags(app, &o.run);
  app.add_option("--backend", o.backend, "cpu (default) or cuda");
  if (backend_flags) backend_flags(app);
  if (parse_command_line(app, argc, argv, "domino-exec")) return false;  // help or version printed
  refuse_other_backends_flags(app, o.backend);
  if (shape.tp) o.job.overrides.tp = shape.tp;
  if (shape.seq_len) o.job.overrides.seq_len = shape.seq_len;
  if (shape.micro_batch) o.job.overrides.micro_batch = shape.micro_batch;
  if (nan.on && nan.off) throw_bad_input("--nan-check and --no-nan-check contradict each other");
  if (nan.on || nan.off) o.run.nan_check = nan.on;
  apply_placement_flags(placement, &o.run);
  validate(o);
  *out = o;
  return true;
}

void make_paths_absolute(ExecOptions* o) {
  for (std::string* p : {&o->run.trace_path, &o->run.json_path, &o->run.dump_dir, &o->run.out_dir,
                         &o->job.plans_file})
    *p = absolute(*p);
  // Plans and model files given as paths (names of shipped models and strategies stay names).
  std::vector<std::string*> inputs{&o->job.target, &o->job.model};
  for (std::string& plan : o->job.plans) inputs.push_back(&plan);
  for (std::string* p : inputs)
    if (!p->empty() && std::filesystem::exists(*p) && std::filesystem::is_regular_file(*p)) *p = absolute(*p);
}

}  // namespace domino
