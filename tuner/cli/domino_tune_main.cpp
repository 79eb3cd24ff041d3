// domino_tune_main.cpp: domino-tune, searches per-layer slicing plans for a model on a hardware profile,
// prints the best plans next to the named baselines, and writes the plan, its predicted trace and a
// JSON summary.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/cli_parse.hpp"
#include "sim/base/error.hpp"
#include "sim/cli/training_options.hpp"
#include "sim/model/model_spec.hpp"
#include "sim/cost/profile.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/trace/timeline.hpp"
#include "tuner/tune_report.hpp"
#include "sim/base/files.hpp"

namespace {

std::vector<int> parse_tps(const std::string& text) {
  std::vector<int> tps;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string word = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (word.empty() || used != word.size() || v < 1)
      domino::throw_bad_input(fmt::format("--tp '{}': expected a positive integer or a list like 4,8,16", text));
    if (std::find(tps.begin(), tps.end(), v) == tps.end()) tps.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return tps;
}

// The predicted Chrome trace of the best plan.
void write_best_trace(const std::string& path, const domino::TuneResult& result, const domino::Plan& plan,
                      const domino::CostModel& cost) {
  const domino::ModelSpec& m = result.best_tuning().model;
  const domino::Schedule schedule = domino::build_schedule(m, plan);
  const domino::SimResult sim = domino::simulate(schedule, cost, domino::SimOptions{true});
  const nlohmann::json meta{{"tool", "domino-tune"},     {"version", DOMINO_VERSION},
                            {"profile", cost.profile().name}, {"plan", "tuned"},
                            {"seq_len", m.seq_len},       {"micro_batch", m.micro_batch}};
  domino::write_trace(path, schedule, sim.timeline, meta);
  std::printf("trace: %s\n", path.c_str());
}

// --recompute auto: the cheapest mode (none, then selective, then full: each recomputes more) whose best plan
// fits --mem-gb, and in *why which one it chose and why. Without --mem-gb nothing needs recomputing: none.
domino::TuneResult tune_recompute_auto(domino::ModelSpec model, const std::vector<int>& tps,
                                       const domino::CostModel& cost, const domino::TuneOptions& options,
                                       std::string* why) {
  std::string refused;
  for (const domino::Recompute mode : {domino::Recompute::None, domino::Recompute::Selective, domino::Recompute::Full}) {
    model.training.recompute = mode;
    domino::TuneOptions attempt = options;
    attempt.allow_nothing_fits = mode != domino::Recompute::Full;  // the last mode says why nothing fits
    domino::TuneResult r = domino::tune(model, tps, cost, attempt);
    if (r.best_tp >= 0) {
      *why = fmt::format("recompute auto: {} ({})\n", domino::to_string(mode),
                         refused.empty() ? "the cheapest mode; no recomputation needed" : "the cheapest mode that fits; " + refused);
      return r;
    }
    int64_t smallest = std::numeric_limits<int64_t>::max();
    for (const domino::TpTuning& t : r.per_tp) smallest = std::min(smallest, t.smallest.figures.peak_memory_bytes);
    refused += fmt::format("{}{}: the smallest plan needs {:.1f} GiB", refused.empty() ? "" : ", ",
                           domino::to_string(mode), double(smallest) / double(1LL << 30));
  }
  return {};  // not reached: full either fits or throws
}

// The model to tune: the embedded default or MODEL with the overrides, at the first TP degree searched, in
// the training context.
domino::ModelSpec load_tuned_model(const std::string& model_arg, const domino::ModelOverrides& overrides,
                                   const std::vector<int>& tps, const domino::TrainingContext& training) {
  domino::ModelSpec model;
  if (model_arg.empty()) {
    model = domino::default_model();
    if (overrides.seq_len) model.seq_len = *overrides.seq_len;
    if (overrides.micro_batch) model.micro_batch = *overrides.micro_batch;
  } else {
    model = domino::load_model(model_arg, overrides);
  }
  // What the importer chose for the user (a capped sequence length): said once, apart from the results.
  for (const std::string& note : model.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  if (!tps.empty()) model.tp = tps.front();
  model.training = training;
  domino::validate_model(model);
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  return domino::run_main("domino-tune", [&]() -> int {
    CLI::App app{"Search per-layer Domino slicing plans (split dim, p, q, overlap, slice order) for the fastest predicted iteration."};
    std::string model_arg, profile_arg, tp_arg, plan_path, trace_path, json_path, splits_arg = "batch,sequence";
    std::string orders_arg = "deep,deepspeed", sp_arg = "auto";
    domino::ModelOverrides overrides;
    domino::TuneOptions options;
    // The command line's answer departs from a known plan only for a gain the cost model can claim: the
    // library's default (0) takes the search's best, whose predicted lead is biased upward by the search
    // itself (docs/tuner.md).
    options.min_gain_pct = domino::kDefaultMinGainPct;
    domino::TrainingArgs training_args;
    bool quiet = false;
    app.add_option("MODEL", model_arg,
                   "model YAML, Hugging Face config.json, or a name in configs/models (default: the embedded cpu-gpt model)");
    app.add_option("--profile", profile_arg, "hardware profile YAML or a name in profiles/ (default: as domino-sim)");
    app.add_option("--tp", tp_arg, "tensor-parallel degree, or a list to search: 4,8,16");
    app.add_option("--mem-gb", options.mem_limit_gib, "peak memory limit per device in GiB (default: none)")
        ->check(domino::positive_number());
    app.add_option("-o,--output", plan_path, "write the best plan (docs/plan-format.md) with its provenance");
    app.add_option("--trace", trace_path, "write the predicted Chrome trace of the best plan");
    app.add_option("--json", json_path, "write the summary as JSON (stable keys)");
    domino::add_training_options(app, training_args);
    app.add_option("--min-gain", options.min_gain_pct,
                   "keep megatron-async unless the best plan is predicted at least this many percent faster, "
                   "then the fastest named strategy unless the best searched plan is: a margin for the cost "
                   "model's error (default 2; 0 takes the fastest plan)")
        ->check(domino::number_at_least(0, true));
    app.add_option("--top", options.top_k, "tuned plans to list (default 5)")
        ->check(domino::positive_number());
    app.add_option("--seq-len", overrides.seq_len, "sequence length")->check(domino::positive_number());
    app.add_option("--micro-batch", overrides.micro_batch, "micro-batch size")
        ->check(domino::positive_number());
    app.add_option("--splits", splits_arg, "row-split dimensions to search: batch, sequence or batch,sequence");
    app.add_option("--orders", orders_arg,
                   "slice orders to search (docs/plan-format.md): deep, deepspeed or deep,deepspeed");
    app.add_option("--max-p", options.search.max_p, "largest row-slice count (1, 2, 4, 8)")
        ->check(domino::positive_number());
    app.add_option("--max-q", options.search.max_q, "largest column-chunk count (1, 2, 4)")
        ->check(domino::positive_number());
    app.add_option("--sp", sp_arg,
                   "sequence parallelism: auto searches plans with and without it where the model and the profile "
                   "allow (default), on only with it, off only without it");
    app.add_flag("--quiet", quiet, "no progress line on stderr");
    app.set_version_flag("--version", std::string("domino-tune ") + DOMINO_VERSION);
    if (auto rc = domino::parse_command_line(app, argc, argv, "domino-tune")) return *rc;
    options.progress = !quiet;
    options.search.splits = domino::parse_splits(splits_arg);
    options.search.orders = domino::parse_orders(orders_arg);
    options.sequence_parallel = domino::parse_sp_search(sp_arg);
    const std::vector<int> tps = app.count("--tp") == 0 ? std::vector<int>{} : parse_tps(tp_arg);
    const domino::TrainingContext training = domino::training_context(training_args, /*allow_auto=*/true);

    const domino::ModelSpec model = load_tuned_model(model_arg, overrides, tps, training);

    // One profile for every degree: the default is chosen for the largest degree searched.
    domino::ModelSpec widest = model;
    for (int tp : tps) widest.tp = std::max(widest.tp, tp);
    const std::string profile_path =
        domino::resolve_profile_path(profile_arg.empty() ? domino::default_profile_name(widest) : profile_arg);
    const domino::CostModel cost(domino::load_profile(profile_path));

    std::string auto_choice;
    const domino::TuneResult result = domino::recompute_auto(training_args)
                                          ? tune_recompute_auto(model, tps, cost, options, &auto_choice)
                                          : domino::tune(model, tps, cost, options);
    std::fputs(auto_choice.c_str(), stdout);
    std::fputs(domino::format_table(result, options).c_str(), stdout);

    const domino::Plan plan = domino::tuned_plan(result, options);
    if (!plan_path.empty()) {
      domino::save_plan(plan, plan_path);
      std::printf("plan: %s\n", plan_path.c_str());
    }
    if (!trace_path.empty()) write_best_trace(trace_path, result, plan, cost);
    if (!json_path.empty()) {
      domino::write_file_atomic(json_path, domino::summary_json(result, options).dump(2) + "\n");
      std::printf("summary: %s\n", json_path.c_str());
    }
    return 0;
  });
}
