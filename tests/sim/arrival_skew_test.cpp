// arrival_skew_test.cpp: the arrival skew that grows with the compute between collectives
// (sim/engine/arrival_skew.hpp, collectives.<level>.sync_per_compute): the compute between launch points on
// hand-built schedules, the collectives the ranks reach aligned (no skew), the skew added in the simulator
// (of a queued collective only what is left of its wait), and the profile field's reading and checks.
#include "sim/engine/arrival_skew.hpp"

#include <gtest/gtest.h>

#include <map>

#include "sim/base/error.hpp"
#include "sim/cost/profile.hpp"
#include "sim/engine/simulator.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

// A schedule built op by op; every op's standalone time under unit_bytes_profile().
struct HandSchedule : test::ToySchedule {
  int32_t allreduce(double us, std::vector<int32_t> deps) { return comm(us, std::move(deps)); }
  std::vector<double> durations() const {
    std::vector<double> d;
    for (const Op& o : s.ops) d.push_back(o.bytes / 1e6);
    return d;
  }
};

// An op's time is its bytes / 1e6; the collectives pay sync_us + sync_per_compute x the compute between.
Profile skew_profile(double sync_us, double sync_per_compute) {
  Profile p = test::unit_bytes_profile();
  p.intra_node.sync_us = sync_us;
  p.intra_node.sync_per_compute = sync_per_compute;
  return p;
}

TEST(ArrivalSkew, ComputeBetweenCountsFromThePreviousCollectivesLaunchPoint) {
  HandSchedule h;
  const int32_t a = h.compute(10);
  const int32_t b = h.compute(20);
  const int32_t first = h.allreduce(5, {b});       // launched after a and b: 30 us since the iteration began
  const int32_t c = h.compute(40);
  const int32_t d = h.compute(80);
  const int32_t second = h.allreduce(5, {c});      // launched after c: 40 us since the first's launch
  const int32_t third = h.allreduce(5, {second});  // launched by a collective alone: nothing computed between
  const int32_t fourth = h.allreduce(5, {d, a});   // the latest compute dep counts: d, 80 us on
  const std::vector<double> between = compute_between_collectives(h.s, h.durations());
  EXPECT_DOUBLE_EQ(between[first], 30);
  EXPECT_DOUBLE_EQ(between[second], 40);
  EXPECT_DOUBLE_EQ(between[third], 0);
  EXPECT_DOUBLE_EQ(between[fourth], 80);
  EXPECT_DOUBLE_EQ(between[a], 0);  // not a collective
}

TEST(ArrivalSkew, ACollectiveLaunchedBeforeThePreviousOneGetsNoDrift) {
  HandSchedule h;
  const int32_t a = h.compute(10);
  const int32_t b = h.compute(20);
  const int32_t late = h.allreduce(5, {b});
  const int32_t early = h.allreduce(5, {a});  // queued behind `late`, launched from earlier compute
  const std::vector<double> between = compute_between_collectives(h.s, h.durations());
  EXPECT_DOUBLE_EQ(between[late], 30);
  EXPECT_DOUBLE_EQ(between[early], 0);
}

TEST(ArrivalSkew, WithoutARateTheDurationsAreTheSameObject) {
  HandSchedule h;
  h.allreduce(5, {h.compute(10)});
  const std::vector<double> d = h.durations();
  std::vector<double> scratch;
  EXPECT_EQ(&with_arrival_waits(h.s, d, {}, arrival_waits(h.s, d, {}), scratch), &d);
  EXPECT_TRUE(scratch.empty());
  const std::vector<double>& skewed =
      with_arrival_waits(h.s, d, {0, 0.5}, arrival_waits(h.s, d, {0, 0.5}), scratch);
  EXPECT_DOUBLE_EQ(skewed[1], 5 + 0.5 * 10);
  EXPECT_DOUBLE_EQ(skewed[0], 10);  // compute untouched
}

TEST(ArrivalSkew, TheSimulatorAddsTheSkewPerCollective) {
  HandSchedule h;
  const int32_t a = h.compute(100);
  const int32_t first = h.allreduce(10, {a});
  const int32_t b = h.compute(300, {first});
  const int32_t second = h.allreduce(10, {b});
  h.compute(50, {second});
  // Serial chain: 100 + (10 + 7 + 0.1 x 100) + 300 + (10 + 7 + 0.1 x 300) + 50.
  const SimResult r = simulate(h.s, CostModel(skew_profile(7, 0.1)));
  EXPECT_NEAR(r.iteration_us, 100 + 27 + 300 + 47 + 50, 1e-9);
  EXPECT_NEAR(r.exposed_comm_us, 27 + 47, 1e-9);
  // Without the rate, the constant skew alone, as before the field existed.
  EXPECT_NEAR(simulate(h.s, CostModel(skew_profile(7, 0))).iteration_us, 100 + 17 + 300 + 17 + 50, 1e-9);
}

TEST(ArrivalSkew, SchedulesSharingOpCostsEachGetTheirOwnSkew) {
  // The tuner times schedules that differ only in deps with one OpCosts: the skew follows the deps.
  HandSchedule early, late;
  for (HandSchedule* h : {&early, &late}) {
    const int32_t a = h->compute(100);
    const int32_t b = h->compute(200);
    h->allreduce(10, {h == &early ? a : b});
  }
  const CostModel cost(skew_profile(0, 0.5));
  const OpCosts costs = op_costs(early.s, cost);
  EXPECT_EQ(costs.sync_per_compute, 0.5);
  EXPECT_NEAR(simulate(early.s, costs, {}).comm_us, 10 + 0.5 * 100, 1e-9);
  EXPECT_NEAR(simulate(late.s, costs, {}).comm_us, 10 + 0.5 * 300, 1e-9);
}

TEST(ArrivalSkew, CollectivesQueuedBehindAnotherWithNoComputeBetweenAreAligned) {
  HandSchedule h;
  const int32_t a = h.compute(10);
  const int32_t chunk0 = h.allreduce(5, {a});
  const int32_t chunk1 = h.allreduce(5, {a});       // same launch point: pipelined chunks
  const int32_t behind = h.allreduce(5, {chunk1});  // waits on a collective alone
  const int32_t b = h.compute(20);
  const int32_t after = h.allreduce(5, {b});
  const int32_t earlier = h.allreduce(5, {a});  // launched from compute before the previous one's
  const std::vector<char> aligned = aligned_collectives(h.s.ops);
  EXPECT_FALSE(aligned[chunk0]);
  EXPECT_TRUE(aligned[chunk1]);
  EXPECT_TRUE(aligned[behind]);
  EXPECT_FALSE(aligned[after]);
  EXPECT_TRUE(aligned[earlier]);
  EXPECT_FALSE(aligned[a]);  // not a collective
  EXPECT_FALSE(aligned[b]);
}

TEST(ArrivalSkew, AnAlignedCollectiveGetsTheConstantSkewBack) {
  HandSchedule h;
  const int32_t a = h.compute(100);
  const int32_t first = h.allreduce(10, {a});
  const int32_t second = h.allreduce(10, {a});  // queued behind `first`: the ranks arrive together
  h.compute(50, {first, second});
  // The cost model puts sync_us (7) in both; the simulator takes it back from the second, which adds no
  // growth either (nothing computed between): 100 + (10 + 7 + 0.1 x 100) + 10 + 50.
  const SimResult r = simulate(h.s, CostModel(skew_profile(7, 0.1)));
  EXPECT_NEAR(r.iteration_us, 100 + 27 + 10 + 50, 1e-9);
  EXPECT_NEAR(r.comm_us, 27 + 10, 1e-9);
  // The constant alone reads the deps as well: a shared OpCosts carries it, and the tuner then times each
  // schedule with its own deps.
  const OpCosts costs = op_costs(h.s, CostModel(skew_profile(7, 0)));
  EXPECT_EQ(costs.sync_us, 7);
  EXPECT_TRUE(costs.skew_reads_deps());
  EXPECT_NEAR(simulate(h.s, costs, {}).iteration_us, 100 + 17 + 10 + 50, 1e-9);
  EXPECT_FALSE(op_costs(h.s, CostModel(skew_profile(0, 0))).skew_reads_deps());
}

TEST(ArrivalSkew, ThePredictedTimelineRecordsTheWaitEachCollectiveWasCharged) {
  HandSchedule h;
  const int32_t a = h.compute(100);
  const int32_t first = h.allreduce(10, {a});
  const int32_t queued = h.allreduce(10, {a});  // aligned: charged no wait
  const int32_t b = h.compute(300, {first, queued});
  const int32_t after = h.allreduce(10, {b});
  SimOptions options;
  options.record_timeline = true;
  const SimResult r = simulate(h.s, CostModel(skew_profile(7, 0.1)), options);
  std::map<int32_t, double> wait, span;
  for (const OpSpan& s : r.timeline.spans) wait[s.op] = s.arrival_wait_us, span[s.op] = s.end_us - s.start_us;
  EXPECT_NEAR(wait[first], 7 + 0.1 * 100, 1e-9);
  EXPECT_NEAR(wait[queued], 0, 1e-9);
  EXPECT_NEAR(wait[after], 7 + 0.1 * 300, 1e-9);
  EXPECT_NEAR(span[after] - wait[after], 10, 1e-9);  // the rest of the span is the transfer
  EXPECT_EQ(wait[a], -1);                            // not a collective
  EXPECT_EQ(wait[b], -1);
  // The wait the simulator charges is the one it records: the same sums as the iteration.
  EXPECT_NEAR(r.iteration_us, 100 + (10 + wait[first]) + 10 + 300 + (10 + wait[after]), 1e-9);
}

TEST(ArrivalSkew, ACollectiveQueuedBehindAnotherPaysOnlyWhatIsLeftOfItsWait) {
  // The last rank reaches a collective sync_us (30) after its compute deps end; the collective starts then or
  // when its stream comes to it, the later: behind a collective that ends on every rank together, part of the
  // wait or all of it has passed.
  HandSchedule h;
  const int32_t first = h.allreduce(15, {h.compute(100)});  // 100 .. 145, the wait included
  const int32_t second = h.allreduce(10, {h.compute(20)});  // launched at 120: the last rank comes at 150
  const int32_t third = h.allreduce(10, {h.compute(10)});   // launched at 130: at 160, when `second` ends
  h.compute(5, {first, second, third});
  SimOptions options;
  options.record_timeline = true;
  const SimResult r = simulate(h.s, CostModel(skew_profile(30, 0)), options);
  std::map<int32_t, double> wait;
  for (const OpSpan& s : r.timeline.spans) wait[s.op] = s.arrival_wait_us;
  EXPECT_NEAR(wait[first], 30, 1e-9);
  EXPECT_NEAR(wait[second], 5, 1e-9);  // its stream came to it at 145
  EXPECT_NEAR(wait[third], 0, 1e-9);   // at 160: the last rank is there
  EXPECT_NEAR(r.iteration_us, 170 + 5, 1e-9);
  EXPECT_NEAR(r.comm_us, 45 + 15 + 10, 1e-9);
  // The same schedule untimed takes the same time: the fast loop pays the same waits.
  EXPECT_NEAR(simulate(h.s, CostModel(skew_profile(30, 0))).iteration_us, r.iteration_us, 1e-9);
}

TEST(ArrivalSkew, APlanWithoutCommunicationPaysNoSkew) {
  HandSchedule h;
  h.allreduce(10, {h.compute(100)});
  h.s.plan.comm_enabled = false;
  const CostModel cost(skew_profile(7, 0.5));
  EXPECT_EQ(op_costs(h.s, cost).sync_per_compute, 0);
  EXPECT_NEAR(simulate(h.s, cost).iteration_us, 100, 1e-9);
}

TEST(ArrivalSkew, ProfileFieldReadsWritesAndIsChecked) {
  const std::string base = R"(name: t
devices_per_node: 8
gemm:
  bf16: {peak_tflops: 1, efficiency: [[1, 1]]}
memory: {bandwidth_gbps: 1000, launch_overhead_us: 0}
attention: {relative_efficiency: 1}
interference: {compute_slowdown_during_comm: 0, comm_slowdown_during_compute: 0}
collectives:
  intra_node: {latency_us: 0, bus_bandwidth_gbps: 1000, sync_us: 7, )";
  const Profile p = load_profile_string(base + "sync_per_compute: 0.125}\n", "t");
  EXPECT_EQ(p.intra_node.sync_per_compute, 0.125);
  EXPECT_EQ(load_profile_string(profile_to_yaml(p), "back").intra_node.sync_per_compute, 0.125);
  // Absent: 0, and the writer leaves it out (profiles without it keep their text).
  const Profile without = load_profile_string(base + "table: [[1000, 1000]]}\n", "t");
  EXPECT_EQ(without.intra_node.sync_per_compute, 0);
  EXPECT_EQ(profile_to_yaml(without).find("sync_per_compute"), std::string::npos);
  EXPECT_THROW(load_profile_string(base + "sync_per_compute: 1.5}\n", "t"), Error);
  EXPECT_THROW(load_profile_string(base + "sync_per_compute: -0.1}\n", "t"), Error);
  Profile bad = p;
  bad.intra_node.sync_per_compute = 2;
  EXPECT_THROW(validate_profile(bad), Error);
  EXPECT_EQ(CostModel(p).sync_per_compute(2, 8), 0.125);
  EXPECT_EQ(CostModel(p).sync_per_compute(1, 8), 0);  // a group of one waits for nobody
}

}  // namespace
}  // namespace domino
