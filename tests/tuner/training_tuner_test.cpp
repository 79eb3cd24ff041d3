// training_tuner_test.cpp: the tuner under a training context: ZeRO-1 is what lets Llama-2 70B fit 80 GiB at
// TP 8, TP degrees are ranked by tokens per second per GPU (not iteration time), and the throughput figures
// (tokens/s per GPU, MFU) and the context reach the JSON and the plan's provenance.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/base/error.hpp"
#include "tests/tuner/tuner_test_util.hpp"
#include "tuner/tune_report.hpp"

namespace domino {
namespace {

TuneOptions quiet_options() {
  TuneOptions o;
  o.progress = false;
  o.top_k = 1;
  return o;
}

std::string bad_input_message(const ModelSpec& m, const CostModel& cost, const TuneOptions& o) {
  try {
    tune(m, {}, cost, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  ADD_FAILURE() << "expected BadInput";
  return "";
}

// The fp32 masters and Adam moments (12 of 16 bytes per parameter) over 8.75 B parameters per rank are what
// keep Llama-2 70B at TP 8 above 80 GiB; sharded over 8 data-parallel ranks they fit.
TEST(TrainingContextTuner, Llama70bFits80GiBAtTp8OnlyWithZeroOne) {
  ModelSpec m = test::shipped_model("llama2-70b", 80, 8);
  const CostModel cost = test::shipped_cost("dgx-h100");
  TuneOptions o = quiet_options();
  o.mem_limit_gib = 80;
  m.training.dp = 8;
  const std::string refused = bad_input_message(m, cost, o);
  EXPECT_NE(refused.find("no plan fits 80 GiB"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--zero 1"), std::string::npos) << refused;
  m.training.zero = 1;
  const TuneResult r = tune(m, {}, cost, o);
  EXPECT_LE(double(r.best().figures.peak_memory_bytes), 80 * kGiB);
  // Sharding saves exactly the 12 bytes x (1 - 1/8) of every parameter a rank holds.
  ModelSpec unsharded = m;
  unsharded.training.zero = 0;
  const SimFigures full = simulate_plan(unsharded, r.best().plan, cost);
  const double params = double(derive_facts(m).params_per_rank);
  EXPECT_NEAR(double(full.peak_memory_bytes - r.best().figures.peak_memory_bytes), params * 12 * 7 / 8, 64);
  const Plan plan = tuned_plan(r, o);
  EXPECT_EQ(plan.provenance.at("dp"), "8");
  EXPECT_EQ(plan.provenance.at("zero"), "1");
  EXPECT_EQ(plan.provenance.at("recompute"), "none");
  const nlohmann::json j = summary_json(r, o);
  EXPECT_EQ(j["training"]["dp"].get<int>(), 8);
  EXPECT_EQ(j["training"]["zero"].get<int>(), 1);
  EXPECT_FALSE(j["training"]["dp_gradient_reduction_in_iteration_time"].get<bool>());
}

// Every op pays a large fixed launch cost and communication is nearly free: two ranks finish an iteration a
// little sooner than one (the GEMMs halve, the op count does not), but each GPU trains far fewer tokens.
CostModel launch_bound_cost() {
  Profile p = load_profile(test::repo_path("profiles/cpu-dev.yaml"));
  p.memory.launch_overhead_us = 2000;
  p.memory.per_kind.clear();
  p.gemm[size_t(DType::FP32)]->table.clear();
  p.attention.efficiency.clear();
  p.attention.relative_efficiency = 1;
  p.intra_node.table.clear();
  p.intra_node.bus_bandwidth_gbps = 1e6;
  p.intra_node.latency_us = 1;
  p.intra_node.sync_us = 0;
  p.interference = {};
  validate_profile(p);
  return CostModel(p);
}

TEST(TrainingContextTuner, RanksTpDegreesByTokensPerSecondPerGpu) {
  const ModelSpec m = default_model();
  const CostModel cost = launch_bound_cost();
  const TuneResult r = tune(m, {1, 2}, cost, quiet_options());
  ASSERT_EQ(r.per_tp.size(), 2u);
  const EvaluatedPlan& one = r.per_tp[0].top.front();
  const EvaluatedPlan& two = r.per_tp[1].top.front();
  ASSERT_LT(two.figures.iteration_us, one.figures.iteration_us) << "the case needs tp 2 to iterate faster";
  EXPECT_GT(one.throughput.tokens_per_s_per_gpu, two.throughput.tokens_per_s_per_gpu);
  EXPECT_EQ(r.best_tuning().model.tp, 1);
  const std::string table = format_table(r, quiet_options());
  EXPECT_NE(table.find("chosen by tokens/s per GPU: tp 1"), std::string::npos) << table;
  EXPECT_NE(table.find("faster iteration"), std::string::npos) << table;
  const nlohmann::json j = summary_json(r, quiet_options());
  EXPECT_EQ(j["best_tp_ranked_by"], "tokens_per_s_per_gpu");
  EXPECT_DOUBLE_EQ(j["best"]["tokens_per_s_per_gpu"].get<double>(), one.throughput.tokens_per_s_per_gpu);
  EXPECT_TRUE(j["per_tp"][1]["top"][0]["mfu"].is_number());
}

// The recomputation mode reaches every plan the tuner simulates: the tuned plan carries it (so domino-exec
// runs it), its figures are those of the plan with the recomputed ops, its memory is the smaller one, and
// the JSON and provenance name the mode.
TEST(TrainingContextTuner, RecomputationReachesTheTunedPlan) {
  ModelSpec m = test::shipped_model("gpt3-2.7b", 4, 8);
  const ModelSpec without = m;
  const CostModel cost = test::shipped_cost("dgx-h100");
  for (const Recompute mode : {Recompute::Selective, Recompute::Full}) {
    SCOPED_TRACE(to_string(mode));
    m.training.recompute = mode;
    const TuneResult r = tune(m, {}, cost, quiet_options());
    const Plan plan = tuned_plan(r, quiet_options());
    EXPECT_EQ(plan.recompute, mode);
    EXPECT_EQ(plan.provenance.at("recompute"), to_string(mode));
    EXPECT_EQ(summary_json(r, quiet_options())["training"]["recompute"], to_string(mode));
    const SimFigures f = simulate_plan(m, plan, cost);
    EXPECT_EQ(f.iteration_us, r.best().figures.iteration_us);
    Plan plain = plan;
    plain.recompute = Recompute::None;
    const SimFigures p = simulate_plan(without, plain, cost);
    EXPECT_LT(f.peak_memory_bytes, p.peak_memory_bytes);
    EXPECT_GT(f.iteration_us, p.iteration_us);
  }
}

TEST(Throughput, TokensPerGpuAndMfuFollowTheirDefinitions) {
  ModelSpec m = default_model();
  Profile p = load_profile(test::repo_path("profiles/cpu-dev.yaml"));
  const Throughput one = throughput(m, p, 1e6);  // one second
  EXPECT_DOUBLE_EQ(one.tokens_per_iteration, double(m.micro_batch) * m.seq_len);
  EXPECT_DOUBLE_EQ(one.tokens_per_s_per_gpu, one.tokens_per_iteration / m.tp);
  // 6 x the GEMM weights per token at least; the attention term adds to it.
  const ModelFacts f = derive_facts(m);
  EXPECT_GT(one.model_flops_per_iteration, 6.0 * double(f.total_params - f.embedding_params) * one.tokens_per_iteration * 0.9);
  const double peak = p.gemm[size_t(m.dtype)]->peak_tflops * 1e12;
  EXPECT_NEAR(one.mfu, one.model_flops_per_iteration / (m.tp * peak), 1e-12);
  m.tp *= 2;  // twice the GPUs for the same iteration time: half of each per GPU
  const Throughput two = throughput(m, p, 1e6);
  EXPECT_DOUBLE_EQ(two.tokens_per_s_per_gpu, one.tokens_per_s_per_gpu / 2);
  EXPECT_NEAR(two.mfu, one.mfu / 2, 1e-12);
  p.gemm[size_t(m.dtype)].reset();
  EXPECT_TRUE(std::isnan(throughput(m, p, 1e6).mfu));  // no peak for the model's dtype
}

}  // namespace
}  // namespace domino
