// exec_preflight_test.cpp: domino-exec refuses a job its host cannot hold before any rank starts
// (executor/job/preflight.hpp): the judgement on given facts (memory per pool, ranks against CPUs, threads
// only warned about), the CPU backend's footprint against what its prepare() really allocates, and end to
// end: GPT-3 13B at TP 8 on the CPU backend and two ranks on one CPU fail with exit 2 and the numbers,
// having started no rank and written nothing, and so does a --plans set whose plans together are too big for
// a rank; --no-preflight skips the check; env mode checks its own host.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "exec_test_util.hpp"
#include "executor/cpu/cpu_backend.hpp"
#include "executor/job/preflight.hpp"
#include "executor/runtime/cpu_placement.hpp"

namespace domino {
namespace {

using namespace exectest;
namespace fs = std::filesystem;

constexpr int64_t kGiB = int64_t(1) << 30;

PreflightFacts facts(int64_t per_rank, int64_t available, int ranks, int cpus, int threads = 1) {
  PreflightFacts f;
  f.footprint.bytes_per_rank = per_rank;
  f.footprint.busy_threads_per_rank = threads;
  MemoryPool pool{"this machine", "available (MemAvailable)", available, {}};
  for (int r = 0; r < ranks; ++r) pool.local_ranks.push_back(r);
  f.footprint.pools.push_back(pool);
  f.ranks_on_cores = ranks;
  f.cpus = cpus;
  f.cpus_source = "this process's affinity mask";
  return f;
}

TEST(Preflight, MemoryShortIsRefusedWithWhatIsNeededAndWhatIsThere) {
  const PreflightVerdict v = judge_preflight(facts(52 * kGiB + 3 * kGiB / 10, 11 * kGiB + kGiB / 5, 8, 64));
  ASSERT_EQ(v.refusals.size(), 1u);
  EXPECT_EQ(v.refusals[0],
            "the plan needs 8 ranks x 52.3 GiB = 418.4 GiB, this machine has 11.2 GiB available (MemAvailable)");
  EXPECT_TRUE(v.warnings.empty());
}

TEST(Preflight, EveryPoolIsCheckedForTheRanksThatUseIt) {
  PreflightFacts f = facts(10 * kGiB, 0, 0, 64);
  f.footprint.pools = {{"CUDA device 0", "free (cudaMemGetInfo)", 25 * kGiB, {0, 2}},
                       {"CUDA device 1", "free (cudaMemGetInfo)", 15 * kGiB, {1, 3}},
                       {"CUDA device 2", "free (cudaMemGetInfo)", 0, {}}};
  f.ranks_on_cores = 4;
  const PreflightVerdict v = judge_preflight(f);
  ASSERT_EQ(v.refusals.size(), 1u) << "device 0 holds its two ranks, device 2 has none";
  EXPECT_NE(v.refusals[0].find("2 ranks x 10.0 GiB = 20.0 GiB, CUDA device 1 has 15.0 GiB free"), std::string::npos)
      << v.refusals[0];
}

TEST(Preflight, FitsExactlyAndUnknownMemoryPass) {
  EXPECT_TRUE(judge_preflight(facts(kGiB, 4 * kGiB, 4, 4)).refusals.empty());
  PreflightFacts unknown = facts(1000 * kGiB, 0, 2, 4);
  unknown.footprint.pools.clear();  // the backend cannot tell what is free
  EXPECT_TRUE(judge_preflight(unknown).refusals.empty());
}

TEST(Preflight, MoreRanksThanCpusIsRefusedMoreThreadsOnlyWarned) {
  const PreflightVerdict ranks = judge_preflight(facts(kGiB, 100 * kGiB, 4, 2));
  ASSERT_EQ(ranks.refusals.size(), 1u);
  EXPECT_NE(ranks.refusals[0].find("4 ranks on 2 CPU(s) (this process's affinity mask)"), std::string::npos)
      << ranks.refusals[0];
  const PreflightVerdict threads = judge_preflight(facts(kGiB, 100 * kGiB, 2, 4, 4));
  EXPECT_TRUE(threads.refusals.empty());
  ASSERT_EQ(threads.warnings.size(), 1u);
  EXPECT_NE(threads.warnings[0].find("2 ranks x 4 threads = 8 busy threads on 4 CPU(s)"), std::string::npos)
      << threads.warnings[0];
  EXPECT_TRUE(judge_preflight(facts(kGiB, 100 * kGiB, 2, 4, 2)).warnings.empty());
}

TEST(Preflight, CheckThatTimesNothingOnlyWarnsOfSharedCores) {
  PreflightFacts f = facts(kGiB, 100 * kGiB, 4, 2);
  f.timed = false;
  const PreflightVerdict v = judge_preflight(f);
  EXPECT_TRUE(v.refusals.empty());
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_NE(v.warnings[0].find("4 ranks on 2 CPU(s)"), std::string::npos) << v.warnings[0];
  f.footprint.bytes_per_rank = 1000 * kGiB;  // memory is refused all the same
  EXPECT_EQ(judge_preflight(f).refusals.size(), 1u);
}

TEST(Preflight, HostRanksOfBothLaunches) {
  const HostRanks own = launcher_host_ranks(3);
  EXPECT_EQ(own.local_ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(own.self, -1);
  LaunchEnv torchrun{"torchrun", 5, 8, 1, 4};
  const HostRanks four = env_host_ranks(torchrun);
  EXPECT_EQ(four.local_ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(four.self, 1);
  const HostRanks alone = env_host_ranks(LaunchEnv{"torchrun", 5, 8, -1, -1});
  EXPECT_EQ(alone.local_ranks, std::vector<int>{5}) << "no local facts: the backends go by the global rank";
  EXPECT_EQ(alone.self, 5);
}

TEST(Preflight, CpuFootprintCoversWhatPrepareAllocates) {
  ModelOverrides o;
  o.tp = 2;
  const ModelSpec m = load_model(model_file("tiny-gpt"), o);
  const Schedule s = build_schedule(m, make_strategy_plan("domino-ds", m));
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  const HostFootprint f = cpu->host_footprint(s, 3, launcher_host_ranks(2));
  EXPECT_EQ(f.busy_threads_per_rank, 3);
  ASSERT_EQ(f.pools.size(), 1u);
  EXPECT_EQ(f.pools[0].local_ranks, (std::vector<int>{0, 1}));
  EXPECT_GT(f.pools[0].available_bytes, 0);
  RankContext ctx;  // one rank: prepare() needs no group
  cpu->prepare(s, ctx);
  EXPECT_GE(f.bytes_per_rank, cpu->peak_memory_bytes());
  EXPECT_GE(f.bytes_per_rank, schedule_memory_bytes(s)) << "an fp32 model: every buffer at 4 bytes";
}

// Whether this machine could hold GPT-3 13B at TP 8 on CPUs, judged as the preflight judges it (the CPU
// backend's footprint of 8 ranks against its pool; no pool: memory is not checked): the tests below need a
// job that cannot fit.
bool host_fits_gpt3_13b_tp8() {
  ModelOverrides o;
  o.tp = 8;
  const ModelSpec m = load_model("gpt3-13b", o);
  const HostFootprint f = make_cpu_backend()->host_footprint(
      build_schedule(m, make_strategy_plan("domino-ds", m)), 1, launcher_host_ranks(8));
  return f.pools.empty() || 8 * f.bytes_per_rank <= f.pools[0].available_bytes;
}

// GPT-3 13B at TP 8 on the CPU backend: the schedule's bytes alone, 8 times, exceed any test machine.
TEST(Preflight, ModelTooBigFailsFastStartingNoRank) {
  if (host_fits_gpt3_13b_tp8()) GTEST_SKIP() << "this machine has room for GPT-3 13B at TP 8 on CPUs";
  TempDir dir;
  fs::create_directory(dir / "tmp");
  const Outcome out = run({"gpt3-13b", "--strategy", "domino-ds", "--tp", "8", "--trace", dir / "t.json", "--json",
                           dir / "s.json"},
                          dir / "log", 120, {"TMPDIR=" + (dir / "tmp")});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("the plan needs 8 ranks x "), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("available (MemAvailable)"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find("--no-preflight"), std::string::npos) << out.output;
  EXPECT_TRUE(fs::is_empty(dir / "tmp")) << "a launch folder was made: ranks were started";
  EXPECT_FALSE(fs::exists(dir / "t.json"));
  EXPECT_FALSE(fs::exists(dir / "s.json"));
}

// --plans: each rank holds the buffers of every plan, so the check adds up what each plan takes on a rank.
TEST(Preflight, PlanSetTooBigIsRefusedWithEveryPlansBytesStartingNoRank) {
  if (host_fits_gpt3_13b_tp8()) GTEST_SKIP() << "this machine has room for GPT-3 13B at TP 8 on CPUs";
  ModelOverrides tp8;
  tp8.tp = 8;
  const ModelSpec m = load_model("gpt3-13b", tp8);
  const std::unique_ptr<Backend> cpu = make_cpu_backend();
  int64_t per_rank = 0;
  for (const char* strategy : {"domino-ds", "megatron-async"})
    per_rank += cpu->host_footprint(build_schedule(m, make_strategy_plan(strategy, m)), 1, launcher_host_ranks(8))
                    .bytes_per_rank;
  char needed[64];
  std::snprintf(needed, sizeof needed, "8 ranks x %.1f GiB", double(per_rank) / double(kGiB));
  TempDir dir;
  fs::create_directory(dir / "tmp");
  const Outcome out = run({"gpt3-13b", "--tp", "8", "--plans", "domino-ds", "megatron-async", "--out", dir / "out"},
                          dir / "log", 120, {"TMPDIR=" + (dir / "tmp")});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("gpt3-13b (domino-ds, megatron-async, tp 8)"), std::string::npos) << out.output;
  EXPECT_NE(out.output.find(needed), std::string::npos) << needed << " in " << out.output;
  EXPECT_TRUE(fs::is_empty(dir / "tmp")) << "a launch folder was made: ranks were started";
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// The CPUs of this process, in order (the children are pinned to some of them).
std::vector<int> own_cpus() { return affinity_cpus(); }

TEST(Preflight, TwoRanksOnOneCpuAreRefusedUnlessTold) {
  const std::vector<int> one{own_cpus().at(0)};
  TempDir dir;
  fs::create_directory(dir / "tmp");
  const std::vector<std::string> args{model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "1", "--warmup",
                                      "0", "--json", dir / "s.json"};
  const Outcome refused = finish(start(args, dir / "log1", {"TMPDIR=" + (dir / "tmp")}, one), 120);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("the plan runs 2 ranks on 1 CPU(s) (this process's affinity mask)"), std::string::npos)
      << refused.output;
  EXPECT_TRUE(fs::is_empty(dir / "tmp")) << "a launch folder was made: ranks were started";
  EXPECT_FALSE(fs::exists(dir / "s.json"));

  std::vector<std::string> skipping = args;
  skipping.push_back("--no-preflight");
  const Outcome ran = finish(start(skipping, dir / "log2", {}, one), 120);
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_TRUE(fs::exists(dir / "s.json"));
}

TEST(Preflight, ThreadsBeyondTheCpusAreAWarning) {
  const std::vector<int> cpus = own_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  TempDir dir;
  const Outcome o = finish(start({model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "1", "--warmup", "0",
                                  "--threads", "2", "--quiet"},
                                 dir / "log", {}, {cpus[0], cpus[1]}),
                           120);
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_NE(o.output.find("warning: 2 ranks x 2 threads = 4 busy threads on 2 CPU(s)"), std::string::npos) << o.output;
}

// A rank of an outside launch checks its host with the launcher's count of ranks there, before rendezvous
// (nobody listens at MASTER_PORT: a rank that got past the check would wait there until its timeout).
TEST(Preflight, EnvModeChecksItsHostBeforeRendezvous) {
  if (host_fits_gpt3_13b_tp8()) GTEST_SKIP() << "this machine has room for GPT-3 13B at TP 8 on CPUs";
  TempDir dir;
  const Outcome out = run({"gpt3-13b", "--strategy", "domino-ds", "--tp", "8", "--timeout", "60"}, dir / "log", 120,
                          {"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=8", "MASTER_ADDR=127.0.0.1",
                           "MASTER_PORT=1"});
  EXPECT_EQ(out.exit_code, 2) << out.output;
  EXPECT_NE(out.output.find("the plan needs 8 ranks x "), std::string::npos) << out.output;
}

}  // namespace
}  // namespace domino
