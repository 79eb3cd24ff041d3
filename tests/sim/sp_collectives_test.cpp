// sp_collectives_test.cpp: the sequence-parallel collectives (AllGather, ReduceScatter) in the cost model
// and the profile: their time from their own curves with the (n-1)/n ring traffic, the algorithm choice
// among ring and NVLS, the SMs they hold, the named error of a profile without their curves, the profile
// form that carries them (loading, checks, round trip), and the shipped profiles' curves. Figures are
// derived by hand from toy curves.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/profile.hpp"
#include "sim/engine/collective_usage.hpp"
#include "tests/sim/collective_profiles.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

using test::collective_op;

// The shared toy's AllReduce ring (10 us + 100 GB/s; its NVLS runs from 5 ranks), sync 5 us on the level.
// AllGather: ring 12 us + 80 GB/s (24 SMs), NVLS 30 us + 160 GB/s (16 SMs, from 5 ranks). ReduceScatter: one
// ring curve 8 us + 50 GB/s. No inter-node level.
Profile sp_profile() {
  Profile p = test::two_algorithm_profile();
  p.name = "sp-toy";
  p.inter_node.reset();
  p.intra_node.sync_us = 5;
  p.intra_node.allgather = AlgorithmCurves{CollectiveCurve{12, 80, {}, 24, 2}, CollectiveCurve{30, 160, {}, 16, 5}};
  p.intra_node.reduce_scatter = AlgorithmCurves{CollectiveCurve{8, 50, {}, 0, 2}};
  return p;
}

TEST(SpCollectives, TimeIsSyncPlusLatencyPlusGatherTrafficOverBusBandwidth) {
  const CostModel cm(sp_profile());
  // 2 ranks: each moves half of the gathered buffer (the AllReduce of the same bytes: all of it).
  EXPECT_NEAR(cm.op_us(collective_op(OpKind::ReduceScatter, 1e6), 2, 8), 5 + 8 + 0.5 * 1e6 / 5e4, 1e-9);
  EXPECT_NEAR(cm.op_us(collective_op(OpKind::AllGather, 1e6), 2, 8), 5 + 12 + 0.5 * 1e6 / 8e4, 1e-9);
  EXPECT_NEAR(cm.op_us(collective_op(OpKind::AllReduce, 1e6), 2, 8), 5 + 10 + 1.0 * 1e6 / 1e5, 1e-9);
  // 4 ranks: 3/4 of the buffer.
  EXPECT_NEAR(cm.collective_cost(OpKind::ReduceScatter, 4e6, 4, 8).us, 5 + 8 + 0.75 * 4e6 / 5e4, 1e-9);
  EXPECT_DOUBLE_EQ(ring_traffic(OpKind::AllGather, 4e6, 4), 3e6);
  EXPECT_DOUBLE_EQ(ring_traffic(OpKind::AllReduce, 4e6, 4), 6e6);
  EXPECT_DOUBLE_EQ(ring_traffic(OpKind::Gemm, 4e6, 4), 0);
  // A group of one communicates nothing.
  EXPECT_EQ(cm.op_us(collective_op(OpKind::AllGather, 1e6), 1, 8), 0);
}

TEST(SpCollectives, TheBusBandwidthTableIsIndexedByTheGatheredBufferSize) {
  Profile p = sp_profile();
  p.intra_node.reduce_scatter->ring.table = {{1e6, 10}, {1e8, 40}};
  const CostModel cm(p);
  // Between the rows busbw is linear in log bytes: 1e7 B is half-way, 25 GB/s.
  EXPECT_NEAR(cm.collective_cost(OpKind::ReduceScatter, 1e7, 2, 8).us, 5 + 8 + 0.5 * 1e7 / 2.5e4, 1e-6);
  EXPECT_NEAR(cm.collective_cost(OpKind::ReduceScatter, 1e9, 2, 8).us, 5 + 8 + 0.5 * 1e9 / 4e4, 1e-6);  // clamped
}

TEST(SpCollectives, NvlsIsTakenWhereItIsFasterAndEligible) {
  const CostModel cm(sp_profile());
  // 8 ranks, 7/8 of S: ring 12 + 0.875 S / 8e4, NVLS 30 + 0.875 S / 1.6e5; they cross at S = 3 291 429 B.
  const CollectiveCost big = cm.collective(collective_op(OpKind::AllGather, 64e6), 8, 8);
  EXPECT_STREQ(big.algorithm, "nvls");
  EXPECT_NEAR(big.us, 5 + 30 + 0.875 * 64e6 / 1.6e5, 1e-9);
  EXPECT_EQ(big.sms, 16);
  EXPECT_EQ(cm.collective_sms(collective_op(OpKind::AllGather, 64e6), 8, 8), 16);
  const CollectiveCost small = cm.collective(collective_op(OpKind::AllGather, 3e6), 8, 8);
  EXPECT_STREQ(small.algorithm, "ring");
  EXPECT_EQ(small.sms, 24);
  EXPECT_STREQ(cm.collective(collective_op(OpKind::AllGather, 3.5e6), 8, 8).algorithm, "nvls");
  // NVLS runs on 5 ranks or more: 4 take the ring whatever the size.
  EXPECT_STREQ(cm.collective(collective_op(OpKind::AllGather, 64e6), 4, 8).algorithm, "ring");
  // The ReduceScatter has no NVLS curve: ring, whatever the AllGather's curves say.
  EXPECT_STREQ(cm.collective(collective_op(OpKind::ReduceScatter, 64e6), 8, 8).algorithm, "ring");
}

TEST(SpCollectives, ThePinAppliesToEveryKind) {
  Profile p = sp_profile();
  p.intra_node.pinned = CollectiveAlgorithm::Ring;  // as --emulate-tp pins it
  const CostModel ring_only(p);
  const CollectiveCost c = ring_only.collective(collective_op(OpKind::AllGather, 64e6), 8, 8);
  EXPECT_STREQ(c.algorithm, "ring");
  EXPECT_NEAR(c.us, 5 + 12 + 0.875 * 64e6 / 8e4, 1e-9);
  // Pinning NVLS needs an NVLS curve in every kind the level has: the ReduceScatter has none.
  p.intra_node.pinned = CollectiveAlgorithm::Nvls;  // the AllReduce has an NVLS curve
  try {
    validate_profile(p);
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_scatter has no algorithms.nvls curve"), std::string::npos) << e.what();
  }
}

TEST(SpCollectives, SmsFallBackToTheGpuSectionWhereTheCurveDoesNotStateThem) {
  Profile p = sp_profile();
  p.interference = {};
  p.gpu = GpuProfile{132, 128, 128, 1.0, 0.0, 1.0, 128, 20, 1000, 2.0};
  const CostModel cm(p);
  EXPECT_EQ(cm.collective_sms(collective_op(OpKind::ReduceScatter, 1e6), 8, 8), 20);  // the curve says 0
  EXPECT_EQ(cm.collective_sms(collective_op(OpKind::AllGather, 1e6), 8, 8), 24);
  // HBM: collective_hbm_bytes_per_bus_byte x the ring traffic of the kind.
  EXPECT_DOUBLE_EQ(cm.collective_hbm_bytes(collective_op(OpKind::ReduceScatter, 8e6), 8), 2.0 * 7e6);
  EXPECT_DOUBLE_EQ(cm.collective_hbm_bytes(collective_op(OpKind::AllReduce, 8e6), 8), 2.0 * 14e6);
}

TEST(SpCollectives, AProfileWithoutTheCurvesNamesTheMissingOne) {
  Profile p = sp_profile();
  p.intra_node.allgather.reset();
  const CostModel cm(p);
  EXPECT_FALSE(cm.has_sp_collectives());
  EXPECT_FALSE(cm.has_collective(OpKind::AllGather, 8, 8));
  EXPECT_TRUE(cm.has_collective(OpKind::ReduceScatter, 8, 8));
  EXPECT_TRUE(cm.has_collective(OpKind::AllReduce, 8, 8));
  try {
    cm.op_us(collective_op(OpKind::AllGather, 1e6), 8, 8);
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("collectives.intra_node.allgather"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(cm.op_us(collective_op(OpKind::ReduceScatter, 1e6), 8, 8));
}

TEST(SpCollectives, EveryLevelNeedsTheCurvesForSequenceParallelism) {
  Profile p = sp_profile();
  EXPECT_TRUE(CostModel(p).has_sp_collectives());
  CollectiveProfile inter;
  inter.latency_us = 40;
  inter.bus_bandwidth_gbps = 50;
  p.inter_node = inter;  // AllReduce only across nodes
  const CostModel cm(p);
  EXPECT_FALSE(cm.has_sp_collectives());
  EXPECT_TRUE(cm.has_collective(OpKind::AllGather, 8, 8));
  EXPECT_FALSE(cm.has_collective(OpKind::AllGather, 16, 8));
  EXPECT_THROW(cm.collective_cost(OpKind::ReduceScatter, 1e6, 16, 8), Error);
}

constexpr const char* kYaml = R"(name: sp-yaml
devices_per_node: 8
gemm:
  bf16:
    peak_tflops: 100
    efficiency: [[1, 0.5]]
memory: {bandwidth_gbps: 1000, launch_overhead_us: 2}
attention: {relative_efficiency: 0.5}
collectives:
  intra_node:
    latency_us: 10
    bus_bandwidth_gbps: 100
    allgather:
      algorithms:
        ring: {latency_us: 12, bus_bandwidth_gbps: 80, sms: 24, table: [[1048576, 40], [1073741824, 80]]}
        nvls: {latency_us: 30, bus_bandwidth_gbps: 160, sms: 16, min_ranks: 6}
    reduce_scatter:
      latency_us: 8
      bus_bandwidth_gbps: 50
  inter_node:
    latency_us: 40
    bus_bandwidth_gbps: 50
    reduce_scatter: {latency_us: 45, bus_bandwidth_gbps: 40}
interference: {compute_slowdown_during_comm: 0.1, comm_slowdown_during_compute: 0.05}
)";

TEST(SpCollectivesProfile, LoadsBothFormsAndRoundTrips) {
  const Profile p = load_profile_string(kYaml, "sp.yaml");
  ASSERT_TRUE(p.intra_node.allgather && p.intra_node.allgather->nvls);
  EXPECT_EQ(p.intra_node.allgather->ring.sms, 24);
  EXPECT_EQ(p.intra_node.allgather->ring.table.size(), 2u);
  EXPECT_EQ(p.intra_node.allgather->nvls->min_ranks, 6);
  ASSERT_TRUE(p.intra_node.reduce_scatter);
  EXPECT_EQ(p.intra_node.reduce_scatter->ring.latency_us, 8);
  EXPECT_FALSE(p.intra_node.reduce_scatter->nvls);
  ASSERT_TRUE(p.inter_node);
  EXPECT_FALSE(p.inter_node->allgather);
  EXPECT_EQ(p.inter_node->reduce_scatter->ring.bus_bandwidth_gbps, 40);
  EXPECT_FALSE(p.intra_node.has_algorithm_figures());  // the AllReduce stays in the single-curve form

  const std::string text = profile_to_yaml(p);
  const Profile again = load_profile_string(text, "again.yaml");
  EXPECT_EQ(profile_to_yaml(again), text);
  EXPECT_EQ(again.intra_node.allgather->nvls->bus_bandwidth_gbps, 160);
  EXPECT_EQ(again.intra_node.reduce_scatter->ring.bus_bandwidth_gbps, 50);
  EXPECT_EQ(again.inter_node->reduce_scatter->ring.latency_us, 45);
}

void expect_refused(const std::string& from, const std::string& to, const std::string& message) {
  std::string yaml = kYaml;
  const size_t at = yaml.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  yaml.replace(at, from.size(), to);
  try {
    load_profile_string(yaml, "bad.yaml");
    FAIL() << "expected BadInput for " << to;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(SpCollectivesProfile, MalformedCurvesAreRefusedWithTheirPlace) {
  expect_refused("reduce_scatter: {latency_us: 45,", "reduce_scatter: {latencyus: 45,", "latency_us");
  expect_refused("reduce_scatter: {latency_us: 45, bus_bandwidth_gbps: 40}",
                 "reduce_scatter: {latency_us: 45, bus_bandwidth_gbps: 40, algorithms: {ring: "
                 "{latency_us: 1, bus_bandwidth_gbps: 1}, nvls: {latency_us: 1, bus_bandwidth_gbps: 1}}}",
                 "algorithms");  // curves beside algorithms
  expect_refused("{latency_us: 45, bus_bandwidth_gbps: 40}",
                 "{algorithms: {ring: {latency_us: 1, bus_bandwidth_gbps: 1}, nvls: {latency_us: 1, "
                 "bus_bandwidth_gbps: 1}}}",
                 "inside one NVLink domain");  // NVLS across nodes
  expect_refused("    reduce_scatter:\n      latency_us: 8\n", "    reduce_scatter:\n      sms: 4\n      latency_us: 8\n",
                 "SMs are stated per algorithm");
  expect_refused("    latency_us: 10\n    bus_bandwidth_gbps: 100\n",
                 "    algorithm: nvls\n    algorithms:\n      ring: {latency_us: 10, bus_bandwidth_gbps: 100}\n      "
                 "nvls: {latency_us: 10, bus_bandwidth_gbps: 200}\n",
                 "reduce_scatter has no algorithms.nvls curve");
}

const fs::path kShipped = fs::path(DOMINO_SOURCE_DIR) / "profiles";

TEST(SpCollectivesProfile, EveryShippedProfileCanCostSequenceParallelism) {
  for (const char* name : {"dgx-h100", "dgx-a100", "h100-multinode", "cpu-dev", "cpu-dev-2gbps"}) {
    const CostModel cm(load_profile((kShipped / (std::string(name) + ".yaml")).string()));
    EXPECT_TRUE(cm.has_sp_collectives()) << name;
  }
}

TEST(SpCollectivesProfile, OnH100TheRingIsTakenForAllGatherAndReduceScatter) {
  // NVLS moves the whole buffer in one direction for these two and is slower (NVIDIA/nccl issues 1083, 1506):
  // at every size the ring's curve wins, while NVLS still wins the AllReduce at large sizes.
  const CostModel cm(load_profile((kShipped / "dgx-h100.yaml").string()));
  for (double bytes : {1e5, 2e6, 2e7, 2e8, 2e9}) {
    EXPECT_STREQ(cm.collective_cost(OpKind::AllGather, bytes, 8, 8).algorithm, "ring") << bytes;
    EXPECT_STREQ(cm.collective_cost(OpKind::ReduceScatter, bytes, 8, 8).algorithm, "ring") << bytes;
  }
  EXPECT_STREQ(cm.collective_cost(OpKind::AllReduce, 2e8, 8, 8).algorithm, "nvls");
  EXPECT_EQ(cm.collective_cost(OpKind::AllGather, 2e7, 8, 8).sms, 24);
}

TEST(SpCollectivesProfile, GatherKindsCostTheirRingTrafficOnTheirOwnCurves) {
  // An AllGather or ReduceScatter of 2B bytes moves per rank what an AllReduce of B bytes moves: given the
  // AllReduce's curve with every table point at twice its bytes, they take the AllReduce's time at each size.
  for (const char* name : {"cpu-dev", "cpu-dev-2gbps"}) {
    Profile p = load_profile((kShipped / (std::string(name) + ".yaml")).string());
    ASSERT_FALSE(p.intra_node.table.empty()) << name;
    CollectiveCurve doubled = p.intra_node.ring();
    for (BusBandwidthPoint& point : doubled.table) point.bytes *= 2;
    p.intra_node.allgather = p.intra_node.reduce_scatter = AlgorithmCurves{doubled};
    const CostModel cm(p);
    for (const BusBandwidthPoint& r : p.intra_node.table) {
      const double allreduce = cm.allreduce_us(r.bytes, 2, p.devices_per_node);
      for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter})
        EXPECT_NEAR(cm.collective_cost(kind, 2 * r.bytes, 2, p.devices_per_node).us, allreduce, 1e-9 * allreduce)
            << name << " " << r.bytes;
    }
  }
}

// domino-sim's report: which algorithm each collective kind of a schedule runs, one line per kind.
TEST(SpCollectivesProfile, TheAlgorithmsAreToldPerCollectiveKind) {
  Schedule s;
  s.model.tp = s.plan.tp = 8;
  for (const auto& [kind, bytes] : std::vector<std::pair<OpKind, double>>{{OpKind::AllGather, 2e7},
                                                                          {OpKind::AllReduce, 2e8},
                                                                          {OpKind::ReduceScatter, 2e7},
                                                                          {OpKind::AllGather, 2e7},
                                                                          {OpKind::AllReduce, 1e5},
                                                                          {OpKind::AllReduce, 2e8}}) {
    s.ops.push_back(collective_op(kind, bytes));
    s.ops.back().index = int32_t(s.ops.size() - 1);
  }
  const CostModel h100(load_profile((kShipped / "dgx-h100.yaml").string()));
  EXPECT_EQ(collective_algorithm_lines(s, h100),
            "allreduce algorithms   nvls x 2 (16 SMs), ring x 1 (24 SMs)\n"
            "allgather algorithms   ring x 2 (24 SMs)\n"
            "reducescatter algorithms ring x 1 (24 SMs)\n");
  EXPECT_EQ(collective_algorithm_lines(s, h100, 4), "allreduce algorithms   ring x 3 (24 SMs)\n"
                                                    "allgather algorithms   ring x 2 (24 SMs)\n"
                                                    "reducescatter algorithms ring x 1 (24 SMs)\n");
  // One ring curve per level and kind: nothing to tell; nor without communication.
  EXPECT_EQ(collective_algorithm_lines(s, CostModel(load_profile((kShipped / "cpu-dev.yaml").string()))), "");
  s.plan.comm_enabled = false;
  EXPECT_EQ(collective_algorithm_lines(s, h100), "");
}

}  // namespace
}  // namespace domino
