// fit_test.cpp: the profile fitting (sim/fit) on synthetic measurements made from known figures (the fit
// must recover them and reproduce every point within its spread), and its small statistics helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "sim/cost/cost_model.hpp"
#include "sim/fit/profile_fit.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof {
namespace {

TEST(ProfilerStats, PercentilesAndSpread) {
  const Timing t = timing_of({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(t.median_us, 3);
  EXPECT_NEAR(t.p10_us, 1.4, 1e-12);
  EXPECT_NEAR(t.p90_us, 4.6, 1e-12);
  EXPECT_NEAR(t.spread(), (4.6 - 1.4) / 6, 1e-12);
}

TEST(ProfilerStats, LineFitRecoversLatencyAndSlope) {
  std::vector<double> x, y;
  for (double b = 4; b < 1e8; b *= 4) {
    x.push_back(b);
    y.push_back(50 + b / 1200.0);
  }
  const LineFit f = fit_line(x, y, relative_weights(y));
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.a, 50, 1e-6);
  EXPECT_NEAR(f.b, 1 / 1200.0, 1e-12);
}

// y = 3 + 2 x1 - 0.5 x2: x2's coefficient would be negative, so it is dropped; y = 3 + 2 x1 exactly is
// recovered; an intercept the data drive below zero is held at 0.
TEST(ProfilerStats, NonNegativeFitDropsTermsThatWouldGoNegative) {
  const std::vector<double> ones = {1, 1, 1, 1, 1}, x1 = {1, 2, 3, 4, 5}, x2 = {5, 1, 4, 2, 3};
  std::vector<double> y, w(5, 1.0);
  for (size_t i = 0; i < 5; ++i) y.push_back(3 + 2 * x1[i] - 0.5 * x2[i]);
  const NonNegativeFit f = fit_non_negative({ones, x1, x2}, y, w);
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.c[2], 0);
  for (double c : f.c) EXPECT_GE(c, 0);
  std::vector<double> exact;
  for (double x : x1) exact.push_back(3 + 2 * x);
  const NonNegativeFit g = fit_non_negative({ones, x1, x2}, exact, w);
  ASSERT_TRUE(g.ok);
  EXPECT_NEAR(g.c[0], 3, 1e-9);
  EXPECT_NEAR(g.c[1], 2, 1e-9);
  EXPECT_NEAR(g.c[2], 0, 1e-9);
  std::vector<double> below;  // y = -4 + 3 x1: the intercept cannot go negative
  for (double x : x1) below.push_back(-4 + 3 * x);
  const NonNegativeFit h = fit_non_negative({ones, x1}, below, w);
  ASSERT_TRUE(h.ok);
  EXPECT_EQ(h.c[0], 0);
  EXPECT_GT(h.c[1], 0);
  EXPECT_FALSE(fit_non_negative({{}, {}}, {}, {}).ok);  // no point: nothing to solve
}

TEST(ProfilerStats, LogBinsIncrease) {
  const auto c = log_binned_median({1, 1.1, 10, 11, 1000}, {0.1, 0.3, 0.5, 0.5, 0.9}, 0.5);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_NEAR(c[0].y, 0.2, 1e-12);
  for (size_t i = 1; i < c.size(); ++i) EXPECT_GT(c[i].x, c[i - 1].x);
}

// Synthetic raw measurements from known figures, with +-4% multiplicative noise on every repeat.
struct Truth {
  double gflops = 70, mem_gbps = 12, launch_us = 3, latency_us = 45, busbw_gbps = 1.1;
  double compute_slow = 0.2, comm_slow = 0.1;
};

nlohmann::json samples(double t, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.96, 1.04);
  std::vector<double> s;
  for (int i = 0; i < 9; ++i) s.push_back(t * u(rng));
  return s;
}

FitInput synthetic_input(const Truth& T, int tp) {
  std::mt19937 rng(7);
  FitInput in;
  in.tp = tp;
  nlohmann::json rank;
  rank["compute"] = nlohmann::json::array();
  for (int64_t m : {128, 512, 1024})
    for (int64_t n : {256, 1024})
      for (int64_t k : {128, 768}) {
        const double flops = 2.0 * m * n * k;
        const double t = T.launch_us + flops / (T.gflops * 1e3);  // GFLOP/s = 1e3 FLOP/us
        rank["compute"].push_back({{"label", "g"}, {"kind", "gemm"}, {"m", m}, {"n", n}, {"k", k}, {"flops", flops},
                                   {"bytes", 4.0 * (m * k + k * n + m * n)}, {"samples_us", samples(t, rng)}});
      }
  for (double bytes : {1e4, 1e5, 1e6, 1e7, 5e7}) {
    const double t = T.launch_us + bytes / (T.mem_gbps * 1e3);
    rank["compute"].push_back({{"label", "norm " + std::to_string(bytes)}, {"kind", "norm"}, {"m", 1}, {"n", 1},
                               {"k", 0}, {"flops", 0}, {"bytes", bytes}, {"samples_us", samples(t, rng)}});
  }
  for (double flops : {1e7, 1e8, 1e9}) {
    const double t = T.launch_us + flops / (0.4 * T.gflops * 1e3);
    rank["compute"].push_back({{"label", "attention " + std::to_string(flops)}, {"kind", "attention"}, {"m", 1},
                               {"n", 1}, {"k", 0}, {"flops", flops}, {"bytes", 1e5}, {"samples_us", samples(t, rng)}});
  }
  rank["collectives"] = nlohmann::json::array();
  const double ring = 2.0 * (tp - 1) / tp;
  for (double b = 4; b <= 64.0 * 1024 * 1024; b *= 4) {
    const double t = T.latency_us + b * ring / (T.busbw_gbps * 1e3);
    rank["collectives"].push_back({{"bytes", b}, {"samples_us", samples(t, rng)}});
  }
  rank["interference"] = {{"gemm_alone_us", samples(1000, rng)}, {"gemm_during_us", samples(1000 * (1 + T.compute_slow), rng)},
                          {"allreduce_alone_us", samples(500, rng)},
                          {"allreduce_during_us", samples(500 * (1 + T.comm_slow), rng)}};
  in.ranks = {rank, rank};
  return in;
}

TEST(ProfilerFit, WaitForLastIsTheLastArrivalAfterTheMedianRanks) {
  EXPECT_EQ(wait_for_last({}), 0);
  EXPECT_EQ(wait_for_last({7}), 0);
  EXPECT_DOUBLE_EQ(wait_for_last({100, 300}), 100);       // two ranks: half the spread
  EXPECT_DOUBLE_EQ(wait_for_last({900, 100, 200}), 700);  // three: the median rank arrived at 200
  EXPECT_DOUBLE_EQ(wait_for_last({0, 0, 0, 400}), 400);   // one straggler among four costs its whole lateness
}

TEST(ProfilerFit, ArrivalSkewIsHowMuchLaterThanTheMedianRankTheLastArrives) {
  FitInput in = synthetic_input(Truth{}, 2);
  EXPECT_EQ(fit_profile(in).profile.intra_node.sync_us, 0);  // not measured: no skew assumed
  // Per repeat the rank that arrived first waited `skew` longer than the one that came last.
  const std::vector<double> skew = {300, 2500, 900, 1200, 4000};  // median 1200
  nlohmann::json late = nlohmann::json::array(), early = nlohmann::json::array();
  for (double s : skew) late.push_back(80.0), early.push_back(80.0 + s);
  in.ranks[0]["sync"] = {{"stretch_us", 15000.0}, {"allreduce_us", early}};
  in.ranks[1]["sync"] = {{"stretch_us", 15000.0}, {"allreduce_us", late}};
  const FitResult r = fit_profile(in);
  EXPECT_NEAR(r.profile.intra_node.sync_us, 600, 1e-9);  // two ranks: the median is halfway, 1200 / 2
  EXPECT_NE(r.summary.find("arrival skew"), std::string::npos);
  // ... and the cost model charges it to every AllReduce.
  Profile no_sync = r.profile;
  no_sync.intra_node.sync_us = 0;
  EXPECT_NEAR(CostModel(r.profile).allreduce_us(1e6, 2, 4) - CostModel(no_sync).allreduce_us(1e6, 2, 4), 600, 1e-6);
}

// A CPU AllReduce beside GEMMs runs either at its own speed or several times slower (its thread waits for
// the core): with the two groups nearly even, the median is whichever group is a sample larger, and one more
// slow sample moves it from one to the other. The slowdown is the mean's, which one sample hardly moves.
TEST(ProfilerFit, AnAllReduceSlowdownOfTwoGroupsIsTheMeans) {
  const auto slowdown_with_slow = [](int slow, int fast) {
    FitInput in = synthetic_input(Truth{}, 2);
    nlohmann::json during = nlohmann::json::array();
    for (int i = 0; i < slow + fast; ++i) during.push_back(i < slow ? 2500.0 : 500.0);
    for (nlohmann::json& rank : in.ranks) {
      rank["interference"]["allreduce_alone_us"] = std::vector<double>(20, 500.0);
      rank["interference"]["allreduce_during_us"] = during;
    }
    return fit_profile(in).profile.interference.comm_slowdown_during_compute;
  };
  EXPECT_NEAR(slowdown_with_slow(50, 51), 4.0 * 50 / 101, 1e-9);
  EXPECT_NEAR(slowdown_with_slow(51, 50), 4.0 * 51 / 101, 1e-9);
  EXPECT_EQ(slowdown_with_slow(0, 40), 0);
}

TEST(ProfilerFit, RecoversKnownFiguresFromSyntheticMeasurements) {
  const Truth T;
  for (int tp : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    const FitResult r = fit_profile(synthetic_input(T, tp));
    const Profile& p = r.profile;
    EXPECT_NEAR(p.memory.bandwidth_gbps, T.mem_gbps, 0.05 * T.mem_gbps);
    EXPECT_NEAR(p.memory.launch_overhead_us, T.launch_us, 0.5);
    ASSERT_EQ(p.memory.per_kind.count("norm"), 1u);  // the only memory-bound kind measured
    EXPECT_EQ(p.memory.per_kind.size(), 1u);
    EXPECT_NEAR(p.memory.per_kind.at("norm").bandwidth_gbps, T.mem_gbps, 0.05 * T.mem_gbps);
    EXPECT_NEAR(p.intra_node.bus_bandwidth_gbps, T.busbw_gbps, 0.05 * T.busbw_gbps);
    EXPECT_LE(p.intra_node.latency_us, T.latency_us * 1.05);
    EXPECT_GT(p.intra_node.latency_us, T.latency_us * 0.8);
    EXPECT_NEAR(p.interference.compute_slowdown_during_comm, T.compute_slow, 0.05);
    EXPECT_NEAR(p.interference.comm_slowdown_during_compute, T.comm_slow, 0.05);
    ASSERT_TRUE(p.gemm[int(DType::FP32)]);
    EXPECT_NEAR(p.gemm[int(DType::FP32)]->peak_tflops * 1e3, T.gflops, 0.08 * T.gflops);
    // The fitted parameters alone (tables removed) reproduce every measured point within its spread.
    const SelfCheck sc = self_check(p, tp);
    ASSERT_FALSE(sc.gemm.empty());
    ASSERT_FALSE(sc.allreduce.empty());
    for (double e : sc.gemm) EXPECT_LT(e, 0.08);       // 4% noise each side, plus the median of bins
    for (double e : sc.allreduce) EXPECT_LT(e, 0.1);  // the stored latency is kept below the fastest message
    // The recorded fit quality is what the file's own figures give.
    EXPECT_GT(p.metadata.spread.at("fit.gemm_curve"), 0);
    EXPECT_LT(p.metadata.spread.at("fit.gemm_curve"), 0.08);
  }
}

// Residual adds on whole rows and on column chunks (each row a short run: a cost per row beyond the bytes):
// the opcode's bandwidth comes from the whole rows alone, its per-row term from the chunks; the general
// figures are not moved by the chunks.
TEST(ProfilerFit, AColumnChunksPerRowTermComesFromTheChunkedProbesAlone) {
  const Truth T;
  const double add_gbps = 18, row_us = 0.04;
  FitInput in = synthetic_input(T, 2);
  std::mt19937 rng(11);
  for (auto& rank : in.ranks)
    for (const auto& [bytes, rows, chunk] : {std::tuple{4.7e6, 1024, -1},
                                             {2.4e6, 512, -1},
                                             {1.2e6, 256, -1},
                                             {2.4e6, 1024, 0},
                                             {1.2e6, 512, 1},
                                             {0.6e6, 256, 0}}) {
      const double t = bytes / (add_gbps * 1e3) + (chunk >= 0 ? rows * row_us : 0);
      rank["compute"].push_back({{"label", "add"},
                                 {"kind", "elementwise"},
                                 {"code", "ResidualAdd"},
                                 {"m", rows},
                                 {"n", 768},
                                 {"k", 0},
                                 {"flops", 0},
                                 {"bytes", bytes},
                                 {"chunk", chunk},
                                 {"samples_us", samples(t, rng)}});
    }
  const Profile p = fit_profile(in).profile;
  const MemoryCost& add = p.memory.per_code.at("ResidualAdd");
  EXPECT_NEAR(add.bandwidth_gbps, add_gbps, 0.05 * add_gbps);
  EXPECT_NEAR(add.chunk_row_us, row_us, 0.2 * row_us);
  EXPECT_NEAR(p.memory.per_kind.at("elementwise").chunk_row_us, row_us, 0.2 * row_us);
  EXPECT_EQ(p.memory.per_kind.at("norm").chunk_row_us, 0);  // no chunks measured
  // The cost model charges the chunks what they took.
  Op chunked;
  chunked.kind = OpKind::Elementwise;
  chunked.code = OpCode::ResidualAdd;
  chunked.bytes = 2.4e6, chunked.m = 1024, chunked.chunk = 0;
  const double truth = 2.4e6 / (add_gbps * 1e3) + 1024 * row_us;
  EXPECT_NEAR(CostModel(p).op_us(chunked, 2, 8), truth, 0.05 * truth);
}

// A probe of a whole GEMM of 8 row blocks (its m, n, k one block's) becomes a row of its own with its
// transpose pair and block count, which times such an op; the peak and the efficiency curve stay those of
// single products.
TEST(ProfilerFit, AWholeBlockedGemmProbeBecomesARowOfItsOwn) {
  const Truth T;
  FitInput in = synthetic_input(T, 2);
  const Profile products = fit_profile(in).profile;
  std::mt19937 rng(13);
  const double block_flops = 2.0 * 32 * 256 * 128;
  const double whole_us =
      0.8 * 8 * (T.launch_us + block_flops / (T.gflops * 1e3));  // faster than 8 lone ones
  for (auto& rank : in.ranks)
    rank["compute"].push_back({{"label", "gemm 32x256x128 MatMul x8 blocks"},
                               {"kind", "gemm"},
                               {"code", "MatMul"},
                               {"m", 32},
                               {"n", 256},
                               {"k", 128},
                               {"flops", 8 * block_flops},
                               {"bytes", 8 * 4.0 * (32 * 128 + 32 * 256) + 4.0 * 128 * 256},
                               {"row_blocks", 8},
                               {"samples_us", samples(whole_us, rng)}});
  const Profile p = fit_profile(in).profile;
  const GemmProfile& g = *p.gemm[static_cast<int>(DType::FP32)];
  const GemmProfile& g0 = *products.gemm[static_cast<int>(DType::FP32)];
  ASSERT_EQ(g.table.size(), g0.table.size() + 1);
  EXPECT_EQ(g.peak_tflops, g0.peak_tflops);
  ASSERT_EQ(g.efficiency.size(), g0.efficiency.size());
  for (size_t i = 0; i < g.efficiency.size(); ++i)
    EXPECT_EQ(g.efficiency[i].efficiency, g0.efficiency[i].efficiency);
  const auto row =
      std::find_if(g.table.begin(), g.table.end(), [](const GemmTiming& r) { return r.blocks > 1; });
  ASSERT_NE(row, g.table.end());
  EXPECT_EQ(std::make_tuple(row->m, row->n, row->k, row->blocks),
            std::make_tuple(int64_t(32), int64_t(256), int64_t(128), int64_t(8)));
  EXPECT_EQ(row->transpose, GemmTranspose{});
  EXPECT_NEAR(row->time_us, whole_us, 0.05 * whole_us);
  Op op;
  op.kind = OpKind::Gemm;
  op.code = OpCode::MatMul;
  op.dtype = DType::FP32;
  op.m = 8 * 32, op.n = 256, op.k = 128;
  op.flops = 8 * block_flops;
  op.in[0] = Region{0, 0, 8, 0, 32, 0, 128};
  op.out[0] = Region{1, 0, 8, 0, 32, 0, 256};
  op.attrs.row_blocks = 8;
  EXPECT_DOUBLE_EQ(CostModel(p).op_us(op, 2, 8), row->time_us);
}

TEST(ProfilerFit, TablesReproduceTheMeasuredMediansExactly) {
  const Truth T;
  const FitInput in = synthetic_input(T, 2);
  const FitResult r = fit_profile(in);
  const CostModel cm(r.profile);
  for (const auto& e : in.ranks[0]["collectives"]) {
    std::vector<double> s = e["samples_us"].get<std::vector<double>>();
    s.insert(s.end(), s.begin(), s.end());  // both ranks gave the same samples: the mean is each sample
    const double measured = timing_of(s).median_us;
    EXPECT_NEAR(cm.allreduce_us(e["bytes"].get<double>(), 2, r.profile.devices_per_node), measured, 1e-6 * measured);
  }
  for (const auto& e : in.ranks[0]["compute"]) {
    if (e["kind"] != "gemm") continue;
    std::vector<double> s = e["samples_us"].get<std::vector<double>>();
    s.insert(s.end(), s.begin(), s.end());
    const double measured = timing_of(s).median_us;
    EXPECT_NEAR(cm.gemm_us(DType::FP32, e["m"], e["n"], e["k"], e["flops"], e["bytes"]), measured, 1e-9 * measured);
  }
}

// Collectives probed after compute (entries with compute_before_us): per repeat the last rank's time, the
// shortest, is the transfer; the other rank's adds its wait for it. After a barrier alone: the mean.
TEST(ProfilerFit, ACollectiveAfterComputeIsTheLastRanksTime) {
  FitInput in = synthetic_input(Truth{}, 2);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> wait(0, 2000);
  std::vector<std::vector<double>> waited(in.ranks[0]["collectives"].size());
  for (size_t i = 0; i < waited.size(); ++i) {
    auto& a = in.ranks[0]["collectives"][i];
    auto& b = in.ranks[1]["collectives"][i];
    std::vector<double> sa = a["samples_us"].get<std::vector<double>>(), sb = sa;
    // Repeat k: rank k % 2 arrives first and waits; the other rank's time is the transfer.
    for (size_t k = 0; k < sa.size(); ++k) (k % 2 ? sb : sa)[k] += wait(rng);
    a["samples_us"] = sa, b["samples_us"] = sb;
    for (size_t k = 0; k < sa.size(); ++k) waited[i].push_back((sa[k] + sb[k]) / 2);
  }
  const Profile alone_profile = fit_profile(in).profile;
  for (auto& rank : in.ranks)
    for (auto& e : rank["collectives"]) e["compute_before_us"] = 2000.0;
  const Profile after_profile = fit_profile(in).profile;
  const CostModel alone(alone_profile), after_compute(after_profile);
  const int dpn = alone_profile.devices_per_node;
  const FitInput clean = synthetic_input(Truth{}, 2);
  for (size_t i = 0; i < waited.size(); ++i) {
    const nlohmann::json& e = clean.ranks[0]["collectives"][i];
    const double bytes = e["bytes"].get<double>();
    const double transfer = timing_of(e["samples_us"].get<std::vector<double>>()).median_us;
    EXPECT_NEAR(after_compute.allreduce_us(bytes, 2, dpn), transfer, 1e-6 * transfer) << bytes;
    const double mean = timing_of(waited[i]).median_us;
    EXPECT_NEAR(alone.allreduce_us(bytes, 2, dpn), mean, 1e-6 * mean) << bytes;
  }
}

// A disturbed probe (here a 1 KiB message timed at 20x a 1 MiB one, on both ranks) is named in the summary;
// clean measurements name none.
TEST(ProfilerFit, MessagesSlowerThanABiggerOneAreNamed) {
  FitInput in = synthetic_input(Truth{}, 2);
  EXPECT_EQ(fit_profile(in).summary.find("bigger message"), std::string::npos);
  double big_us = 0;
  for (const auto& e : in.ranks[0]["collectives"])
    if (e["bytes"].get<double>() == 1024.0 * 1024)
      big_us = timing_of(e["samples_us"].get<std::vector<double>>()).median_us;
  ASSERT_GT(big_us, 0);
  for (auto& rank : in.ranks)
    for (auto& e : rank["collectives"])
      if (e["bytes"].get<double>() == 1024.0) e["samples_us"] = std::vector<double>(9, 20 * big_us);
  const std::string summary = fit_profile(in).summary;
  EXPECT_NE(summary.find("AllReduce: 1 of "), std::string::npos) << summary;
  EXPECT_NE(summary.find("1024 B took"), std::string::npos) << summary;
}

// Attention probes of one opcode whose FLOPs and bytes vary apart (sequence slices keep their probabilities'
// rows whole): launch + FLOPs / rate + bytes / bandwidth is recovered and kept, as it times them better than
// the curve. Probes that follow a curve over FLOPs (time growing as its square root, whatever the bytes) keep
// the curve alone.
TEST(ProfilerFit, AttentionOpcodeGetsItsOwnRatesWhereTheyTimeItsProbesBetter) {
  const double launch = 40, gflops = 30, gbps = 8;
  std::mt19937 rng(11);
  const auto with_probes = [&](const char* code, const std::vector<double>& flops_list, const auto& time_of) {
    FitInput in = synthetic_input(Truth{}, 2);
    for (auto& rank : in.ranks)
      for (double flops : flops_list)
        for (double bytes : {5e5, 2e6, 8e6})
          rank["compute"].push_back({{"label", "attention"},
                                     {"kind", "attention"},
                                     {"code", code},
                                     {"m", 1},
                                     {"n", 1},
                                     {"k", 0},
                                     {"flops", flops},
                                     {"bytes", bytes},
                                     {"samples_us", samples(time_of(flops, bytes), rng)}});
    return fit_profile(in);
  };
  const FitResult fwd = with_probes("AttnFwd", {2e6, 8e6, 3e7, 1e8}, [&](double flops, double bytes) {
    return launch + flops / (gflops * 1e3) + bytes / (gbps * 1e3);
  });
  const auto& own = fwd.profile.attention.per_code;
  ASSERT_EQ(own.count("AttnFwd"), 1u) << fwd.summary;
  EXPECT_EQ(own.size(), 1u);
  EXPECT_NEAR(own.at("AttnFwd").gflops, gflops, 0.05 * gflops);
  EXPECT_NEAR(own.at("AttnFwd").bandwidth_gbps, gbps, 0.05 * gbps);
  EXPECT_NEAR(own.at("AttnFwd").launch_overhead_us, launch, 0.3 * launch);
  // FLOPs in bins of their own (the synthetic attention points sit at 1e7, 1e8 and 1e9).
  const FitResult bwd = with_probes("AttnBwd", {2e6, 5e6, 2e7, 5e7},
                                    [](double flops, double) { return 2000 * std::sqrt(flops / 1e6); });
  EXPECT_TRUE(bwd.profile.attention.per_code.empty()) << bwd.summary;
  EXPECT_NE(bwd.summary.find("AttnBwd"), std::string::npos);  // tried and reported
}

// The GEMMs of the same passes after the AllReduces are the baseline where there are enough of them: here
// the GEMM's own repeats ran at 500 us, the GEMMs after the window at 1000, and beside it at 1500: +50 %.
TEST(ProfilerFit, InterferenceBaselineIsTheSamePassesGemmsAfterTheAllReduces) {
  std::mt19937 rng(7);
  FitInput in = synthetic_input(Truth{}, 2);
  for (auto& rank : in.ranks) {
    rank["interference"]["gemm_alone_us"] = samples(500, rng);
    rank["interference"]["gemm_during_us"] = samples(1500, rng);
    rank["interference"]["gemm_after_us"] = samples(1000, rng);
  }
  EXPECT_NEAR(fit_profile(in).profile.interference.compute_slowdown_during_comm, 0.5, 0.03);
  // Two GEMMs after the window are too few: the GEMM's own repeats again (1500 / 500: +200 %).
  for (auto& rank : in.ranks) rank["interference"]["gemm_after_us"] = nlohmann::json::array({1000.0});
  EXPECT_NEAR(fit_profile(in).profile.interference.compute_slowdown_during_comm, 2.0, 0.1);
}

// Where communication held the core for the whole window no GEMM ran inside it: the GEMMs across its edges
// measure compute beside communication. Each ran at a quarter of its speed for the time it spent inside
// (its excess over the baseline is three quarters of that time): the core taken is 0.75, a slowdown of 3.
// Communication that took the whole core is capped at 0.95 of it (a slowdown of 19), not an infinite one.
TEST(ProfilerFit, ComputeBesideCommunicationFromTheGemmsAcrossTheWindow) {
  FitInput in = synthetic_input(Truth{}, 2);
  const auto across = [&](double rate) {
    for (auto& rank : in.ranks) {
      rank["interference"]["gemm_during_us"] = nlohmann::json::array();
      rank["interference"]["gemm_after_us"] = nlohmann::json::array({1000.0, 1000.0, 1000.0, 1000.0});
      rank["interference"]["gemm_across_us"] = nlohmann::json::array();
      for (double inside : {200.0, 900.0, 2500.0})
        rank["interference"]["gemm_across_us"].push_back({1000 + inside * (1 - rate), inside});
    }
    return fit_profile(in);
  };
  const FitResult quarter = across(0.25);
  EXPECT_NEAR(quarter.profile.interference.compute_slowdown_during_comm, 3.0, 1e-9);
  EXPECT_NE(quarter.summary.find("across the window's edges"), std::string::npos) << quarter.summary;
  EXPECT_NEAR(across(0).profile.interference.compute_slowdown_during_comm, 19.0, 1e-9);
  EXPECT_NEAR(across(1).profile.interference.compute_slowdown_during_comm, 0.0, 1e-9);
  // A GEMM inside the window decides, as before, where there is one.
  for (auto& rank : in.ranks) rank["interference"]["gemm_during_us"] = nlohmann::json::array({1500.0});
  EXPECT_NEAR(fit_profile(in).profile.interference.compute_slowdown_during_comm, 0.5, 1e-9);
}

TEST(ProfilerFit, OneRankMeasuresNoCollective) {
  FitInput in = synthetic_input(Truth{}, 2);
  in.tp = 1;
  in.ranks.resize(1);
  in.ranks[0].erase("collectives");
  in.ranks[0].erase("interference");
  const FitResult r = fit_profile(in);
  EXPECT_EQ(r.profile.intra_node.latency_us, 0);
  EXPECT_EQ(r.profile.intra_node.bus_bandwidth_gbps, 1e6);
  EXPECT_TRUE(r.profile.intra_node.table.empty());
  EXPECT_NE(r.profile.notes.find("one rank: no collective measured"), std::string::npos);
  EXPECT_NE(r.profile.notes.find("interference not measured"), std::string::npos);
  EXPECT_EQ(r.summary.find("AllReduce ("), std::string::npos);
}

}  // namespace
}  // namespace domino::prof

namespace domino::prof {
namespace {

// domino-profile on CUDA measures each forceable algorithm on its own communicator: the ring under
// "collectives", NVLS under "collectives_by_algorithm"; each gets its own curve.
TEST(ProfilerFit, EachMeasuredAlgorithmGetsItsOwnCurve) {
  const Truth T;
  const int tp = 8;
  FitInput in = synthetic_input(T, tp);
  std::mt19937 rng(11);
  const double nvls_latency = 70, nvls_busbw = 2.5, traffic = 2.0 * (tp - 1) / tp;
  nlohmann::json nvls = nlohmann::json::array();
  for (double b = 4; b <= 64.0 * 1024 * 1024; b *= 4)
    nvls.push_back({{"bytes", b}, {"samples_us", samples(nvls_latency + b * traffic / (nvls_busbw * 1e3), rng)}});
  for (auto& rank : in.ranks) rank["collectives_by_algorithm"]["nvls"] = nvls;
  const FitResult r = fit_profile(in);
  const Profile& p = r.profile;
  EXPECT_NEAR(p.intra_node.bus_bandwidth_gbps, T.busbw_gbps, 0.05 * T.busbw_gbps);  // the ring, as before
  ASSERT_TRUE(p.intra_node.nvls.has_value());
  EXPECT_NEAR(p.intra_node.nvls->bus_bandwidth_gbps, nvls_busbw, 0.05 * nvls_busbw);
  EXPECT_LE(p.intra_node.nvls->latency_us, nvls_latency * 1.05);
  EXPECT_GT(p.intra_node.nvls->latency_us, nvls_latency * 0.8);
  EXPECT_EQ(p.intra_node.nvls->table.size(), p.intra_node.table.size());
  EXPECT_EQ(p.intra_node.nvls->min_ranks, kDefaultNvlsMinRanks);
  EXPECT_EQ(p.intra_node.nvls->sms, 0);  // NCCL does not report its channels: not stated
  EXPECT_EQ(p.metadata.spread.count("allreduce nvls"), 1u);
  EXPECT_EQ(p.metadata.spread.count("allreduce ring"), 1u);
  EXPECT_NE(r.summary.find("AllReduce nvls"), std::string::npos) << r.summary;
  // The large messages go to NVLS by the fitted curves, the smallest to the ring (its latency is lower).
  const CostModel cm(p);
  EXPECT_EQ(std::string(cm.allreduce(64.0 * 1024 * 1024, tp, p.devices_per_node).algorithm), "nvls");
  EXPECT_EQ(std::string(cm.allreduce(4, tp, p.devices_per_node).algorithm), "ring");
}

// domino-profile's AllGather and ReduceScatter probes: entries under the kind's key with their op kind, bytes
// of the gathered buffer; each kind gets its own curves (time = latency + bytes (n-1)/n / busbw), the
// AllReduce's stay what they were without them, and the tables reproduce the measured medians.
TEST(ProfilerFit, AllGatherAndReduceScatterSamplesGetTheirOwnCurves) {
  const Truth T;
  const int tp = 4;
  const FitInput plain = synthetic_input(T, tp);
  FitInput in = plain;
  std::mt19937 rng(13);
  struct Kind {
    const char* name;
    double latency_us, busbw_gbps;
  };
  const Kind kinds[] = {{"allgather", 30, 0.8}, {"reducescatter", 40, 0.6}};
  const double traffic = double(tp - 1) / tp;
  nlohmann::json nvls = nlohmann::json::array();
  for (const Kind& k : kinds)
    for (double b = 16; b <= 64.0 * 1024 * 1024; b *= 4) {
      const double t = k.latency_us + b * traffic / (k.busbw_gbps * 1e3);
      nlohmann::json e = {{"kind", k.name}, {"bytes", b}, {"samples_us", samples(t, rng)}};
      for (auto& rank : in.ranks) rank[k.name].push_back(e);
      if (std::string(k.name) == "allgather")
        nvls.push_back({{"kind", k.name}, {"bytes", b}, {"samples_us", samples(2 * k.latency_us + b * traffic / 2e3, rng)}});
    }
  for (auto& rank : in.ranks) rank["allgather_by_algorithm"]["nvls"] = nvls;  // AllGather only
  const Profile p = fit_profile(in).profile;
  const Profile without = fit_profile(plain).profile;
  EXPECT_EQ(p.intra_node.latency_us, without.intra_node.latency_us);
  EXPECT_EQ(p.intra_node.bus_bandwidth_gbps, without.intra_node.bus_bandwidth_gbps);
  EXPECT_FALSE(p.intra_node.nvls);  // NVLS was measured for the AllGather only
  EXPECT_FALSE(without.intra_node.allgather);
  EXPECT_FALSE(CostModel(without).has_sp_collectives());

  ASSERT_TRUE(p.intra_node.allgather && p.intra_node.reduce_scatter);
  const std::pair<const AlgorithmCurves&, const Kind&> fitted[] = {{*p.intra_node.allgather, kinds[0]},
                                                                  {*p.intra_node.reduce_scatter, kinds[1]}};
  for (const auto& [curves, k] : fitted) {
    SCOPED_TRACE(k.name);
    EXPECT_NEAR(curves.ring.bus_bandwidth_gbps, k.busbw_gbps, 0.05 * k.busbw_gbps);
    EXPECT_LE(curves.ring.latency_us, k.latency_us * 1.05);
    EXPECT_GT(curves.ring.latency_us, k.latency_us * 0.8);
    EXPECT_EQ(p.metadata.spread.count(std::string(k.name) + (curves.nvls ? " ring" : "")), 1u);
  }
  ASSERT_TRUE(p.intra_node.allgather->nvls);
  EXPECT_NEAR(p.intra_node.allgather->nvls->bus_bandwidth_gbps, 2.0, 0.1);
  EXPECT_FALSE(p.intra_node.reduce_scatter->nvls);

  const CostModel cm(p);
  EXPECT_TRUE(cm.has_sp_collectives());
  for (const auto& e : in.ranks[0]["reducescatter"]) {
    std::vector<double> s = e["samples_us"].get<std::vector<double>>();
    s.insert(s.end(), s.begin(), s.end());  // both ranks gave the same samples: the mean is each sample
    const double measured = timing_of(s).median_us;
    const double bytes = e["bytes"].get<double>();
    EXPECT_NEAR(cm.collective_cost(OpKind::ReduceScatter, bytes, tp, p.devices_per_node).us, measured, 1e-6 * measured);
  }
  // And the profile carries them through a save and a load.
  const Profile again = load_profile_string(profile_to_yaml(p), "again.yaml");
  EXPECT_EQ(profile_to_yaml(again), profile_to_yaml(p));
  EXPECT_EQ(again.intra_node.allgather->nvls->table.size(), p.intra_node.allgather->nvls->table.size());
}

}  // namespace
}  // namespace domino::prof
