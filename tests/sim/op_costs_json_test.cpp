// op_costs_json_test.cpp: a schedule's ops with the cost model's times as JSON (sim/engine/op_costs_json.hpp,
// domino-sim --ops-json) on a hand-built schedule timed on paper: the deps as built, a compute op's time, a
// collective's transfer without the constant skew and the wait the simulator charges it.
#include "sim/engine/op_costs_json.hpp"

#include <gtest/gtest.h>

#include "sim/cost/cost_model.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

TEST(OpCostsJson, GivesEachOpsStreamDepsTimeAndTheWaitCharged) {
  test::ToySchedule h;
  const int32_t a = h.compute(100);
  const int32_t first = h.comm(10, {a});
  const int32_t b = h.compute(300, {first});
  const int32_t second = h.comm(10, {b});
  const int32_t queued = h.comm(5, {second});  // launched by a collective alone: the ranks reach it aligned
  Profile p = test::unit_bytes_profile();
  p.intra_node.sync_us = 7;
  p.intra_node.sync_per_compute = 0.1;
  const nlohmann::json j = op_costs_json(h.s, op_costs(h.s, CostModel(p)));
  EXPECT_EQ(j["plan"], "hand-built");
  EXPECT_EQ(j["tp"], 2);
  EXPECT_DOUBLE_EQ(j["sync_us"].get<double>(), 7);
  const nlohmann::json& ops = j["ops"];
  ASSERT_EQ(ops.size(), h.s.ops.size());
  EXPECT_EQ(ops[a]["stream"], "compute");
  EXPECT_EQ(ops[first]["stream"], "comm");
  EXPECT_EQ(ops[first]["kind"], "allreduce");
  EXPECT_EQ(ops[b]["deps"], nlohmann::json::array({first}));
  EXPECT_EQ(ops[second]["id"], op_id(h.s.ops[second]));
  EXPECT_DOUBLE_EQ(ops[b]["duration_us"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(ops[b]["arrival_wait_us"].get<double>(), 0);
  // The cost model's 10 + 7 us less the constant; the wait 7 + 0.1 x the compute since the last launch point.
  EXPECT_DOUBLE_EQ(ops[first]["duration_us"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(ops[first]["arrival_wait_us"].get<double>(), 7 + 0.1 * 100);
  EXPECT_DOUBLE_EQ(ops[second]["arrival_wait_us"].get<double>(), 7 + 0.1 * 300);
  EXPECT_DOUBLE_EQ(ops[queued]["duration_us"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(ops[queued]["arrival_wait_us"].get<double>(), 0);
}

}  // namespace
}  // namespace domino
