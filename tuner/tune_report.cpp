// tune_report.cpp: the table, the JSON summary and the plan provenance of a tuning run.
#include "tuner/tune_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#ifndef DOMINO_VERSION
#define DOMINO_VERSION "unknown"
#endif

namespace domino {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string tps_text(const TuneResult& r) {
  std::string s;
  for (const TpTuning& t : r.per_tp) s += fmt::format("{}{}", s.empty() ? "" : ",", t.model.tp);
  return s;
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json plan_json(const TpTuning& t, const EvaluatedPlan& e) {
  nlohmann::json j;
  j["label"] = e.label;
  j["tp"] = t.model.tp;
  j["iteration_time_us"] = e.figures.iteration_us;
  j["speedup_vs_megatron_lm"] = number_or_null(speedup_vs_megatron(t, e));
  j["speedup_vs_megatron_sync"] = number_or_null(speedup_vs_sync(t, e));
  j["exposed_comm_us"] = e.figures.exposed_comm_us;
  j["comm_us"] = e.figures.comm_us;
  j["compute_us"] = e.figures.compute_us;
  j["no_comm_fraction"] = number_or_null(no_comm_fraction(t, e));
  j["tokens_per_iteration"] = e.throughput.tokens_per_iteration;
  j["tokens_per_s_per_gpu"] = e.throughput.tokens_per_s_per_gpu;
  j["model_flops_per_iteration"] = e.throughput.model_flops_per_iteration;
  j["mfu"] = number_or_null(e.throughput.mfu);
  j["peak_memory_bytes"] = e.figures.peak_memory_bytes;
  j["fits_memory"] = e.fits;
  j["search_predicted_us"] = number_or_null(e.predicted_us);
  j["sequence_parallel"] = e.plan.sequence_parallel;
  j["plan"] = plan_summary(e.plan, 1000);
  return j;
}

nlohmann::json search_stats_json(const SearchSpace& space, const SearchStats& stats, int layers) {
  nlohmann::json s;
  // The plan count overflows a double for deep models; log10 always fits.
  s["space_size"] = number_or_null(space.plans(layers));
  s["space_size_log10"] = double(layers) * std::log10(double(space.attn.size()) * double(space.mlp.size()));
  s["attn_choices"] = space.attn.size();
  s["mlp_choices"] = space.mlp.size();
  s["probe_simulations"] = stats.probe_simulations;
  s["screened"] = stats.screened;
  s["mode"] = stats.screened ? "screened" : "full";
  s["full_search_probes"] = stats.full_search_probes;
  s["attn_kept"] = stats.attn_kept;
  s["mlp_kept"] = stats.mlp_kept;
  s["swap_rounds"] = stats.swap_rounds;
  return s;
}

// The fastest fitting plan without and with sequence parallelism (null where none was searched or fits).
nlohmann::json best_by_sp_json(const TpTuning& t) {
  nlohmann::json j;
  for (int sp : {0, 1}) {
    const EvaluatedPlan& e = t.best_by_sp[sp];
    j[sp ? "on" : "off"] = e.label.empty() ? nlohmann::json(nullptr) : plan_json(t, e);
  }
  return j;
}

nlohmann::json tp_json(const TpTuning& t) {
  nlohmann::json j;
  j["tp"] = t.model.tp;
  j["top"] = nlohmann::json::array();
  for (const EvaluatedPlan& e : t.top) j["top"].push_back(plan_json(t, e));
  j["baselines"] = nlohmann::json::object();
  for (const EvaluatedPlan& b : t.baselines) j["baselines"][b.label] = plan_json(t, b);
  j["best_by_sequence_parallel"] = best_by_sp_json(t);
  nlohmann::json s = search_stats_json(t.space, t.stats, t.model.layers);
  s["searched"] = t.searched;
  s["evaluated"] = t.stats.probe_simulations + t.sp_stats.probe_simulations + t.full_simulations;
  s["full_simulations"] = t.full_simulations;
  s["seconds"] = t.seconds;
  nlohmann::json sp = search_stats_json(t.sp_space, t.sp_stats, t.model.layers);
  sp["searched"] = t.sp_searched;
  sp["not_searched_because"] = t.sp_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.sp_note);
  s["sequence_parallel"] = sp;
  j["search"] = s;
  return j;
}

std::string percent(double x) { return std::isfinite(x) ? fmt::format("{:.1f}%", 100 * x) : std::string("-"); }

// Why the best degree won when several were tuned: each other degree's best plan, with its iteration time and
// tokens/s per GPU, so a faster iteration that trains fewer tokens per GPU shows as such.
std::string choice_text(const TuneResult& r) {
  const EvaluatedPlan& best = r.best();
  std::string s = fmt::format("chosen by tokens/s per GPU: tp {} trains {:.0f} tokens/s per GPU in {:.3f} ms iterations",
                              r.best_tuning().model.tp, best.throughput.tokens_per_s_per_gpu,
                              best.figures.iteration_us / 1000.0);
  for (const TpTuning& t : r.per_tp) {
    if (&t == &r.best_tuning()) continue;
    if (t.top.empty()) {
      s += fmt::format("; tp {}: nothing fits (its smallest plan needs {:.1f} GiB)", t.model.tp,
                       double(t.smallest.figures.peak_memory_bytes) / kGiB);
      continue;
    }
    const EvaluatedPlan& e = t.top.front();
    s += fmt::format("; tp {}: {:.0f} tokens/s per GPU in {:.3f} ms{}", t.model.tp, e.throughput.tokens_per_s_per_gpu,
                     e.figures.iteration_us / 1000.0,
                     e.figures.iteration_us < best.figures.iteration_us ? " (faster iteration, more GPUs)" : "");
  }
  return s + "\n";
}

// What the iteration time leaves out under data parallelism.
std::string training_text(const TrainingContext& training, DType dtype) {
  std::string s = fmt::format("training: {} (memory: {} {})\n", training_summary(training),
                              dtype == DType::FP32 ? "optimizer moments" : "fp32 master weights and optimizer moments",
                              training.zero == 1 ? fmt::format("sharded over {} data-parallel ranks", training.dp)
                                                 : std::string("on every rank"));
  if (training.dp > 1) {
    s += "iteration times exclude the data-parallel gradient reduction";
    s += training.zero == 1 ? " and the parameter all-gather after the sharded optimizer step\n" : "\n";
  }
  return s;
}

}  // namespace

double speedup_vs(const TpTuning& t, const EvaluatedPlan& e, const char* baseline) {
  const EvaluatedPlan* base = t.baseline(baseline);
  return base && e.figures.iteration_us > 0 ? base->figures.iteration_us / e.figures.iteration_us : kNaN;
}

double no_comm_fraction(const TpTuning& t, const EvaluatedPlan& e) {
  const EvaluatedPlan* bound = t.baseline(e.plan.sequence_parallel ? "no-comm-sp" : "no-comm");
  return bound && e.figures.iteration_us > 0 ? bound->figures.iteration_us / e.figures.iteration_us : kNaN;
}

std::string plan_summary(const Plan& plan, size_t max_ranges) {
  if (!plan.comm_enabled) return plan.sequence_parallel ? "SP, no communication (bound)" : "no communication (bound)";
  std::string s = plan.sequence_parallel ? "SP " : "";
  size_t ranges = 0, start = 0;
  for (size_t l = 1; l <= plan.layers.size(); ++l) {
    if (l < plan.layers.size() && plan.layers[l] == plan.layers[start]) continue;
    if (ranges == max_ranges) {
      s += "; ...";
      break;
    }
    const std::string range = l - 1 == start ? fmt::format("L{}", start) : fmt::format("L{}-{}", start, l - 1);
    s += fmt::format("{}{}: {}", ranges == 0 ? "" : "; ", range, layer_label(plan.layers[start]));
    ++ranges;
    start = l;
  }
  return s;
}

std::string format_table(const TuneResult& result, const TuneOptions& options) {
  std::string out;
  const TpTuning& first = result.per_tp.front();
  out += fmt::format("domino-tune {}: {} ({} layers) on profile {}\n", DOMINO_VERSION, first.model.name,
                     first.model.layers, result.profile);
  if (options.mem_limit_gib > 0) out += fmt::format("memory limit {:g} GiB per device\n", options.mem_limit_gib);
  out += training_text(first.model.training, first.model.dtype);
  for (const TpTuning& t : result.per_tp) {
    out += fmt::format("\ntp {}: {}\n", t.model.tp, t.searched ? describe(t.space, options.search) : "(--sp on)");
    if (t.sp_searched) out += fmt::format("  {}\n", describe(t.sp_space, options.search));
    if (!t.sp_note.empty()) out += fmt::format("  sequence parallelism not searched: {}\n", t.sp_note);
    out += fmt::format("  searched in {:.2f} s: {} probe + {} full simulations{}{}\n", t.seconds,
                       t.stats.probe_simulations + t.sp_stats.probe_simulations, t.full_simulations,
                       t.searched ? describe_search_mode(t.stats) : "",
                       t.sp_searched ? "; sequence parallel" + describe_search_mode(t.sp_stats) : "");
    out += fmt::format("  {:<19} {:>12} {:>11} {:>6} {:>8} {:>8} {:>12} {:>9} {:>10}  {}\n", "plan", "iter ms",
                       "tok/s/GPU", "MFU", "vs M-LM", "vs sync", "exposed ms", "no-comm", "peak GiB", "choices");
    auto ratio = [](double x) { return std::isfinite(x) ? fmt::format("{:.3f}x", x) : std::string("-"); };
    auto row = [&](const EvaluatedPlan& e) {
      const double nc = no_comm_fraction(t, e);
      out += fmt::format("  {:<19} {:>12.3f} {:>11.0f} {:>6} {:>8} {:>8} {:>12.3f} {:>9} {:>10.2f}  {}{}\n", e.label,
                         e.figures.iteration_us / 1000.0, e.throughput.tokens_per_s_per_gpu, percent(e.throughput.mfu),
                         ratio(speedup_vs_megatron(t, e)), ratio(speedup_vs_sync(t, e)),
                         e.figures.exposed_comm_us / 1000.0, percent(nc),
                         double(e.figures.peak_memory_bytes) / kGiB, plan_summary(e.plan), e.fits ? "" : "  [over memory]");
    };
    for (const EvaluatedPlan& e : t.top) row(e);
    if (t.top.empty()) out += "  (no tuned plan fits the memory limit)\n";
    for (const EvaluatedPlan& b : t.baselines) row(b);
  }
  if (result.best_tp >= 0) {
    const TpTuning& t = result.best_tuning();
    const EvaluatedPlan& b = result.best();
    out += fmt::format(
        "\nbest: tp {}, {:.3f} ms per iteration, {:.0f} tokens/s per GPU, MFU {}, {:.3f}x over Megatron-LM "
        "(megatron-async), {:.3f}x over megatron-sync, {:.1f}% of the no-comm bound\n",
        t.model.tp, b.figures.iteration_us / 1000.0, b.throughput.tokens_per_s_per_gpu, percent(b.throughput.mfu),
        speedup_vs_megatron(t, b), speedup_vs_sync(t, b), 100 * no_comm_fraction(t, b));
    if (!t.kept_strategy_note.empty()) out += "  " + t.kept_strategy_note + "\n";
    if (result.per_tp.size() > 1) out += choice_text(result);
  }
  if (!result.per_tp.empty()) {
    out += "(vs M-LM: speedup over Megatron-LM as it runs by default, megatron-async; vs sync: over megatron-sync, "
           "its input-gradient overlap turned off; MFU: model FLOPs, 6 x weights x tokens plus attention, over "
           "iteration time x tp x the profile's peak)\n";
  }
  return out;
}

nlohmann::json summary_json(const TuneResult& result, const TuneOptions& options) {
  nlohmann::json j;
  const TpTuning& t = result.best_tuning();
  j["tuner_version"] = DOMINO_VERSION;
  j["model"] = t.model.name;
  j["model_fingerprint"] = model_fingerprint(t.model);
  j["profile"] = result.profile;
  j["tp_degrees"] = nlohmann::json::array();
  for (const TpTuning& x : result.per_tp) j["tp_degrees"].push_back(x.model.tp);
  j["mem_limit_gib"] = options.mem_limit_gib > 0 ? nlohmann::json(options.mem_limit_gib) : nlohmann::json(nullptr);
  j["min_gain_pct"] = options.min_gain_pct;
  j["kept_strategy"] =
      t.kept_strategy_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.kept_strategy_note);
  const TrainingContext& training = t.model.training;
  j["training"] = {{"dp", training.dp},
                   {"zero", training.zero},
                   {"recompute", to_string(training.recompute)},
                   {"dp_gradient_reduction_in_iteration_time", false}};
  j["best_tp_ranked_by"] = "tokens_per_s_per_gpu";
  j["best"] = plan_json(t, result.best());
  const nlohmann::json tj = tp_json(t);
  j["top"] = tj["top"];
  j["baselines"] = tj["baselines"];
  j["search"] = tj["search"];
  j["best_by_sequence_parallel"] = tj["best_by_sequence_parallel"];
  j["search"]["space"] = describe(t.space, options.search);
  double evaluated = 0;
  for (const TpTuning& x : result.per_tp)
    evaluated += double(x.stats.probe_simulations + x.sp_stats.probe_simulations + x.full_simulations);
  j["search"]["total_evaluated"] = evaluated;
  j["search"]["total_seconds"] = result.seconds;
  j["per_tp"] = nlohmann::json::array();
  for (const TpTuning& x : result.per_tp) j["per_tp"].push_back(tp_json(x));
  return j;
}

Plan tuned_plan(const TuneResult& result, const TuneOptions& options) {
  const TpTuning& t = result.best_tuning();
  Plan plan = result.best().plan;
  plan.strategy = "tuned";
  plan.profile = result.profile;
  auto& p = plan.provenance;
  p["tuner"] = fmt::format("domino-tune {}", DOMINO_VERSION);
  p["profile"] = result.profile;
  p["search_space"] = describe(t.space, options.search);
  if (t.sp_searched) p["search_space_sequence_parallel"] = describe(t.sp_space, options.search);
  p["tp_degrees_searched"] = tps_text(result);
  p["tp_ranked_by"] = "tokens/s per GPU";
  p["dp"] = fmt::format("{}", t.model.training.dp);
  p["zero"] = fmt::format("{}", t.model.training.zero);
  p["recompute"] = to_string(t.model.training.recompute);
  if (options.mem_limit_gib > 0) p["mem_limit_gib"] = fmt::format("{:g}", options.mem_limit_gib);
  if (options.min_gain_pct > 0) p["min_gain_pct"] = fmt::format("{:g}", options.min_gain_pct);
  if (!t.kept_strategy_note.empty()) p["kept_strategy"] = t.kept_strategy_note;
  const EvaluatedPlan& b = result.best();
  p["predicted_iteration_us"] = fmt::format("{:.3f}", b.figures.iteration_us);
  p["predicted_exposed_comm_us"] = fmt::format("{:.3f}", b.figures.exposed_comm_us);
  p["predicted_peak_memory_bytes"] = fmt::format("{}", b.figures.peak_memory_bytes);
  p["predicted_tokens_per_s_per_gpu"] = fmt::format("{:.1f}", b.throughput.tokens_per_s_per_gpu);
  if (std::isfinite(b.throughput.mfu)) p["predicted_mfu"] = fmt::format("{:.4f}", b.throughput.mfu);
  for (const EvaluatedPlan& base : t.baselines)
    p[fmt::format("baseline_{}_iteration_us", base.label)] = fmt::format("{:.3f}", base.figures.iteration_us);
  if (const double sp = speedup_vs_megatron(t, b); std::isfinite(sp))
    p["predicted_speedup_vs_megatron_lm"] = fmt::format("{:.4f}", sp);
  if (const double sp = speedup_vs_sync(t, b); std::isfinite(sp))
    p["predicted_speedup_vs_megatron_sync"] = fmt::format("{:.4f}", sp);
  return plan;
}

}  // namespace domino
