// causal_bound_test.cpp: no slicing can make the computation itself cheaper. With communication off, every
// sliced plan does the same GEMM and attention work as the unsliced one (causal attention counted as the
// pairs a causal kernel computes, for the unsliced attention and each sequence slice alike), so none may be
// predicted faster than the unsliced no-comm bound. Checked over every shipped model, TP 1-8 and sequence
// lengths 512-8192, on the DGX-H100 profile.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/model/plan.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

double predicted_us(const ModelSpec& m, const Plan& plan, const CostModel& cm) {
  SimOptions o;
  o.record_timeline = false;
  return simulate(build_schedule(m, plan), cm, o).iteration_us;
}

// Uniform plans with communication off: batch and sequence slices, p = 2 and 4, with and without a column
// split; those the model's shape does not allow are skipped.
std::vector<Plan> sliced_no_comm_plans(const ModelSpec& m) {
  std::vector<Plan> plans;
  for (SplitDim dim : {SplitDim::Batch, SplitDim::Sequence})
    for (int p : {2, 4})
      for (int q : {1, 2}) {
        const BlockPlan bp{dim, p, q, OverlapMode::Inter, true};
        try {
          Plan plan = make_uniform_plan(m, bp, bp, "custom");
          plan.comm_enabled = false;
          validate_plan(plan, m);
          plans.push_back(plan);
        } catch (const Error&) {
        }
      }
  return plans;
}

TEST(CausalBound, NoSlicedPlanBeatsTheUnslicedNoCommBound) {
  const CostModel cm(load_profile((fs::path(DOMINO_SOURCE_DIR) / "profiles" / "dgx-h100.yaml").string()));
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(DOMINO_SOURCE_DIR) / "configs" / "models")) {
    for (int tp : {1, 2, 4, 8})
      for (int seq : {512, 2048, 8192}) {
        ModelSpec m;
        try {
          m = load_model(entry.path().string(), ModelOverrides{tp, seq, 4});
        } catch (const Error&) {
          continue;  // heads not divisible by this TP degree
        }
        const double bound = predicted_us(m, make_strategy_plan("no-comm", m), cm);
        for (const Plan& plan : sliced_no_comm_plans(m)) {
          const double t = predicted_us(m, plan, cm);
          EXPECT_GE(t, 0.995 * bound) << m.name << " tp " << tp << " seq " << seq << ": "
                                      << to_string(plan.layers[0].attn.dim) << " p " << plan.layers[0].attn.p
                                      << " q " << plan.layers[0].attn.q << " predicted " << t << " us, bound "
                                      << bound << " us";
          ++checked;
        }
      }
  }
  EXPECT_GT(checked, 100) << checked;
}

}  // namespace
}  // namespace domino
