// collective_algorithms_test.cpp: per-algorithm AllReduce curves (ring, NVLS): which one the cost model
// takes (the fastest eligible, or the pinned one), the SMs it reports, and the profile form that carries
// them (loading, round trip, the single-curve form unchanged). Figures are derived by hand from toy curves.
#include <gtest/gtest.h>

#include <string>

#include "sim/base/error.hpp"
#include "sim/cost/cost_model.hpp"
#include "sim/cost/profile.hpp"
#include "tests/sim/collective_profiles.hpp"

namespace domino {
namespace {

using test::allreduce_op;
using test::two_algorithm_profile;

TEST(CollectiveAlgorithms, NvlsIsTakenWhereItIsFaster) {
  const CostModel cm(two_algorithm_profile());
  const CollectiveCost big = cm.collective(allreduce_op(64e6), 8, 8);
  EXPECT_STREQ(big.algorithm, "nvls");
  EXPECT_NEAR(big.us, 30 + 1.75 * 64e6 / 2e5, 1e-9);
  EXPECT_EQ(big.sms, 16);
  EXPECT_EQ(cm.collective_sms(allreduce_op(64e6), 8, 8), 16);
  EXPECT_EQ(cm.op_us(allreduce_op(64e6), 8, 8), big.us);  // op_us is the chosen algorithm's time
}

TEST(CollectiveAlgorithms, RingIsTakenForSmallMessagesWhereNvlsStartsSlower) {
  const CostModel cm(two_algorithm_profile());
  const CollectiveCost small = cm.collective(allreduce_op(1e6), 8, 8);  // below the 2.29 MB crossing
  EXPECT_STREQ(small.algorithm, "ring");
  EXPECT_NEAR(small.us, 10 + 1.75 * 1e6 / 1e5, 1e-9);
  EXPECT_EQ(small.sms, 24);
  EXPECT_STREQ(cm.collective(allreduce_op(3e6), 8, 8).algorithm, "nvls");  // just above it
}

TEST(CollectiveAlgorithms, NvlsNeedsItsMinimumRanks) {
  const CostModel cm(two_algorithm_profile());
  // 4 ranks: NVLS would be faster at 64 MB by its curve, but it does not run on 4 GPUs.
  const CollectiveCost four = cm.collective(allreduce_op(64e6), 4, 8);
  EXPECT_STREQ(four.algorithm, "ring");
  EXPECT_NEAR(four.us, 10 + 1.5 * 64e6 / 1e5, 1e-9);
  EXPECT_STREQ(cm.collective(allreduce_op(64e6), 5, 8).algorithm, "nvls");
}

TEST(CollectiveAlgorithms, InterNodeGroupsUseTheInterNodeRing) {
  const CostModel cm(two_algorithm_profile());
  const CollectiveCost c = cm.collective(allreduce_op(64e6), 16, 8);
  EXPECT_STREQ(c.algorithm, "ring");
  EXPECT_EQ(c.sms, 8);
  EXPECT_NEAR(c.us, 40 + 64e6 * 2 * 15 / 16 / 5e4, 1e-9);
}

TEST(CollectiveAlgorithms, APinForcesItsAlgorithm) {
  Profile p = two_algorithm_profile();
  p.intra_node.pinned = CollectiveAlgorithm::Nvls;
  const CostModel nvls(p);
  const CollectiveCost small = nvls.collective(allreduce_op(1e6), 8, 8);  // ring would be faster here
  EXPECT_STREQ(small.algorithm, "nvls");
  EXPECT_NEAR(small.us, 30 + 1.75 * 1e6 / 2e5, 1e-9);
  // As NCCL with NCCL_ALGO=NVLS on 4 GPUs: nothing may run, an error naming the pin.
  try {
    nvls.collective(allreduce_op(1e6), 4, 8);
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("pins collectives.intra_node.algorithm to nvls"), std::string::npos)
        << e.what();
  }
  p.intra_node.pinned = CollectiveAlgorithm::Ring;
  EXPECT_STREQ(CostModel(p).collective(allreduce_op(64e6), 8, 8).algorithm, "ring");
}

TEST(CollectiveAlgorithms, NothingToCommunicateCostsNothing) {
  const CostModel cm(two_algorithm_profile());
  const CollectiveCost alone = cm.collective(allreduce_op(64e6), 1, 8);
  EXPECT_EQ(alone.us, 0);
  EXPECT_EQ(alone.sms, 0);
  EXPECT_STREQ(alone.algorithm, "none");
  Op gemm = allreduce_op(0);
  gemm.kind = OpKind::Gemm;
  EXPECT_EQ(cm.collective_sms(gemm, 8, 8), 0);  // compute holds no communication SMs
}

TEST(CollectiveAlgorithms, SingleCurveFormIsOneRingWithoutSms) {
  Profile p = two_algorithm_profile();
  p.intra_node.nvls.reset();
  p.intra_node.ring_sms = 0;
  p.inter_node->ring_sms = 0;
  const std::string yaml = profile_to_yaml(p);
  EXPECT_EQ(yaml.find("algorithms"), std::string::npos) << yaml;  // written in the single-curve form
  const Profile back = load_profile_string(yaml, "<single>");
  EXPECT_FALSE(back.intra_node.nvls.has_value());
  EXPECT_FALSE(back.intra_node.pinned.has_value());
  EXPECT_EQ(back.intra_node.ring_sms, 0);
  const CollectiveCost c = CostModel(back).collective(allreduce_op(64e6), 8, 8);
  EXPECT_STREQ(c.algorithm, "ring");
  EXPECT_EQ(c.sms, 0);  // not stated
}

TEST(CollectiveAlgorithms, AlgorithmsFormRoundTrips) {
  Profile p = two_algorithm_profile();
  p.intra_node.sync_us = 3;
  p.intra_node.table = {{1e6, 50}, {1e8, 100}};
  p.intra_node.nvls->table = {{1e6, 40}, {1e9, 200}};
  p.intra_node.nvls->min_ranks = 6;
  p.intra_node.pinned = CollectiveAlgorithm::Nvls;
  const std::string yaml = profile_to_yaml(p);
  const Profile back = load_profile_string(yaml, "<algorithms>");
  EXPECT_EQ(profile_to_yaml(back), yaml);
  EXPECT_EQ(back.intra_node.sync_us, 3);
  EXPECT_EQ(back.intra_node.ring_sms, 24);
  ASSERT_EQ(back.intra_node.table.size(), 2u);
  EXPECT_EQ(back.intra_node.table[0].bus_bandwidth_gbps, 50);
  ASSERT_TRUE(back.intra_node.nvls.has_value());
  EXPECT_EQ(back.intra_node.nvls->latency_us, 30);
  EXPECT_EQ(back.intra_node.nvls->bus_bandwidth_gbps, 200);
  EXPECT_EQ(back.intra_node.nvls->sms, 16);
  EXPECT_EQ(back.intra_node.nvls->min_ranks, 6);
  ASSERT_EQ(back.intra_node.nvls->table.size(), 2u);
  EXPECT_EQ(back.intra_node.nvls->table[1].bytes, 1e9);
  EXPECT_EQ(back.intra_node.pinned, CollectiveAlgorithm::Nvls);
  ASSERT_TRUE(back.inter_node.has_value());
  EXPECT_EQ(back.inter_node->ring_sms, 8);
  EXPECT_FALSE(back.inter_node->nvls.has_value());
}

TEST(CollectiveAlgorithms, NvlsMinRanksDefaultsToNcclsFloor) {
  const std::string yaml = profile_to_yaml(two_algorithm_profile());
  const std::string without = yaml.substr(0, yaml.find("        min_ranks: 5\n")) +
                              yaml.substr(yaml.find("        min_ranks: 5\n") + 21);
  ASSERT_EQ(without.find("min_ranks"), std::string::npos) << without;
  EXPECT_EQ(load_profile_string(without, "<default>").intra_node.nvls->min_ranks, kDefaultNvlsMinRanks);
}

TEST(CollectiveAlgorithms, ValidateRejectsNvlsAcrossNodesBuiltInCode) {
  Profile p = two_algorithm_profile();
  p.inter_node->nvls = CollectiveCurve{30, 200, {}, 16, 5};
  try {
    validate_profile(p);
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("collectives.inter_node: NVLS runs inside one NVLink domain only"),
              std::string::npos)
        << e.what();
  }
}

TEST(CollectiveAlgorithms, ShippedH100ProfilesPickNvlsForLargeTp8Messages) {
  // The shipped curves themselves, not their figures: at 1 GiB on 8 GPUs NVLS's 475 GB/s beats the
  // ring's 365 GB/s; at TP 4 NVLS is not eligible; across nodes only the ring exists.
  const Profile h100 = load_profile(std::string(DOMINO_SOURCE_DIR) + "/profiles/dgx-h100.yaml");
  const CostModel cm(h100);
  ASSERT_TRUE(h100.intra_node.nvls.has_value());
  EXPECT_STREQ(cm.collective(allreduce_op(1 << 30), 8, 8).algorithm, "nvls");
  EXPECT_EQ(cm.collective_sms(allreduce_op(1 << 30), 8, 8), h100.intra_node.nvls->sms);
  EXPECT_STREQ(cm.collective(allreduce_op(1 << 30), 4, 8).algorithm, "ring");
  const CostModel multi(load_profile(std::string(DOMINO_SOURCE_DIR) + "/profiles/h100-multinode.yaml"));
  EXPECT_STREQ(multi.collective(allreduce_op(1 << 30), 16, 8).algorithm, "ring");
  const Profile a100 = load_profile(std::string(DOMINO_SOURCE_DIR) + "/profiles/dgx-a100.yaml");
  EXPECT_FALSE(a100.intra_node.nvls.has_value());
}

}  // namespace
}  // namespace domino
