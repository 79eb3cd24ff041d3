// cpu_sp_position_test.cpp: PositionAdd on a sequence-sharded buffer (attrs.sp_groups) takes each local row's
// position from the group layout, and the CPU backend runs the sequence-parallel pair end to end: on two
// forked ranks, positions added to each rank's rows and gathered must rebuild the positional table itself, and
// a ReduceScatter of that gathered buffer must give every rank twice its own rows back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <vector>

#include "cpu_test_util.hpp"
#include "executor/cpu/cpu_backend.hpp"
#include "executor/profiler/rank_fork.hpp"
#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

using cputest::Bed;
using cputest::box;

constexpr int32_t kOut = 2;

// A PositionAdd on local rows [s0, s1) of a [2, 4, 3] buffer on `rank` of 2, a table of 8 positions,
// `groups` groups. Table row p holds p in every column: the output names the position each row read.
Bed position_bed(int rank, int16_t groups, int64_t s0, int64_t s1) {
  Bed bed(5);
  bed.s.model.tp = 2;
  bed.rank = rank;
  const int32_t table = bed.buffer("table", 1, 8, 3), x = bed.buffer("x", 2, 4, 3, 0.0, 0.0);
  const int32_t out = bed.buffer("out", 2, 4, 3);
  for (int64_t p = 0; p < 8; ++p)
    for (int64_t c = 0; c < 3; ++c) bed.raw(table)[size_t(p * 3 + c)] = float(p);
  OpAttrs attrs;
  attrs.sp_groups = groups;
  bed.make(OpCode::PositionAdd, {box(x, 0, 2, s0, s1, 0, 3), bed.whole(table)}, {box(out, 0, 2, s0, s1, 0, 3)}, attrs);
  return bed;
}

// The positions rows [s0, s1) read (see position_bed).
std::vector<int64_t> positions_read(int rank, int16_t groups, int64_t s0, int64_t s1) {
  Bed bed = position_bed(rank, groups, s0, s1);
  bed.run(bed.s.ops.front());
  std::vector<int64_t> got;
  const Region r = box(kOut, 1, 2, s0, s1, 0, 3);  // the second batch entry: the same positions
  for (int64_t i = 0; i < r.rows(); ++i) got.push_back(int64_t(bed.at(r, i, 2)));
  return got;
}

TEST(CpuSpPosition, LocalRowsTakeTheirGroupsPositions) {
  using V = std::vector<int64_t>;
  // g = 1 (Megatron): rank r holds [4r, 4r + 4).
  EXPECT_EQ(positions_read(0, 1, 0, 4), (V{0, 1, 2, 3}));
  EXPECT_EQ(positions_read(1, 1, 0, 4), (V{4, 5, 6, 7}));
  // g = 2: groups [0, 4) and [4, 8), each cut in two parts of 2: rank 1 holds 2, 3 and 6, 7.
  EXPECT_EQ(positions_read(0, 2, 0, 4), (V{0, 1, 4, 5}));
  EXPECT_EQ(positions_read(1, 2, 0, 4), (V{2, 3, 6, 7}));
  // An op on the second group's local rows only.
  EXPECT_EQ(positions_read(1, 2, 2, 4), (V{6, 7}));
}

TEST(CpuSpPosition, GroupsThatDoNotDivideTheTableAreAnError) {
  EXPECT_THROW(positions_read(0, 3, 0, 4), Error);  // 8 positions in 3 groups over 2 ranks
  const Bed bed = position_bed(0, 3, 0, 4);
  try {
    sp_position_layout(bed.s, bed.s.ops.front());  // what both backends ask before a row is read
    FAIL() << "accepted 3 groups";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 groups"), std::string::npos) << e.what();
  }
}

// table [1, 8, h] (a replicated parameter: the same on both ranks) -> PositionAdd on zeros (sharded, g = 2)
// -> AllGather into a full buffer -> ReduceScatter back into a sharded one.
Schedule sp_round_trip() {
  Schedule s;
  s.model = default_model();
  s.model.tp = 2;
  s.model.seq_len = 8;
  const int64_t h = s.model.hidden;
  const auto buffer = [&](const char* name, BufferRole role, int64_t batch, int64_t seq) {
    BufferDesc b;
    b.name = name, b.role = role, b.batch = batch, b.seq = seq, b.cols = h;
    if (role == BufferRole::Param) b.param = ParamKind::PositionEmbedding;
    s.buffers.push_back(b);
    return Region{int32_t(s.buffers.size() - 1), 0, batch, 0, seq, 0, h};
  };
  const Region table = buffer("table", BufferRole::Param, 1, 8), x = buffer("x", BufferRole::Activation, 2, 4);
  const Region local = buffer("local", BufferRole::Activation, 2, 4), full = buffer("full", BufferRole::Activation, 2, 8);
  const Region back = buffer("back", BufferRole::Activation, 2, 4);
  const auto add = [&](OpCode code, Stream stream, Region in0, Region in1, Region out) {
    Op op;
    op.index = int32_t(s.ops.size());
    op.name = "sp";
    op.code = code;
    op.kind = kind_of(code);
    op.stream = stream;
    op.in[op.n_in++] = in0;
    if (in1.valid()) op.in[op.n_in++] = in1;
    op.out[op.n_out++] = out;
    op.attrs.sp_groups = code == OpCode::PositionAdd ? 2 : 0;
    op.attrs.chunks = code == OpCode::PositionAdd ? 1 : 2;
    s.ops.push_back(op);
  };
  add(OpCode::PositionAdd, Stream::Compute, x, table, local);
  add(OpCode::AllGather, Stream::Comm, local, Region{}, full);
  add(OpCode::ReduceScatter, Stream::Comm, full, Region{}, back);
  s.ops[1].deps = {0};
  return s;
}

TEST(CpuSpPosition, BackendGathersTheTableBackFromTheRanksRows) {
  prof::ForkOptions fo;
  fo.ranks = 2;
  fo.timeout_s = 120;
  const std::vector<nlohmann::json> ranks = prof::run_ranks(fo, [](GlooComm& comm) {
    const Schedule s = sp_round_trip();
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    RankContext ctx;
    ctx.rank = comm.rank();
    ctx.world = comm.world();
    ctx.comm = &comm;
    backend->prepare(s, ctx);
    const std::unique_ptr<StreamDriver> compute = backend->make_stream_driver(Stream::Compute);
    const std::unique_ptr<StreamDriver> collectives = backend->make_stream_driver(Stream::Comm);
    backend->begin_iteration(1);
    for (const Op& op : s.ops) (op.stream == Stream::Comm ? *collectives : *compute).issue(op);
    return nlohmann::json{{"table", backend->read_buffer(s, 0)}, {"local", backend->read_buffer(s, 2)},
                          {"full", backend->read_buffer(s, 3)}, {"back", backend->read_buffer(s, 4)}};
  });
  ASSERT_EQ(ranks.size(), 2u);
  for (const nlohmann::json& r : ranks) {
    const auto table = r["table"].get<std::vector<float>>(), full = r["full"].get<std::vector<float>>();
    const auto local = r["local"].get<std::vector<float>>(), back = r["back"].get<std::vector<float>>();
    ASSERT_EQ(full.size(), 2 * table.size());
    for (size_t b = 0; b < 2; ++b)
      for (size_t i = 0; i < table.size(); ++i) ASSERT_EQ(full[b * table.size() + i], table[i]) << b << " " << i;
    for (size_t i = 0; i < local.size(); ++i) ASSERT_EQ(back[i], 2 * local[i]) << i;
  }
  EXPECT_NE(ranks[0]["local"], ranks[1]["local"]);  // each rank added its own positions
}

}  // namespace
}  // namespace domino
