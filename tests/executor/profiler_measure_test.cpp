// profiler_measure_test.cpp: a tiny real measurement (a few GEMMs, memory-bound and attention ops, small
// AllReduces on 2 forked ranks, the interference experiment), fitted into a profile that must load in the
// simulator and reproduce its own measured points. No timed assertions: only consistency.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "executor/job/backends.hpp"
#include "executor/profiler/profile_meta.hpp"
#include "executor/profiler/profile_workload.hpp"
#include "executor/profiler/rank_fork.hpp"
#include "executor/profiler/rank_measure.hpp"
#include "executor/runtime/cpu_placement.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/fit/profile_fit.hpp"
#include "sim/fit/stats.hpp"
#include "sim/ir/gemm_blocks.hpp"
#include "tests/executor/thread_util.hpp"

namespace domino::prof {
namespace {

Workload tiny_workload() {
  WorkloadOptions wo;
  wo.quick = true;
  wo.max_allreduce_bytes = 1024 * 1024;
  Workload w = plan_workload(wo);
  w.gemms.resize(std::min<size_t>(w.gemms.size(), 3));
  w.memory_ops.resize(std::min<size_t>(w.memory_ops.size(), 6));
  w.attention.resize(std::min<size_t>(w.attention.size(), 2));
  w.interference_bytes = 64 * 1024;
  w.interference_gemm = w.gemms.front();
  return w;
}

// Whether a probe runs `op`'s shape: as one product (row_blocks 1) or as a whole op of `blocks` products.
bool probes_shape(const Workload& w, const Op& op, int64_t blocks) {
  for (const Probe& p : w.gemms) {
    const Op block = gemm_block(p.op());
    if (p.op().attrs.row_blocks == blocks && block.m == op.m && block.n == op.n && block.k == op.k &&
        p.op().code == op.code)
      return true;
  }
  return false;
}

TEST(ProfilerWorkload, ForModelCoversEveryGemmShapeOfItsPlans) {
  WorkloadOptions wo;
  wo.models = {default_model()};
  const Workload w = plan_workload(wo);
  wo.whole_blocked_gemms = false;
  const Workload products_only = plan_workload(wo);
  // Every GEMM of the domino-ds plan (sliced, chunked, backward) is a measured shape, and so is every product
  // a plan slicing the sequence runs: one block of rows per batch entry (gemm_blocks.hpp), and such an op
  // whole, its products back to back, unless the backend's cost model does not read it.
  const BlockPlan by_sequence{SplitDim::Sequence, 2, 1, OverlapMode::None, false};
  const ModelSpec& model = wo.models[0];
  ASSERT_GT(model.micro_batch, 1);
  int blocked = 0;
  for (const Plan& plan : {make_strategy_plan("domino-ds", model),
                           make_uniform_plan(model, by_sequence, by_sequence, "custom")}) {
    for (const Op& whole : build_schedule(model, plan).ops) {
      if (whole.kind != OpKind::Gemm) continue;
      const Op op = gemm_block(whole);
      EXPECT_TRUE(probes_shape(w, op, 1)) << op_id(op) << " " << op.m << "x" << op.n << "x" << op.k;
      EXPECT_TRUE(probes_shape(products_only, op, 1)) << op_id(op);
      if (whole.attrs.row_blocks == 1) continue;
      ++blocked;
      EXPECT_TRUE(probes_shape(w, op, whole.attrs.row_blocks)) << op_id(whole);
      EXPECT_FALSE(probes_shape(products_only, op, whole.attrs.row_blocks)) << op_id(whole);
    }
  }
  EXPECT_GT(blocked, 0);
  EXPECT_GT(w.gemms.size(), products_only.gemms.size());
  // AllReduce sizes reach the model's largest message exactly.
  EXPECT_DOUBLE_EQ(w.allreduce_bytes.back(), double(derive_facts(wo.models[0]).allreduce_bytes));
  EXPECT_DOUBLE_EQ(w.allreduce_bytes.front(), 4.0);
}

// The residual adds on a column chunk are probed beside the whole-row ones (a chunk pays per row:
// MemoryCost::chunk_row_us), and chunks of equal bytes at different row counts (q = 4 whole, q = 2 of half
// the rows) each get a probe.
TEST(ProfilerWorkload, ColumnChunksAreProbedBesideWholeRows) {
  for (bool quick : {false, true}) {
    SCOPED_TRACE(quick ? "quick" : "full");
    WorkloadOptions wo;
    wo.models = {default_model()};
    wo.models[0].set_biases(false);  // the adds' bytes: their rows' alone
    wo.quick = quick;
    const Workload w = plan_workload(wo);
    int whole = 0;
    std::map<double, std::set<int64_t>> rows_by_bytes;  // the chunks'
    for (const Probe& p : w.memory_ops) {
      if (p.op().code != OpCode::ResidualAdd) continue;
      if (p.op().chunk < 0) {
        ++whole;
        continue;
      }
      EXPECT_NE(p.label.find("column chunk"), std::string::npos) << p.label;
      rows_by_bytes[p.op().bytes].insert(p.op().m);
    }
    for (const Probe& p : w.memory_ops) {
      if (p.op().chunk >= 0) {
        EXPECT_EQ(p.op().code, OpCode::ResidualAdd) << p.label;  // the only memory-bound op chunked
      }
    }
    EXPECT_GT(whole, 0);
    EXPECT_FALSE(rows_by_bytes.empty());
    if (quick) continue;
    bool two_row_counts = false;
    for (const auto& [bytes, rows] : rows_by_bytes) two_row_counts |= rows.size() > 1;
    EXPECT_TRUE(two_row_counts);
  }
}

TEST(ProfilerMeasure, TinyProfileLoadsInTheSimulatorAndReproducesItsPoints) {
  const Workload w = tiny_workload();
  MeasureOptions mo;
  mo.quick = true;
  mo.drift_reference = true;
  ForkOptions fo;
  fo.ranks = 2;
  fo.timeout_s = 120;
  FitInput in;
  in.tp = 2;
  in.name = "tiny";
  in.ranks = run_ranks(fo, [&](GlooComm& comm) { return measure_rank(w, comm, mo); });
  ASSERT_EQ(in.ranks.size(), 2u);
  // The GEMM stage's drift reference: timed before every GEMM probe of every pass and after each pass's last.
  const int passes = make_backend("cpu")->profiling_traits().compute_passes;
  for (const nlohmann::json& r : in.ranks) {
    ASSERT_TRUE(r.contains("gemm_drift"));
    const auto times = r["gemm_drift"]["times_us"].get<std::vector<double>>();
    EXPECT_EQ(times.size(), size_t(passes) * (w.gemms.size() + 1));
    for (double us : times) EXPECT_GT(us, 0);
  }
  in.metadata = machine_metadata("cpu");
  in.load_average_at_end = load_average();
  const FitResult fit = fit_profile(in);

  const std::string path = (std::filesystem::temp_directory_path() / "domino_tiny_profile.yaml").string();
  save_profile(fit.profile, path);
  const Profile loaded = load_profile(path);
  EXPECT_FALSE(loaded.metadata.machine.empty());
  // the memory the CPU backend's buffers were on: its bandwidths depend on it
  EXPECT_NE(loaded.metadata.machine.find("; transparent huge pages: "), std::string::npos) << loaded.metadata.machine;
  EXPECT_FALSE(loaded.metadata.library_versions.at("eigen").empty());
  EXPECT_EQ(loaded.intra_node.table.size(), w.allreduce_bytes.size());

  // The simulator runs a small model on it.
  const ModelSpec model = default_model();
  const SimResult r = simulate(build_schedule(model, make_strategy_plan("domino-ds", model)), CostModel(loaded));
  EXPECT_GT(r.iteration_us, 0);
  EXPECT_GT(r.comm_us, 0);

  // With its tables the profile gives back every measured median (units and ring factor consistent).
  const CostModel cm(loaded);
  for (size_t i = 0; i < in.ranks[0]["compute"].size(); ++i) {
    const auto& e = in.ranks[0]["compute"][i];
    if (e["kind"] != "gemm") continue;
    std::vector<double> pooled = e["samples_us"].get<std::vector<double>>();
    const auto other = in.ranks[1]["compute"][i]["samples_us"].get<std::vector<double>>();
    pooled.insert(pooled.end(), other.begin(), other.end());
    const double measured = timing_of(pooled).median_us;
    EXPECT_NEAR(cm.gemm_us(DType::FP32, e["m"], e["n"], e["k"], e["flops"], e["bytes"]), measured, 1e-9 * measured);
  }
  for (size_t i = 0; i < loaded.intra_node.table.size(); ++i) {
    const double bytes = loaded.intra_node.table[i].bytes;
    std::vector<double> mean = in.ranks[0]["collectives"][i]["samples_us"].get<std::vector<double>>();
    const auto other = in.ranks[1]["collectives"][i]["samples_us"].get<std::vector<double>>();
    for (size_t k = 0; k < mean.size(); ++k) mean[k] = (mean[k] + other[k]) / 2;
    const double measured = timing_of(mean).median_us;
    // The points were timed after a barrier: the arrival skew (sync_us) comes on top of them.
    EXPECT_NEAR(cm.allreduce_us(bytes, 2, loaded.devices_per_node) - loaded.intra_node.sync_us, measured,
                1e-6 * measured) << bytes << " B";
  }
  EXPECT_TRUE(loaded.metadata.spread.contains("allreduce arrival skew"));
  // The fit quality the file records is what its own figures give.
  const SelfCheck sc = self_check(loaded, 2);
  std::vector<double> g = sc.gemm;
  std::sort(g.begin(), g.end());
  EXPECT_NEAR(loaded.metadata.spread.at("fit.gemm_curve"), g[size_t(0.9 * double(g.size() - 1))], 1e-12);
  std::filesystem::remove(path);
}

// What each of two measuring ranks, placed as asked, reports from inside its process (by rank).
std::vector<nlohmann::json> from_two_ranks(CpuPlacement placement, bool idle_poll,
                                           const std::function<nlohmann::json()>& report) {
  ForkOptions fo;
  fo.ranks = 2;
  fo.timeout_s = 60;
  fo.placement = placement;
  fo.idle_poll = idle_poll;
  return run_ranks(fo, [&](GlooComm&) { return report(); });
}

// --cpu-placement rank pins each measuring rank to its own CPU of the mask, as domino-exec places its ranks;
// none leaves them the whole mask.
TEST(ProfilerRanks, PlacedOnTheirCpusAsAsked) {
  const std::vector<int> mask = affinity_cpus();
  if (mask.size() < 2) GTEST_SKIP() << "placing 2 ranks needs 2 CPUs in the affinity mask";
  const auto cpus_of_ranks = [](CpuPlacement placement) {
    std::vector<std::vector<int>> out;
    for (const nlohmann::json& j :
         from_two_ranks(placement, true, [] { return nlohmann::json(affinity_cpus()); }))
      out.push_back(j.get<std::vector<int>>());
    return out;
  };
  const std::vector<std::vector<int>> pinned = cpus_of_ranks(CpuPlacement::Rank);
  ASSERT_EQ(pinned.size(), 2u);
  EXPECT_EQ(pinned[0], std::vector<int>{mask[0]});
  EXPECT_EQ(pinned[1], std::vector<int>{mask[1]});
  for (const std::vector<int>& cpus : cpus_of_ranks(CpuPlacement::None)) EXPECT_EQ(cpus, mask);
  // What the profile's notes record: the placement the ranks get, none where a default one is dropped.
  ForkOptions many;
  many.ranks = int(mask.size()) + 1;
  many.placement = CpuPlacement::Rank;
  EXPECT_EQ(check_placement(many), CpuPlacement::None);
  many.ranks = 2;
  EXPECT_EQ(check_placement(many), CpuPlacement::Rank);
  // Only whole ranks are placed: a pinned compute worker alone has no meaning for the probes.
  try {
    cpus_of_ranks(CpuPlacement::Compute);
    FAIL() << "compute placement was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
  }
}

// A pinned rank keeps its CPU awake with one idle-priority poller on that CPU (unless told not to); an
// unpinned one has none: its threads move between CPUs, so there is no CPU of its own to keep awake.
TEST(ProfilerRanks, PinnedRanksKeepTheirCpuAwake) {
  const std::vector<int> mask = affinity_cpus();
  if (mask.size() < 2) GTEST_SKIP() << "placing 2 ranks needs 2 CPUs in the affinity mask";
  const auto pollers_of_ranks = [](CpuPlacement placement, bool idle_poll) {
    std::vector<std::vector<std::vector<int>>> out;  // per rank: each poller's CPUs
    for (const nlohmann::json& j : from_two_ranks(placement, idle_poll, [] {
           nlohmann::json cpus = nlohmann::json::array();
           for (const exectest::IdleThread& t : exectest::idle_priority_threads()) cpus.push_back(t.cpus);
           return cpus;
         }))
      out.push_back(j.get<std::vector<std::vector<int>>>());
    return out;
  };
  const auto polled = pollers_of_ranks(CpuPlacement::Rank, true);
  ASSERT_EQ(polled.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(polled[size_t(r)].size(), 1u) << "rank " << r;
    EXPECT_EQ(polled[size_t(r)][0], std::vector<int>{mask[size_t(r)]}) << "rank " << r;
  }
  for (const auto& rank : pollers_of_ranks(CpuPlacement::Rank, false)) EXPECT_TRUE(rank.empty());
  for (const auto& rank : pollers_of_ranks(CpuPlacement::None, true)) EXPECT_TRUE(rank.empty());
}

}  // namespace
}  // namespace domino::prof
