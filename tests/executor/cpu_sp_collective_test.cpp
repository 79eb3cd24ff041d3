// cpu_sp_collective_test.cpp: the CPU backend's sequence-parallel collectives on forked ranks joined by a real
// Gloo group. Every rank builds the same hand-made schedule with its own random data, runs an AllGather or a
// ReduceScatter over a region (batch and column sub-ranges, one or two groups of the layout), and returns its
// output buffer; the test recomputes what every rank must hold from all ranks' inputs (the contract of
// sim/ir/schedule.hpp written out as loops) and compares, elements outside the region included.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cpu_test_util.hpp"
#include "executor/cpu/cpu_collectives.hpp"
#include "executor/profiler/rank_fork.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

using cputest::Bed;
using cputest::box;

// One collective over a box of a [batch, seq/tp, sharded_cols] buffer and a [batch, seq, full_cols] one.
struct Case {
  std::string name;
  OpCode code = OpCode::AllGather;
  int tp = 2;
  int64_t batch = 3, seq = 8, groups = 1;
  int64_t sharded_cols = 5, full_cols = 6;
  int64_t b0 = 0, b1 = 3;          // batch range of both regions
  int64_t g0 = 0, n = 1;           // the op's groups [g0, g0 + n)
  int64_t c0 = 0, cf0 = 0, cols = 5;  // column offsets in the sharded and the full buffer, width
  bool accumulate = false;
  int runs = 1;                    // times the op runs (Gloo's ReduceScatter is set up once, then reused)

  int64_t part() const { return seq / (groups * tp); }
  int64_t group_rows() const { return seq / groups; }
};

constexpr int32_t kSharded = 0, kFull = 1;

// The rank's test bed: both buffers with data drawn from a seed of its own, and the op.
Bed bed_for(const Case& c, int rank) {
  Bed bed(1000 + 17 * unsigned(rank));
  bed.s.model.tp = c.tp;
  bed.rank = rank;
  bed.buffer("sharded", c.batch, c.seq / c.tp, c.sharded_cols);
  bed.buffer("full", c.batch, c.seq, c.full_cols);
  const Region local = box(kSharded, c.b0, c.b1, c.g0 * c.part(), (c.g0 + c.n) * c.part(), c.c0, c.c0 + c.cols);
  const Region full = box(kFull, c.b0, c.b1, c.g0 * c.group_rows(), (c.g0 + c.n) * c.group_rows(), c.cf0, c.cf0 + c.cols);
  OpAttrs attrs;
  attrs.chunks = int16_t(c.n);
  attrs.accumulate = c.accumulate;
  const bool gather = c.code == OpCode::AllGather;
  bed.make(c.code, {gather ? local : full}, {gather ? full : local}, attrs);
  bed.s.ops.back().stream = Stream::Comm;
  return bed;
}

// Runs the case's op on this rank through the CPU backend's collective path; returns the output buffer.
std::vector<float> run_on_rank(const Case& c, GlooComm& comm) {
  Bed bed = bed_for(c, comm.rank());
  const CpuOpContext ops = bed.context();
  CpuCollectiveState state(collective_staging_floats(bed.s, Stream::Comm));
  const CpuCollectiveContext cc{&ops, &comm, comm.world(), 0};
  for (int i = 0; i < c.runs; ++i) run_cpu_collective(bed.s.ops.back(), cc, state);
  return bed.raw(c.code == OpCode::AllGather ? kFull : kSharded);
}

// What rank `rank`'s output buffer must hold, from every rank's inputs.
std::vector<float> expected_on_rank(const Case& c, int rank) {
  std::vector<Bed> beds;
  for (int r = 0; r < c.tp; ++r) beds.push_back(bed_for(c, r));
  const int64_t part = c.part(), group_rows = c.group_rows();
  const auto full_at = [&](int r, int64_t b, int64_t s, int64_t col) -> float& {
    return beds[size_t(r)].raw(kFull)[size_t((b * c.seq + s) * c.full_cols + c.cf0 + col)];
  };
  const auto local_at = [&](int r, int64_t b, int64_t s, int64_t col) -> float& {
    return beds[size_t(r)].raw(kSharded)[size_t((b * (c.seq / c.tp) + s) * c.sharded_cols + c.c0 + col)];
  };
  for (int64_t b = c.b0; b < c.b1; ++b)
    for (int64_t j = c.g0; j < c.g0 + c.n; ++j)
      for (int64_t t = 0; t < part; ++t)
        for (int64_t col = 0; col < c.cols; ++col) {
          const int64_t local_row = j * part + t;
          if (c.code == OpCode::AllGather) {
            for (int r = 0; r < c.tp; ++r)
              full_at(rank, b, j * group_rows + r * part + t, col) = local_at(r, b, local_row, col);
          } else {
            float sum = 0;
            for (int r = 0; r < c.tp; ++r) sum += full_at(r, b, j * group_rows + rank * part + t, col);
            float& out = local_at(rank, b, local_row, col);
            for (int i = 0; i < c.runs; ++i) out = c.accumulate ? out + sum : sum;
          }
        }
  return beds[size_t(rank)].raw(c.code == OpCode::AllGather ? kFull : kSharded);
}

// Runs every case on c.tp forked ranks (all cases of one call share the TP degree).
void expect_cases(const std::vector<Case>& cases) {
  prof::ForkOptions fo;
  fo.ranks = cases.front().tp;
  fo.timeout_s = 120;
  const std::vector<nlohmann::json> ranks = prof::run_ranks(fo, [&](GlooComm& comm) {
    nlohmann::json out = nlohmann::json::object();
    for (const Case& c : cases) out[c.name] = run_on_rank(c, comm);
    return out;
  });
  ASSERT_EQ(int(ranks.size()), fo.ranks);
  for (const Case& c : cases)
    for (int r = 0; r < c.tp; ++r) {
      const std::vector<float> got = ranks[size_t(r)].at(c.name).get<std::vector<float>>();
      const std::vector<float> want = expected_on_rank(c, r);
      ASSERT_EQ(got.size(), want.size()) << c.name;
      int wrong = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(got[i] - want[i]) <= 1e-6f * (1 + std::abs(want[i]))) && ++wrong <= 3)
          ADD_FAILURE() << c.name << " rank " << r << " element " << i << ": got " << got[i] << ", want " << want[i];
      EXPECT_EQ(wrong, 0) << c.name << " rank " << r;
    }
}

Case gather(std::string name) {
  Case c;
  c.name = std::move(name);
  return c;
}

Case scatter(std::string name, bool accumulate) {
  Case c;
  c.name = std::move(name);
  c.code = OpCode::ReduceScatter;
  c.accumulate = accumulate;
  return c;
}

TEST(CpuSpCollective, AllGatherAndReduceScatterOnTwoRanks) {
  std::vector<Case> cases;
  // g = 1 (Megatron's layout), every batch entry and column.
  Case whole = gather("ag g1 whole");
  whole.sharded_cols = whole.full_cols = whole.cols = 5;
  cases.push_back(whole);
  // g = 1, a batch sub-range and a column sub-range at different offsets in the two buffers.
  Case sub = gather("ag g1 sub");
  sub.b0 = 1, sub.b1 = 3, sub.c0 = 1, sub.cf0 = 2, sub.cols = 3;
  cases.push_back(sub);
  // g = 2: the second group alone, then both groups in one op.
  Case second = gather("ag g2 second group");
  second.groups = 2, second.g0 = 1, second.n = 1, second.b0 = 0, second.b1 = 2, second.cols = 4, second.cf0 = 2;
  cases.push_back(second);
  Case both = gather("ag g2 both groups");
  both.groups = 2, both.n = 2, both.b0 = 2, both.b1 = 3, both.c0 = 2, both.cols = 3;
  cases.push_back(both);
  for (bool acc : {false, true}) {
    const std::string tag = acc ? " accumulate" : "";
    Case s1 = scatter("rs g1" + tag, acc);
    s1.b0 = 1, s1.b1 = 2, s1.c0 = 1, s1.cf0 = 3, s1.cols = 3;
    cases.push_back(s1);
    Case s2 = scatter("rs g2 first group" + tag, acc);
    s2.groups = 2, s2.g0 = 0, s2.n = 1, s2.cols = 5, s2.cf0 = 1;
    cases.push_back(s2);
    Case s3 = scatter("rs g2 both groups" + tag, acc);
    s3.groups = 2, s3.n = 2, s3.b0 = 1, s3.b1 = 3, s3.c0 = 2, s3.cols = 2;
    cases.push_back(s3);
    s3.name += " three times";
    s3.runs = 3;
    cases.push_back(s3);
  }
  expect_cases(cases);
}

// Three ranks: Gloo's halving-doubling reduce-scatter on a group that is not a power of two.
TEST(CpuSpCollective, ThreeRanks) {
  std::vector<Case> cases;
  for (Case c : {gather("ag tp3"), scatter("rs tp3", true)}) {
    c.tp = 3, c.seq = 12, c.groups = 2, c.n = 2, c.b0 = 1, c.b1 = 3, c.c0 = 1, c.cols = 4;
    cases.push_back(c);
  }
  expect_cases(cases);
}

// The geometry checks run before any byte moves: a malformed op is a runtime error naming it.
TEST(CpuSpCollective, MalformedOpsAreNamed) {
  Case c = gather("bad");
  Bed bed = bed_for(c, 0);
  Op op = bed.s.ops.back();
  const auto expect_error = [&](const Op& bad, const std::string& words) {
    try {
      sp_collective_shape(bed.s, bad, 2);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(op_id(bad)), std::string::npos) << e.what();
    }
  };
  Op three_groups = op;
  three_groups.attrs.chunks = 3;  // divides neither 4 local nor 8 full rows
  expect_error(three_groups, "divide neither");
  Op narrow = op;
  narrow.out[0].c1 -= 1;
  expect_error(narrow, "columns");
  Op short_full = op;
  short_full.out[0].s1 = 6;  // 6 full rows for 4 local ones on 2 ranks
  expect_error(short_full, "tp x");
  Op outside = op;
  outside.in[0].s1 = 5;  // the sharded buffer holds 4 rows
  expect_error(outside, "outside buffer");
  // A group of the wrong size: the schedule is for tp 2.
  const CpuOpContext ops = bed.context();
  CpuCollectiveState state(collective_staging_floats(bed.s, Stream::Comm));
  const CpuCollectiveContext alone{&ops, nullptr, 1, 0};
  EXPECT_THROW(run_cpu_collective(op, alone, state), Error);
}

TEST(CpuSpCollective, StagingIsSizedByTheLargestFullRegionOfTheStream) {
  Case c = gather("size");
  c.b0 = 1;  // 2 batch entries x 8 rows x 5 columns
  const Bed bed = bed_for(c, 0);
  EXPECT_EQ(collective_staging_floats(bed.s, Stream::Comm), 2 * 8 * 5);
  EXPECT_EQ(collective_staging_floats(bed.s, Stream::Compute), 0);
}

}  // namespace
}  // namespace domino
