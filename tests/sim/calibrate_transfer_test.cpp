// calibrate_transfer_test.cpp: `--fit transfer` on constructed two-rank traces of AllReduces whose late rank
// (it waited for no one) transfers in a known time over seven timed iterations: what training added over the
// profile comes back as a time per byte for every kind and, where the messages span sizes, a time per
// collective for the AllReduce alone (the kind the trace holds). `--fit sp_transfer` on traces of
// AllGathers and ReduceScatters: each of those kinds its own terms, the AllReduce untouched.
#include <gtest/gtest.h>

#include <vector>

#include "sim/cost/cost_model.hpp"
#include "sim/fit/calibrate.hpp"
#include "tests/compare/trace_builders.hpp"
#include "tests/sim/calibration_profile.hpp"

namespace domino::prof {
namespace {

constexpr double kSync = 50;    // the base profile's arrival skew, inside every collective's cost
constexpr double kEarly = 200;  // rank 0 reaches each AllReduce this long before rank 1

struct Message {
  double bytes = 0, transfer_us = 0;
  const char* kind = "allreduce";
};

// Per message: 1 ms of compute (rank 1's 200 us longer), then the AllReduce, which rank 0 enters 200 us early
// and both leave together; `iterations` timed iterations alike.
TraceFile allreduce_trace(const std::vector<Message>& messages, int iterations) {
  TraceFile trace;
  trace.path = "transfers.json";
  trace.meta = {{"tp", 2}};
  double now = 0;
  int op = 0;
  for (const Message& m : messages) {
    trace.events.push_back(test::op_event(0, 0, op, "elementwise", now, 1000, 1e6));
    trace.events.push_back(test::op_event(1, 0, op, "elementwise", now, 1000 + kEarly, 1e6));
    ++op;
    trace.events.push_back(test::op_event(0, 1, op, m.kind, now + 1000, kEarly + m.transfer_us, m.bytes));
    trace.events.push_back(test::op_event(1, 1, op, m.kind, now + 1000 + kEarly, m.transfer_us, m.bytes));
    ++op;
    now += 1000 + kEarly + m.transfer_us;
  }
  trace.meta["iteration_spans"] =
      nlohmann::json(std::vector<nlohmann::json>(size_t(iterations), test::iteration_spans_of(trace.events)));
  return trace;
}

Profile base_profile() {
  Profile base = test::calibration_profile("base");
  base.intra_node.sync_us = kSync;
  base.intra_node.allgather = AlgorithmCurves{CollectiveCurve{40.0, 3.0, {}}};
  base.intra_node.reduce_scatter = AlgorithmCurves{CollectiveCurve{45.0, 2.0, {}}};
  return base;
}

CalibrationResult fit_transfer(const Profile& base, const TraceFile& trace, const char* part = "transfer") {
  return calibrate_profile(base, trace, 0, parse_calibration_scope(part));
}

double cost(const Profile& p, OpKind kind, double bytes) {
  return CostModel(p).collective_cost(kind, bytes, 2, p.devices_per_node).us - kSync;
}

// One message size: a time per byte alone (one size cannot tell a fixed part from it), the same for every
// kind. The AllReduce of 4e5 bytes costs 393 us in the profile (60 us latency, 4e5 bytes at 1.2 GB/s) and
// transferred in 500.
TEST(CalibrateTransfer, OneSizeGivesEveryKindTheSameTimePerByte) {
  const Profile base = base_profile();
  const CalibrationResult r = fit_transfer(base, allreduce_trace(std::vector<Message>(8, {4e5, 500}), 7));
  EXPECT_NEAR(cost(r.profile, OpKind::AllReduce, 4e5), 500, 1e-6) << r.report;
  const double per_byte =
      (500 - cost(base, OpKind::AllReduce, 4e5)) / ring_traffic(OpKind::AllReduce, 4e5, 2);
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter})
    for (double bytes : {1e3, 1e6})
      EXPECT_NEAR(cost(r.profile, kind, bytes) - cost(base, kind, bytes),
                  per_byte * ring_traffic(kind, bytes, 2), 1e-9)
          << to_string(kind) << " " << bytes;
  EXPECT_EQ(r.profile.intra_node.latency_us, 60.0);
  EXPECT_EQ(r.profile.intra_node.sync_us, kSync);
  EXPECT_TRUE(r.profile.intra_node.table.empty());  // no fixed part to hold
  EXPECT_NE(r.report.find("transfer (8 allreduce ops at 1 message size, median over 7 iterations): allreduce "
                          "the larger of 0.0 us and +0.2667 ns per byte"),
            std::string::npos)
      << r.report;
}

// Messages of 4 KiB and 1 MiB: the small one took 150 us over the profile, the big one 0.5 ns per byte each
// rank moved (524 us). The AllReduce takes both (its curve tabulated to hold the fixed part, exact at the
// rows' powers of four); the AllGather and ReduceScatter the time per byte alone.
TEST(CalibrateTransfer, SizesApartGiveTheMeasuredKindAFixedPart) {
  const Profile base = base_profile();
  const double small = 4096, big = 1048576, per_byte = 0.5e-3;
  const double small_us = cost(base, OpKind::AllReduce, small) + 150;
  const double big_us =
      cost(base, OpKind::AllReduce, big) + per_byte * ring_traffic(OpKind::AllReduce, big, 2);
  std::vector<Message> messages;
  for (int i = 0; i < 4; ++i) messages.insert(messages.end(), {{small, small_us}, {big, big_us}});
  const CalibrationResult r = fit_transfer(base, allreduce_trace(messages, 7));
  EXPECT_NEAR(cost(r.profile, OpKind::AllReduce, small), small_us, 1e-6 * small_us) << r.report;
  EXPECT_NEAR(cost(r.profile, OpKind::AllReduce, big), big_us, 1e-6 * big_us) << r.report;
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter})
    for (double bytes : {small, big})
      EXPECT_NEAR(cost(r.profile, kind, bytes) - cost(base, kind, bytes),
                  per_byte * ring_traffic(kind, bytes, 2), 1e-6 * cost(base, kind, bytes))
          << to_string(kind) << " " << bytes;
  EXPECT_NE(
      r.report.find("allreduce the larger of 150.0 us and +0.5 ns per byte a rank moves over the profile; "
                    "allgather, reducescatter the time per byte alone"),
      std::string::npos)
      << r.report;
}

// Collectives faster than the profile's fastest rate allows for every kind (the ReduceScatter's 2 GB/s, 0.5
// ns per byte, less 0.81): nothing is fitted, and the report says why. Four timed iterations are too few for
// a collective's median transfer: nothing is fitted either.
TEST(CalibrateTransfer, NothingIsFittedWhereABandwidthWouldTurnNegativeOrTheIterationsAreTooFew) {
  const Profile base = base_profile();
  const CalibrationResult fast = fit_transfer(base, allreduce_trace(std::vector<Message>(8, {4e5, 70}), 7));
  EXPECT_EQ(fast.profile.intra_node.bus_bandwidth_gbps, base.intra_node.bus_bandwidth_gbps);
  EXPECT_EQ(fast.profile.intra_node.reduce_scatter->ring.bus_bandwidth_gbps, 2.0);
  EXPECT_NE(fast.report.find("would make a bus bandwidth negative"), std::string::npos) << fast.report;
  const CalibrationResult few = fit_transfer(base, allreduce_trace(std::vector<Message>(8, {4e5, 500}), 4));
  EXPECT_EQ(few.profile.intra_node.bus_bandwidth_gbps, base.intra_node.bus_bandwidth_gbps);
  EXPECT_NE(few.report.find("transfer: not fitted"), std::string::npos) << few.report;
  EXPECT_FALSE(parse_calibration_scope("all").transfer);
}

// AllGathers and ReduceScatters of 1 MB, one taking 100 us and the other 300 us over the profile, beside
// small AllReduces: each kind gets its own time per byte (one size: no fixed part), exact at the size
// measured and in proportion to the traffic at another; the AllReduce keeps the profile's curve.
TEST(CalibrateTransfer, SpTransferGivesEachSequenceParallelKindItsOwnTerms) {
  const Profile base = base_profile();
  const double bytes = 1e6, other = 4e6;
  const double gather_us = cost(base, OpKind::AllGather, bytes) + 100;
  const double scatter_us = cost(base, OpKind::ReduceScatter, bytes) + 300;
  std::vector<Message> messages;
  for (int i = 0; i < 4; ++i)
    messages.insert(messages.end(),
                    {{bytes, gather_us, "allgather"}, {4096, 400}, {bytes, scatter_us, "reducescatter"}});
  const CalibrationResult r = fit_transfer(base, allreduce_trace(messages, 7), "sp_transfer");
  EXPECT_NEAR(cost(r.profile, OpKind::AllGather, bytes), gather_us, 1e-6 * gather_us) << r.report;
  EXPECT_NEAR(cost(r.profile, OpKind::ReduceScatter, bytes), scatter_us, 1e-6 * scatter_us) << r.report;
  const auto added = [&](OpKind kind, double extra_us) {
    return extra_us / ring_traffic(kind, bytes, 2) * ring_traffic(kind, other, 2);
  };
  EXPECT_NEAR(cost(r.profile, OpKind::AllGather, other) - cost(base, OpKind::AllGather, other),
              added(OpKind::AllGather, 100), 1e-6);
  EXPECT_NEAR(cost(r.profile, OpKind::ReduceScatter, other) - cost(base, OpKind::ReduceScatter, other),
              added(OpKind::ReduceScatter, 300), 1e-6);
  for (double b : {4096.0, bytes})
    EXPECT_EQ(cost(r.profile, OpKind::AllReduce, b), cost(base, OpKind::AllReduce, b));
  EXPECT_NE(r.report.find("sp_transfer (4 allgather ops at 1 message size, median over 7 iterations): the "
                          "larger of 0.0 us and +0.2 ns per byte"),
            std::string::npos)
      << r.report;
  EXPECT_FALSE(parse_calibration_scope("all").sp_transfer);
}

// A trace of AllReduces alone (megatron-sync's) has no sequence-parallel collective to fit: the curves stay
// and the report says which kinds were not fitted and why.
TEST(CalibrateTransfer, SpTransferWithoutThoseCollectivesFitsNothing) {
  const Profile base = base_profile();
  const CalibrationResult r =
      fit_transfer(base, allreduce_trace(std::vector<Message>(8, {4e5, 500}), 7), "sp_transfer");
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllReduce})
    EXPECT_EQ(cost(r.profile, kind, 4e5), cost(base, kind, 4e5)) << to_string(kind);
  EXPECT_NE(r.report.find("sp_transfer: allgather not fitted (0 over 5 or more iterations, 3 needed)"),
            std::string::npos)
      << r.report;
  EXPECT_NE(r.report.find("sp_transfer: reducescatter not fitted"), std::string::npos) << r.report;
}

}  // namespace
}  // namespace domino::prof
