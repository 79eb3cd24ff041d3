// domino_sim_main.cpp: domino-sim, predicts one training iteration of a model under a plan or a named
// strategy on a hardware profile; prints the figures and the four named strategies side by side, and
// optionally writes the predicted Chrome trace and the figures as JSON (stable keys, docs/trace-format.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "sim/base/cli_parse.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"
#include "sim/cli/training_options.hpp"
#include "sim/cost/profile.hpp"
#include "sim/engine/collective_usage.hpp"
#include "sim/engine/op_costs_json.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/engine/throughput.hpp"
#include "sim/model/model_spec.hpp"
#include "sim/model/plan.hpp"
#include "sim/trace/timeline.hpp"

namespace {

using nlohmann::json;

std::string duration(double us) {
  if (us >= 1e6) return fmt::format("{:.3f} s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f} ms", us / 1e3);
  return fmt::format("{:.1f} us", us);
}

std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / (1024.0 * 1024 * 1024)); }

struct StrategyRow {
  std::string name;
  std::optional<domino::SimResult> result;
  std::string error;  // why the strategy cannot run on this model
};

std::vector<StrategyRow> simulate_strategies(const domino::ModelSpec& model, const domino::CostModel& cost,
                                             int allreduce_ranks) {
  std::vector<StrategyRow> rows;
  for (const std::string& name : domino::strategy_names()) {
    StrategyRow row{name, std::nullopt, ""};
    try {
      const domino::Schedule s = domino::build_schedule(model, domino::make_strategy_plan(name, model));
      row.result = domino::simulate(s, cost, domino::SimOptions{false, allreduce_ranks});
    } catch (const domino::Error& e) {
      if (e.kind() != domino::ErrorKind::BadInput) throw;
      row.error = e.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// A strategy's predicted iteration time among the rows (0 when it did not run).
double strategy_us(const std::vector<StrategyRow>& rows, const char* name) {
  for (const auto& r : rows) {
    if (r.name == name && r.result) return r.result->iteration_us;
  }
  return 0;
}

double speedup(double base_us, double us) { return base_us > 0 && us > 0 ? base_us / us : 0.0; }

// The model argument (the embedded default when empty) with the command line's overrides.
domino::ModelSpec cli_model(const std::string& model_arg, const domino::ModelOverrides& overrides) {
  if (!model_arg.empty()) return domino::load_model(model_arg, overrides);
  domino::ModelSpec model = domino::default_model();
  if (overrides.tp) model.tp = *overrides.tp;
  if (overrides.seq_len) model.seq_len = *overrides.seq_len;
  if (overrides.micro_batch) model.micro_batch = *overrides.micro_batch;
  domino::validate_model(model);
  return model;
}

// The profile; with --emulate-tp its collectives pinned to ring: an emulated run moves a ring's bytes, so
// the prediction must not take a faster algorithm (NVLS) the emulation does not run.
domino::Profile profile_for(const std::string& path, int emulate_tp) {
  domino::Profile p = domino::load_profile(path);
  if (emulate_tp > 0) {
    p.intra_node.pinned = domino::CollectiveAlgorithm::Ring;
    if (p.inter_node) p.inter_node->pinned = domino::CollectiveAlgorithm::Ring;
  }
  return p;
}

void print_report(const domino::ModelSpec& m, const domino::Plan& plan, const std::string& plan_label,
                  const domino::Profile& profile, size_t ops, const domino::SimResult& r,
                  const std::vector<StrategyRow>& rows, const std::string& algorithms) {
  std::printf("model    %s (tp %d, seq %d, micro-batch %d, %s, %d layers)\n", m.name.c_str(), m.tp, m.seq_len,
              m.micro_batch, domino::to_string(m.dtype), m.layers);
  std::printf("plan     %s\n", plan_label.c_str());
  std::printf("profile  %s (%s)\n", profile.name.c_str(), profile.path.c_str());
  std::printf("ops      %zu per rank%s\n", ops, plan.comm_enabled ? "" : " (communication switched off)");
  // Printed only beside the defaults' report, which stays as it always was.
  if (m.training.dp > 1 || m.training.zero > 0 || plan.recompute != domino::Recompute::None) {
    std::printf("training %s%s\n", domino::training_summary(m.training).c_str(),
                m.training.dp > 1 || m.training.zero > 0 ? " (iteration time excludes the data-parallel gradient reduction)" : "");
  }
  std::printf("\n");
  std::printf("iteration time         %s\n", duration(r.iteration_us).c_str());
  std::printf("compute time           %s\n", duration(r.compute_us).c_str());
  std::printf("communication time     %s\n", duration(r.comm_us).c_str());
  std::fputs(algorithms.c_str(), stdout);
  std::printf("exposed communication  %s\n", duration(r.exposed_comm_us).c_str());
  std::printf("overlap fraction       %.1f %%\n", 100 * r.overlap_fraction);
  std::printf("peak memory per rank   %s\n\n", gib(r.peak_memory_bytes).c_str());

  const double megatron = strategy_us(rows, "megatron-async"), sync = strategy_us(rows, "megatron-sync");
  std::printf("%-16s %14s %14s %9s %10s %10s\n", "strategy", "iteration", "exposed comm", "overlap", "vs M-LM",
              "vs sync");
  for (const auto& row : rows) {
    if (!row.result) {
      std::printf("%-16s n/a: %s\n", row.name.c_str(), row.error.c_str());
      continue;
    }
    const auto& s = *row.result;
    std::printf("%-16s %14s %14s %8.1f%% %9.3fx %9.3fx\n", row.name.c_str(), duration(s.iteration_us).c_str(),
                duration(s.exposed_comm_us).c_str(), 100 * s.overlap_fraction, speedup(megatron, s.iteration_us),
                speedup(sync, s.iteration_us));
  }
  std::printf("(vs M-LM: speedup over Megatron-LM as it runs by default, megatron-async; vs sync: over "
              "megatron-sync, its input-gradient overlap turned off)\n");
}

json figures_json(const domino::ModelSpec& m, const domino::Plan& plan, const domino::Profile& profile,
                  const domino::SimResult& r, const std::vector<StrategyRow>& rows) {
  json j{{"model", m.name},
         {"tp", m.tp},
         {"seq_len", m.seq_len},
         {"micro_batch", m.micro_batch},
         {"strategy", plan.strategy},
         {"profile", profile.name},
         {"iteration_time_us", r.iteration_us},
         {"compute_us", r.compute_us},
         {"comm_us", r.comm_us},
         {"exposed_comm_us", r.exposed_comm_us},
         {"overlap_fraction", r.overlap_fraction},
         {"peak_memory_bytes", r.peak_memory_bytes},
         {"training",
          {{"dp", m.training.dp}, {"zero", m.training.zero}, {"recompute", domino::to_string(m.training.recompute)}}}};
  const domino::Throughput t = domino::throughput(m, profile, r.iteration_us);
  j["tokens_per_s_per_gpu"] = t.tokens_per_s_per_gpu;
  j["mfu"] = std::isfinite(t.mfu) ? json(t.mfu) : json(nullptr);
  const double megatron = strategy_us(rows, "megatron-async"), sync = strategy_us(rows, "megatron-sync");
  json strategies = json::object();
  for (const auto& row : rows) {
    if (!row.result) {
      strategies[row.name] = json{{"error", row.error}};
      continue;
    }
    strategies[row.name] = json{{"iteration_time_us", row.result->iteration_us},
                                {"exposed_comm_us", row.result->exposed_comm_us},
                                {"overlap_fraction", row.result->overlap_fraction},
                                {"speedup_vs_megatron_lm", speedup(megatron, row.result->iteration_us)},
                                {"speedup_vs_megatron_sync", speedup(sync, row.result->iteration_us)}};
  }
  j["strategies"] = std::move(strategies);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  return domino::run_main("domino-sim", [&]() -> int {
    CLI::App app{"Predict one training iteration of a tensor-parallel model under a slicing plan."};
    std::string model_arg, plan_path, strategy, profile_arg, trace_path, json_path, ops_json_path;
    domino::ModelOverrides overrides;
    bool summary = false;
    int emulate_tp = 0;
    domino::TrainingArgs training_args;
    app.add_option("MODEL", model_arg,
                   "model YAML, Hugging Face config.json, or a name in configs/models (default: the embedded "
                   "cpu-gpt model)");
    auto* plan_opt = app.add_option("--plan", plan_path, "plan YAML (docs/plan-format.md)");
    const std::string strategy_list = fmt::format("{}", fmt::join(domino::strategy_names(), ", "));
    app.add_option("--strategy", strategy, "named strategy: " + strategy_list)->excludes(plan_opt);
    app.add_option("--profile", profile_arg,
                   "hardware profile YAML or a name in profiles/ (default: cpu-dev for fp32 models under 1e9 "
                   "parameters; otherwise dgx-h100 when tp <= 8, h100-multinode when tp > 8)");
    app.add_option("--trace", trace_path, "write the predicted Chrome trace (open in Perfetto)");
    app.add_option("--json", json_path, "write the figures as JSON (stable keys)");
    app.add_option("--ops-json", ops_json_path,
                   "write every op of the schedule as the simulator starts from it (stream, deps, the cost "
                   "model's duration, a collective's wait for the last rank) as JSON; scripts/rank-drift.py "
                   "reads it");
    app.add_option("--tp", overrides.tp, "tensor-parallel degree (overrides the model file)")
        ->check(domino::positive_number());
    app.add_option("--seq-len", overrides.seq_len, "sequence length")->check(domino::positive_number());
    app.add_option("--micro-batch", overrides.micro_batch, "micro-batch size")
        ->check(domino::positive_number());
    app.add_option("--emulate-tp", emulate_tp,
                   "time every collective as a ring of N ranks, ring only (predicts a one-GPU domino-exec "
                   "--emulate-comm run)")
        ->check(domino::positive_number());
    domino::add_training_options(app, training_args);
    app.add_flag("--summary", summary, "print the model summary (shapes, parameters, FLOPs) and exit");
    app.set_version_flag("--version", std::string("domino-sim ") + DOMINO_VERSION);
    if (auto rc = domino::parse_command_line(app, argc, argv, "domino-sim")) return *rc;
    const domino::TrainingContext training = domino::training_context(training_args);

    domino::ModelSpec model = cli_model(model_arg, overrides);
    model.training = training;
    if (summary) {
      std::fputs(domino::model_summary(model).c_str(), stdout);  // the summary lists the notes itself
      return 0;
    }
    // What the importer chose for the user (a capped sequence length): said once, apart from the results.
    for (const std::string& note : model.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
    if (plan_path.empty() && strategy.empty()) {
      domino::throw_bad_input("give --plan PLAN or --strategy NAME (" + strategy_list + ")");
    }
    domino::Plan plan =
        plan_path.empty() ? domino::make_strategy_plan(strategy, model) : domino::load_plan(plan_path, model);
    domino::reconcile_recompute(training_args, plan, model.training);
    const std::string plan_label = plan_path.empty() ? strategy + " (named strategy)" : plan_path + " (" + plan.strategy + ")";

    const std::string profile_path =
        domino::resolve_profile_path(profile_arg.empty() ? domino::default_profile_name(model) : profile_arg);
    const domino::CostModel cost(profile_for(profile_path, emulate_tp));

    const domino::Schedule schedule = domino::build_schedule(model, plan);
    const domino::SimResult result =
        domino::simulate(schedule, cost, domino::SimOptions{!trace_path.empty(), emulate_tp});
    const std::vector<StrategyRow> rows = simulate_strategies(model, cost, emulate_tp);

    const std::string algorithms = domino::collective_algorithm_lines(schedule, cost, emulate_tp);
    print_report(model, plan, plan_label, cost.profile(), schedule.ops.size(), result, rows, algorithms);
    if (!trace_path.empty()) {
      const json meta{{"tool", "domino-sim"},
                      {"version", DOMINO_VERSION},
                      {"profile", cost.profile().name},
                      {"plan", plan_path.empty() ? strategy : plan_path},
                      {"seq_len", model.seq_len},
                      {"micro_batch", model.micro_batch}};
      domino::write_trace(trace_path, schedule, result.timeline, meta);
      std::printf("trace: %s\n", trace_path.c_str());
    }
    if (!ops_json_path.empty()) {
      const domino::OpCosts costs = domino::op_costs(schedule, cost, domino::SimOptions{false, emulate_tp});
      domino::write_file_atomic(ops_json_path, domino::op_costs_json(schedule, costs).dump() + "\n");
      std::printf("ops: %s\n", ops_json_path.c_str());
    }
    if (!json_path.empty()) {
      domino::write_file_atomic(json_path, figures_json(model, plan, cost.profile(), result, rows).dump(2) + "\n");
      std::printf("figures: %s\n", json_path.c_str());
    }
    return 0;
  });
}
