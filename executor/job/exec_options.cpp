// exec_options.cpp: domino-exec's command line (CLI11) and its inverse for the rank processes.
#include "executor/job/exec_options.hpp"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <sstream>

#include "sim/base/cli_parse.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

std::string absolute(const std::string& path) {
  return path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
}

std::string number(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

}  // namespace

bool parse_exec_options(int argc, const char* const* argv, ExecOptions* out) {
  ExecOptions o;
  CLI::App app{
      "domino-exec: runs a plan's tensor-parallel training for real (one process per rank) and records the "
      "measured timeline.\n  domino-exec PLAN.yaml [--model MODEL]\n  domino-exec MODEL --strategy NAME"};
  app.set_version_flag("--version", std::string("domino-exec ") + DOMINO_VERSION);
  app.add_option("target", o.target, "plan file, or a model name/file together with --strategy");
  app.add_option("--model", o.model, "the model of the plan (default: the model the plan names)");
  app.add_option("--strategy", o.strategy, "named strategy: megatron-sync, megatron-async, domino-ds, no-comm");
  int tp = 0, seq_len = 0, micro_batch = 0;
  app.add_option("--tp", tp, "tensor-parallel degree (default: the plan's or the model's)");
  app.add_option("--seq-len", seq_len, "override the model's sequence length");
  app.add_option("--micro-batch", micro_batch, "override the model's micro-batch");
  app.add_option("--ranks", o.ranks, "rank processes (default and only supported value: the TP degree)");
  app.add_option("--iters", o.iters, "timed iterations (default 5)");
  app.add_option("--warmup", o.warmup, "warm-up iterations before the timed ones (default 2)");
  app.add_option("--seed", o.seed, "seed of the weights and data (default 1)");
  app.add_option("--optimizer", o.optimizer, "adam (default) or sgd (with momentum)")
      ->check(CLI::IsMember({"adam", "sgd"}));
  app.add_option("--lr", o.lr, "learning rate (default 1e-3)");
  app.add_option("--threads", o.threads, "Eigen threads per rank (default 1)");
  app.add_option("--trace", o.trace_path, "write the measured Chrome trace here");
  app.add_option("--json", o.json_path, "write a summary (iteration time median/p10/p90, memory, loss) here");
  app.add_option("--link-gbps", o.link_gbps, "emulate a link of this many Gbit/s per rank (network namespaces, root)");
  app.add_option("--link-latency-us", o.link_latency_us, "emulated per-hop link latency, added before each AllReduce");
  app.add_flag("--force", o.force, "run a plan made for another model or TP degree");
  app.add_option("--backend", o.backend, "cpu (default) or cuda");
  app.add_flag("--emulate-comm", o.emulate_comm,
               "cuda: every collective becomes a paced kernel moving a ring AllReduce's bytes (one GPU)");
  app.add_option("--emulate-tp", o.emulate_tp, "cuda --emulate-comm: TP degree whose ring traffic is moved (default 8)");
  app.add_option("--emulate-sms", o.emulate_sms, "cuda --emulate-comm: SMs the emulated collective occupies (default 16)");
  app.add_option("--emulate-busbw", o.emulate_busbw_gbps,
                 "cuda --emulate-comm: bus bandwidth in GB/s it is paced to (default 370, H100 NVLink)");
  app.add_option("--emulate-latency-us", o.emulate_latency_us,
                 "cuda --emulate-comm: latency added to every emulated collective (default 10, NCCL on NVLink)");
  app.add_option("--cuda-dtype", o.cuda_dtype, "cuda: storage type: model (default), bf16, fp16, fp32")
      ->check(CLI::IsMember({"model", "bf16", "fp16", "fp32"}));
  app.add_flag("--check", o.check,
               "compare loss and every gradient with megatron-sync and with tp=1 (1 iteration each)");
  app.add_option("--dump-tensors", o.dump_dir, "write weights, inputs and every op output of one iteration as .npy");
  app.add_option("--dump-iter", o.dump_iter, "iteration to dump, 0-based, warm-up included (default 0)");
  bool no_nan_check = false;
  app.add_flag("--no-nan-check", no_nan_check, "do not scan op outputs for NaN/Inf");
  app.add_option("--timeout", o.timeout_s, "seconds before a silent peer counts as dead (default 30)");
  app.add_flag("--quiet", o.quiet, "no per-iteration lines");
  app.add_flag("--rank-worker", o.rank_worker)->group("");
  app.add_option("--run-dir", o.run_dir)->group("");
  app.add_option("--bind-address", o.bind_address, "address for Gloo's TCP device (env mode; default: the "
                                                   "address that reaches MASTER_ADDR)");
  app.add_option("--snapshot", o.snapshot_path)->group("");
  if (parse_command_line(app, argc, argv, "domino-exec")) return false;  // help or version printed
  if (tp) o.overrides.tp = tp;
  if (seq_len) o.overrides.seq_len = seq_len;
  if (micro_batch) o.overrides.micro_batch = micro_batch;
  o.nan_check = !no_nan_check;
  if (o.target.empty() && o.model.empty()) throw_bad_input("give a plan file, or a model with --strategy NAME");
  if (o.iters < 1) throw_bad_input("--iters must be at least 1");
  if (o.warmup < 0) throw_bad_input("--warmup must not be negative");
  if (o.threads < 1) throw_bad_input("--threads must be at least 1");
  if (o.link_gbps < 0 || o.link_latency_us < 0) throw_bad_input("--link-gbps and --link-latency-us must not be negative");
  if (o.timeout_s < 1) throw_bad_input("--timeout must be at least 1 second");
  if (o.emulate_tp < 1 || o.emulate_sms < 1) throw_bad_input("--emulate-tp and --emulate-sms must be at least 1");
  if (!(o.emulate_busbw_gbps > 0) || o.emulate_latency_us < 0) {
    throw_bad_input("--emulate-busbw must be positive and --emulate-latency-us not negative");
  }
  if (!(o.lr > 0)) throw_bad_input("--lr must be positive");
  if (o.dump_iter < 0) throw_bad_input("--dump-iter must not be negative");
  *out = o;
  return true;
}

std::vector<std::string> worker_arguments(const ExecOptions& o) {
  std::vector<std::string> a;
  auto add = [&a](const std::string& flag, const std::string& value) {
    if (!value.empty()) {
      a.push_back(flag);
      a.push_back(value);
    }
  };
  if (!o.target.empty()) a.push_back(o.target);
  add("--model", o.model);
  add("--strategy", o.strategy);
  if (o.overrides.tp) add("--tp", std::to_string(*o.overrides.tp));
  if (o.overrides.seq_len) add("--seq-len", std::to_string(*o.overrides.seq_len));
  if (o.overrides.micro_batch) add("--micro-batch", std::to_string(*o.overrides.micro_batch));
  if (o.ranks) add("--ranks", std::to_string(o.ranks));
  add("--iters", std::to_string(o.iters));
  add("--warmup", std::to_string(o.warmup));
  add("--seed", std::to_string(o.seed));
  add("--optimizer", o.optimizer);
  add("--lr", number(o.lr));
  add("--threads", std::to_string(o.threads));
  add("--trace", o.trace_path);
  add("--json", o.json_path);
  if (o.link_gbps > 0) add("--link-gbps", number(o.link_gbps));
  if (o.link_latency_us > 0) add("--link-latency-us", number(o.link_latency_us));
  if (o.force) a.push_back("--force");
  add("--backend", o.backend);
  if (o.emulate_comm) a.push_back("--emulate-comm");
  add("--emulate-tp", std::to_string(o.emulate_tp));
  add("--emulate-sms", std::to_string(o.emulate_sms));
  add("--emulate-busbw", number(o.emulate_busbw_gbps));
  add("--emulate-latency-us", number(o.emulate_latency_us));
  add("--cuda-dtype", o.cuda_dtype);
  add("--dump-tensors", o.dump_dir);
  add("--dump-iter", std::to_string(o.dump_iter));
  if (!o.nan_check) a.push_back("--no-nan-check");
  add("--timeout", std::to_string(o.timeout_s));
  if (o.quiet) a.push_back("--quiet");
  a.push_back("--rank-worker");
  add("--run-dir", o.run_dir);
  add("--bind-address", o.bind_address);
  add("--snapshot", o.snapshot_path);
  return a;
}

void make_paths_absolute(ExecOptions* o) {
  for (std::string* p : {&o->trace_path, &o->json_path, &o->dump_dir, &o->run_dir, &o->snapshot_path})
    *p = absolute(*p);
  // Plans and model files given as paths (names of shipped models stay names).
  for (std::string* p : {&o->target, &o->model})
    if (!p->empty() && std::filesystem::exists(*p) && std::filesystem::is_regular_file(*p)) *p = absolute(*p);
}

}  // namespace domino
