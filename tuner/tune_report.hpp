// tune_report.hpp: what domino-tune prints and writes: the comparison table, the JSON summary (stable
// keys) and the tuned plan with its provenance (tuner version, profile, search space, promised figures).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tuner/tuner.hpp"

namespace domino {

// Speedup over megatron-sync, share of the no-comm bound reached (no-comm-sp for plans under sequence
// parallelism); NaN where the baseline is missing.
// Speedup of e over a named baseline of its TP degree (NaN when that baseline did not run). Megatron-LM as its
// users run it is megatron-async (the input-gradient AllReduce overlapped with the weight-gradient GEMM);
// megatron-sync is Megatron-LM with that overlap turned off.
double speedup_vs(const TpTuning& t, const EvaluatedPlan& e, const char* baseline);
inline double speedup_vs_megatron(const TpTuning& t, const EvaluatedPlan& e) { return speedup_vs(t, e, "megatron-async"); }
inline double speedup_vs_sync(const TpTuning& t, const EvaluatedPlan& e) { return speedup_vs(t, e, "megatron-sync"); }
double no_comm_fraction(const TpTuning& t, const EvaluatedPlan& e);

// "L0-79: attn[seq p4 q1 inter] mlp[...]" (identical neighbouring layers as ranges).
std::string plan_summary(const Plan& plan, size_t max_ranges = 3);

// Text table: per TP degree the best plans and the baselines, then the overall best.
std::string format_table(const TuneResult& result, const TuneOptions& options);

// {"model", "profile", "best": {...}, "top": [...], "baselines": {name: {...}}, "per_tp": [...],
//  "search": {...}}: times in microseconds, memory in bytes.
nlohmann::json summary_json(const TuneResult& result, const TuneOptions& options);

// The best plan with provenance filled in; identical inputs give byte-identical plan files (no times
// of day, no run times).
Plan tuned_plan(const TuneResult& result, const TuneOptions& options);

}  // namespace domino
