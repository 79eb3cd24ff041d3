// runtime_init_test.cpp: initial values do not depend on the TP degree (every rank's shard equals the
// matching part of the tp=1 tensor), have the promised statistics, and the synthetic data is a language
// the model can learn (targets are the next token). Also the .npy and snapshot formats round-trip, and
// the run summary takes the median iteration.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "executor/runtime/param_init.hpp"
#include "executor/runtime/results.hpp"
#include "executor/runtime/tensor_dump.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

// vocab > 0 replaces the model's vocabulary (one tp does not divide: the last shard is padded).
Schedule schedule_for(const char* name, int tp, int vocab = 0) {
  ModelOverrides o;
  o.tp = tp;
  ModelSpec m = load_model(std::string(DOMINO_TEST_DATA) + "/data/executor/" + name + ".yaml", o);
  if (vocab > 0) m.vocab = vocab;
  Schedule s = build_schedule(m, make_strategy_plan("megatron-sync", m));
  verify_schedule(s);
  return s;
}

std::vector<float> values(const Schedule& s, size_t buffer, int rank, uint64_t seed = 7) {
  std::vector<float> v(size_t(s.buffers[buffer].elements()));
  initial_values(s, int32_t(buffer), rank, seed, v.data());
  return v;
}

// Every shard (the vocabulary-parallel token embedding and head included) equals the same rows/columns of
// the tp=1 tensor; the padding of an uneven vocabulary shard is zero.
TEST(ParamInit, ShardsOfEveryTpDegreeMatchTheFullTensor) {
  for (const char* model : {"tiny-gpt", "tiny-llama"}) {
    for (const int vocab : {0, 94}) {  // the model's 96, and 94: 4 shards of 24, the last with 2 padding rows
      const Schedule full = schedule_for(model, 1, vocab);
      std::map<std::string, size_t> full_index;
      for (size_t i = 0; i < full.buffers.size(); ++i) full_index[full.buffers[i].name] = i;
      for (int tp : {2, 4}) {
        const Schedule s = schedule_for(model, tp, vocab);
        int vocab_sharded = 0, padding = 0;
        int params = 0;
        for (size_t i = 0; i < s.buffers.size(); ++i) {
          const BufferDesc& b = s.buffers[i];
          if (b.role != BufferRole::Param) continue;
          ASSERT_TRUE(full_index.count(b.name)) << b.name;
          const BufferDesc& fb = full.buffers[full_index[b.name]];
          const std::vector<float> reference = values(full, full_index[b.name], 0);
          ++params;
          const bool vocab_param = b.param == ParamKind::TokenEmbedding || b.param == ParamKind::HeadWeight;
          if (vocab_param) {
            ++vocab_sharded;
            EXPECT_EQ(b.param == ParamKind::TokenEmbedding ? b.seq : b.cols, s.model.vocab_per_rank())
                << b.name;
          }
          for (int rank = 0; rank < tp; ++rank) {
            const std::vector<float> mine = values(s, i, rank);
            for (int64_t r = 0; r < b.seq; ++r)
              for (int64_t c = 0; c < b.cols; ++c) {
                const ParamCoord at = shard_of(s.model, b, rank, r, c);
                if (vocab_padding(s.model, b, at)) {
                  ++padding;
                  ASSERT_EQ(mine[size_t(r * b.cols + c)], 0.0f) << b.name << " padding";
                  continue;
                }
                ASSERT_EQ(mine[size_t(r * b.cols + c)], reference[size_t(at.row * fb.cols + at.col)])
                    << model << " tp " << tp << " rank " << rank << " " << b.name << " (" << r << ", " << c
                    << ")";
              }
          }
        }
        EXPECT_GT(params, 10) << model;
        EXPECT_EQ(vocab_sharded, 2) << "token embedding and head";
        // 94 over 4 ranks: 24 ids each, 2 padding ids on the last, in a table of 64 columns and a head of 64
        // rows.
        EXPECT_EQ(padding, vocab == 94 && tp == 4 ? 2 * 2 * 64 : 0) << model << " tp " << tp;
      }
    }
  }
}

TEST(ParamInit, WeightsSeededNormsOneBiasesZero) {
  const Schedule s = schedule_for("tiny-gpt", 2);
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    const BufferDesc& b = s.buffers[i];
    if (b.role != BufferRole::Param) continue;
    const std::vector<float> v = values(s, i, 1);
    double sum2 = 0;
    for (float x : v) sum2 += double(x) * x;
    const double rms = std::sqrt(sum2 / double(v.size()));
    switch (b.param) {
      case ParamKind::AttnNormGamma: case ParamKind::MlpNormGamma: case ParamKind::FinalNormGamma:
        EXPECT_EQ(rms, 1.0) << b.name;
        break;
      case ParamKind::QkvBias: case ParamKind::ProjBias: case ParamKind::Fc1Bias: case ParamKind::Fc2Bias:
      case ParamKind::AttnNormBeta: case ParamKind::MlpNormBeta: case ParamKind::FinalNormBeta:
        EXPECT_EQ(rms, 0.0) << b.name;
        break;
      default:
        EXPECT_NEAR(rms, 0.02, 0.004) << b.name;
        EXPECT_NE(values(s, i, 1, 8), v) << b.name << ": the seed must matter";
    }
  }
}

TEST(ParamInit, TargetsAreTheNextToken) {
  const Schedule s = schedule_for("tiny-llama", 2);
  int32_t tokens = -1, targets = -1;
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    if (s.buffers[i].role != BufferRole::Data) continue;
    if (data_use(s, int32_t(i)) == DataUse::Tokens) tokens = int32_t(i);
    if (data_use(s, int32_t(i)) == DataUse::Targets) targets = int32_t(i);
  }
  ASSERT_GE(tokens, 0);
  ASSERT_GE(targets, 0);
  const std::vector<float> tok = values(s, size_t(tokens), 0), tgt = values(s, size_t(targets), 1);
  const BufferDesc& b = s.buffers[size_t(tokens)];
  for (int64_t bi = 0; bi < b.batch; ++bi)
    for (int64_t q = 0; q < b.seq; ++q) {
      const size_t at = size_t(bi * b.seq + q);
      EXPECT_EQ(tgt[at], float(next_token(int64_t(tok[at]), s.model.vocab)));
      if (q + 1 < b.seq) {
        EXPECT_EQ(tok[at + 1], tgt[at]);
      }
    }
  EXPECT_NE(tok[0], tok[size_t(b.seq)]) << "sequences should start at different tokens";
}

TEST(TensorDump, NpyAndSnapshotRoundTrip) {
  const fs::path dir = fs::temp_directory_path() / ("domino-npy-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::vector<float> data{1.5f, -2.0f, 3.25f, 0.0f, 1e-20f, 7.0f};
  write_npy((dir / "a.npy").string(), {1, 2, 3}, data);
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy((dir / "a.npy").string(), &shape), data);
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(fs::file_size(dir / "a.npy") % 16, (data.size() * 4) % 16);  // 64-byte aligned header
  RankSnapshot snap{3, 2.5f, {{1, 2, 3}, {}, {4}}};
  write_snapshot((dir / "s.bin").string(), snap);
  const RankSnapshot back = read_snapshot((dir / "s.bin").string());
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.loss, 2.5f);
  EXPECT_EQ(back.buffers, snap.buffers);
  fs::remove_all(dir);
}

TEST(Results, SummaryTakesTheMedianIterationAcrossRanks) {
  auto rank = [](int r, std::vector<double> times) {
    RankResult res;
    res.rank = r;
    res.peak_memory_bytes = 100 + r;
    for (size_t i = 0; i < times.size(); ++i) {
      IterationRecord it;
      it.timed = i > 0;  // one warm-up
      it.time_us = times[i];
      it.loss = float(10 - i);
      it.spans = {{0, double(i), times[i]}};
      res.iterations.push_back(it);
    }
    return rank_result_from_text(rank_result_to_text(res));  // through the wire format
  };
  // Iteration times are the max over ranks: 30, 50, 40 -> median 40, from iteration 3.
  Schedule one_op;
  one_op.ops.resize(1);
  const RunSummary s = summarize({rank(1, {999, 30, 10, 40}), rank(0, {5, 20, 50, 35})}, one_op);
  EXPECT_EQ(s.warmup, 1);
  EXPECT_EQ(s.timeline.iteration_samples_us, (std::vector<double>{30, 50, 40}));
  EXPECT_EQ(s.median_us, 40);
  EXPECT_DOUBLE_EQ(s.p10_us, 32);
  EXPECT_EQ(s.timeline.peak_memory_bytes, (std::vector<int64_t>{100, 101}));
  ASSERT_EQ(s.timeline.spans.size(), 2u);
  for (const OpSpan& span : s.timeline.spans) EXPECT_EQ(span.start_us, 3.0);
  // Each span carries its op's durations over the three timed iterations of its own rank (end - start):
  // rank 1: 29, 8, 37; rank 0: 19, 48, 32. The warm-up is not among them.
  for (const OpSpan& span : s.timeline.spans) {
    EXPECT_EQ(span.spread.samples, 3);
    EXPECT_DOUBLE_EQ(span.spread.median_us, span.rank == 1 ? 29 : 32);
    EXPECT_DOUBLE_EQ(span.spread.p10_us, span.rank == 1 ? 8 + 0.2 * 21 : 19 + 0.2 * 13);
    EXPECT_DOUBLE_EQ(span.spread.p90_us, span.rank == 1 ? 29 + 0.8 * 8 : 32 + 0.8 * 16);
    EXPECT_DOUBLE_EQ(span.spread.mean_us, span.rank == 1 ? (29 + 8 + 37) / 3.0 : (19 + 48 + 32) / 3.0);
    EXPECT_DOUBLE_EQ(span.spread.typical_mean_us, span.spread.mean_us);  // below four iterations: all typical
  }
  EXPECT_EQ(s.losses.size(), 4u);
}

// The typical mean is an op's mean over the iterations in the middle half by time, chosen by the iteration's
// time (the max over ranks), not by the op's own durations: a stall in the slowest iteration drops out, one
// in a typical iteration stays.
TEST(Results, TypicalMeanIsTheOpsMeanOverTheMiddleHalfOfTheIterations) {
  // One warm-up, then eight timed iterations; the fourth stalls op 0 (300 us). Op 1 takes 10 us but 50 in the
  // iteration of 101 us, and rank 1 makes the iteration of 96 us on rank 0 its slowest but one (103.5 us).
  const std::vector<double> times{500, 104, 98, 300, 102, 96, 101, 99, 103};
  auto rank = [&](int r) {
    RankResult res;
    res.rank = r;
    for (size_t i = 0; i < times.size(); ++i) {
      IterationRecord it;
      it.timed = i > 0;
      it.time_us = r == 1 && times[i] == 96 ? 103.5 : times[i];
      it.spans = {{0, 0, times[i]}, {1, 0, times[i] == 101 ? 50.0 : 10.0}};
      res.iterations.push_back(it);
    }
    return res;
  };
  Schedule two_ops;
  two_ops.ops.resize(2);
  const RunSummary s = summarize({rank(0), rank(1)}, two_ops);
  // Iteration times (max over ranks): 104, 98, 300, 102, 103.5, 101, 99, 103; by time 98 99 | 101 102 103
  // 103.5 | 104 300: the typical ones are 101, 102, 103 and 103.5 (rank 0's op 0: 96 there).
  for (const OpSpan& span : s.timeline.spans) {
    SCOPED_TRACE(span.op);
    EXPECT_EQ(span.spread.samples, 8);
    if (span.op == 0) {
      EXPECT_DOUBLE_EQ(span.spread.mean_us, (104 + 98 + 300 + 102 + 96 + 101 + 99 + 103) / 8.0);
      EXPECT_DOUBLE_EQ(span.spread.typical_mean_us, (101 + 102 + 103 + 96) / 4.0);
    } else {
      EXPECT_DOUBLE_EQ(span.spread.median_us, 10);
      EXPECT_DOUBLE_EQ(span.spread.typical_mean_us, (50 + 10 + 10 + 10) / 4.0);
    }
  }
}

TEST(Results, ComputeBusyIsEachRanksComputeStreamTimePerTimedIteration) {
  Schedule schedule;
  schedule.ops.resize(3);
  schedule.ops[1].stream = Stream::Comm;  // a collective: waits for the peer, not a measure of compute speed
  auto rank = [](int r, double scale) {
    RankResult res;
    res.rank = r;
    for (int i = 0; i < 3; ++i) {
      IterationRecord it;
      it.timed = i > 0;
      it.spans = {{0, 0, 10 * scale * (i + 1)}, {1, 0, 1000}, {2, 50, 50 + scale}};
      res.iterations.push_back(it);
    }
    return res;
  };
  const RunSummary s = summarize({rank(1, 2.0), rank(0, 1.0)}, schedule);
  // Ranks ascending; the warm-up iteration is left out; op 1 (communication stream) is not counted.
  ASSERT_EQ(s.compute_busy_us.size(), 2u);
  EXPECT_EQ(s.compute_busy_us[0], (std::vector<double>{21, 31}));
  EXPECT_EQ(s.compute_busy_us[1], (std::vector<double>{42, 62}));
  EXPECT_EQ(summary_json(s, schedule, {})["compute_busy_us"][1][0].get<double>(), 42);

  RankResult stray = rank(0, 1.0);
  stray.iterations[1].spans.push_back({7, 0, 1});
  EXPECT_THROW(summarize({stray}, schedule), Error);
}

TEST(Results, RanksOnOneClockShowWhenEachLeftTheBarrier) {
  Schedule one_op;
  one_op.ops.resize(1);
  auto rank = [](int r, double start_us, const std::string& clock) {
    RankResult res;
    res.rank = r;
    res.clock_domain = clock;
    IterationRecord it;
    it.timed = true;
    it.start_us = start_us;
    it.time_us = 40;
    it.spans = {{0, 10, 40}};
    res.iterations.push_back(it);
    return rank_result_from_text(rank_result_to_text(res));  // through the wire format
  };
  // Rank 1 left the barrier 700 us after rank 0: on one clock its op starts 700 us later.
  const RunSummary shared = summarize({rank(1, 5700, "boot-a ns-1"), rank(0, 5000, "boot-a ns-1")}, one_op);
  EXPECT_EQ(shared.timeline.rank_start_offsets_us, (std::vector<double>{0, 700}));
  for (const OpSpan& span : shared.timeline.spans) {
    EXPECT_DOUBLE_EQ(span.start_us, span.rank == 1 ? 710 : 10);
    EXPECT_DOUBLE_EQ(span.end_us, span.rank == 1 ? 740 : 40);
  }
  const nlohmann::json meta = trace_json(one_op, shared.timeline)["domino"];
  EXPECT_EQ(meta["rank_clocks"], "shared");
  EXPECT_EQ(meta["rank_start_offsets_us"][1].get<double>(), 700);
  EXPECT_EQ(shared.start_skew_us, std::vector<double>{700});
  EXPECT_EQ(summary_json(shared, one_op, {})["rank_start_skew_us"]["max"].get<double>(), 700);
  // Two hosts (or an unknown clock): their steady clocks do not compare, each rank keeps its own start.
  for (const std::string other : {"boot-b ns-1", ""}) {
    const RunSummary apart = summarize({rank(1, 5700, other), rank(0, 5000, "boot-a ns-1")}, one_op);
    EXPECT_TRUE(apart.timeline.rank_start_offsets_us.empty());
    EXPECT_TRUE(apart.start_skew_us.empty());
    EXPECT_FALSE(summary_json(apart, one_op, {}).contains("rank_start_skew_us"));
    for (const OpSpan& span : apart.timeline.spans) EXPECT_DOUBLE_EQ(span.start_us, 10);
    EXPECT_EQ(trace_json(one_op, apart.timeline)["domino"]["rank_clocks"], "per-rank");
  }
  // This process's own clock is named (Linux: the boot id, then the time namespace).
  EXPECT_FALSE(steady_clock_domain().empty());
}

// Asked for every iteration, the summary keeps each timed iteration's spans (the warm-up's not), each on the
// ranks' one clock by that iteration's own barrier offsets, and the trace writes them; not asked, neither.
TEST(Results, EveryTimedIterationsSpansOnTheRanksClockWhenAskedFor) {
  Schedule one_op;
  one_op.ops.resize(1);
  auto rank = [](int r, std::vector<double> starts) {
    RankResult res;
    res.rank = r;
    res.clock_domain = "boot-a ns-1";
    for (size_t i = 0; i < starts.size(); ++i) {
      IterationRecord it;
      it.timed = i > 0;  // the first is warm-up
      it.start_us = starts[i];
      it.time_us = 40 + double(i);
      it.spans = {{0, 10, 40 + double(i)}};
      res.iterations.push_back(it);
    }
    return res;
  };
  const std::vector<RankResult> ranks = {rank(0, {0, 1000, 2000}), rank(1, {0, 1300, 2100})};
  const RunSummary all = summarize(ranks, one_op, true);
  ASSERT_EQ(all.timeline.iteration_spans.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(all.timeline.iteration_spans[k].size(), 2u);
    for (const OpSpan& s : all.timeline.iteration_spans[k]) {
      const double offset = s.rank == 0 ? 0 : (k == 0 ? 300 : 100);
      EXPECT_DOUBLE_EQ(s.start_us, 10 + offset) << "iteration " << k << " rank " << s.rank;
      EXPECT_DOUBLE_EQ(s.end_us, 41 + double(k) + offset);
    }
  }
  const nlohmann::json written = trace_json(one_op, all.timeline)["domino"]["iteration_spans"];
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[1][1], nlohmann::json::array({1, 0, 110.0, 142.0}));
  const RunSummary median_only = summarize(ranks, one_op);
  EXPECT_TRUE(median_only.timeline.iteration_spans.empty());
  EXPECT_FALSE(trace_json(one_op, median_only.timeline)["domino"].contains("iteration_spans"));
}

}  // namespace
}  // namespace domino
