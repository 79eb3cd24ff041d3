// exec_placement_test.cpp: where domino-exec puts a rank's threads (--cpu-placement) and how its workers wait
// (--worker-wait): the names and their refusals, the choice of one core per rank from a given affinity mask
// (round robin only where sharing is allowed, refused where a placement was asked for and the mask is too
// small), and end to end: every placement and wait gives bit for bit the tensors (weights, every op output,
// gradients included) of the unplaced, blocking run, and so does --realtime where the process may use it
// (with the sequence-parallel collectives too, each rank's threads on one core); a placement the mask cannot
// hold stops before any rank. And the flags that would change nothing (another backend's, a shape of 0, a
// link rate that is not a number) are refused.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <vector>

#include "exec_test_util.hpp"
#include "executor/job/backends.hpp"
#include "executor/job/exec_options.hpp"
#include "executor/runtime/cpu_placement.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

using namespace exectest;
namespace fs = std::filesystem;

TEST(CpuPlacement, NamesRoundTripAndUnknownNamesAreRefused) {
  for (CpuPlacement p : {CpuPlacement::None, CpuPlacement::Rank, CpuPlacement::Compute})
    EXPECT_EQ(parse_placement(placement_name(p)), p);
  for (WorkerWait w : {WorkerWait::Block, WorkerWait::Spin}) EXPECT_EQ(parse_wait(wait_name(w)), w);
  EXPECT_THROW(parse_placement("core"), Error);
  EXPECT_THROW(parse_placement(""), Error);
  EXPECT_THROW(parse_wait("poll"), Error);
}

TEST(CpuPlacement, EachRankGetsItsOwnCpuOfTheMask) {
  const std::vector<int> mask{3, 5};
  const RankCores r0 = place_rank({CpuPlacement::Rank, true, false}, mask, 0, 2);
  const RankCores r1 = place_rank({CpuPlacement::Rank, true, false}, mask, 1, 2);
  EXPECT_EQ(r0.process_cpu, 3);
  EXPECT_EQ(r0.compute_cpu, 3);
  EXPECT_EQ(r1.process_cpu, 5);
  EXPECT_EQ(r1.compute_cpu, 5);
  // compute: only the compute worker is pinned; the rest of the process keeps the mask.
  const RankCores c1 = place_rank({CpuPlacement::Compute, true, false}, mask, 1, 2);
  EXPECT_EQ(c1.process_cpu, -1);
  EXPECT_EQ(c1.compute_cpu, 5);
  const RankCores none = place_rank({CpuPlacement::None, true, false}, mask, 1, 2);
  EXPECT_EQ(none.process_cpu, -1);
  EXPECT_EQ(none.compute_cpu, -1);
  // A single rank on a single-core mask is placed on that core.
  EXPECT_EQ(place_rank({CpuPlacement::Rank, true, false}, {7}, 0, 1).process_cpu, 7);
}

TEST(CpuPlacement, MaskWithFewerCpusThanRanks) {
  const std::vector<int> one{4};
  // Asked for: refused, naming what is missing.
  try {
    place_rank({CpuPlacement::Rank, true, false}, one, 0, 2);
    FAIL() << "a placement the mask cannot hold was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("2 ranks, 1 CPU(s)"), std::string::npos) << e.what();
  }
  // The default placement: nothing pinned rather than two ranks stacked on one core.
  EXPECT_EQ(place_rank({CpuPlacement::Rank, false, false}, one, 1, 2).process_cpu, -1);
  // --check (numbers only): the ranks share the cores round robin.
  EXPECT_EQ(place_rank({CpuPlacement::Compute, false, true}, {1, 2}, 2, 3).compute_cpu, 1);
  // An unreadable (empty) mask pins nothing.
  EXPECT_EQ(place_rank({CpuPlacement::Rank, true, false}, {}, 0, 2).process_cpu, -1);
}

ExecOptions parsed(std::vector<std::string> args) {
  args.insert(args.begin(), "domino-exec");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  ExecOptions o;
  EXPECT_TRUE(parse_exec_options(int(argv.size()), argv.data(), &o));
  return o;
}

TEST(CpuPlacement, CommandLine) {
  const ExecOptions given = parsed(
      {"cpu-gpt", "--strategy", "megatron-sync", "--cpu-placement", "compute", "--worker-wait", "spin"});
  EXPECT_EQ(given.run.placement, CpuPlacement::Compute);
  EXPECT_EQ(given.run.wait, WorkerWait::Spin);
  const ExecOptions unset = parsed({"cpu-gpt", "--strategy", "megatron-sync"});
  EXPECT_FALSE(unset.run.placement.has_value());
  EXPECT_EQ(unset.run.wait, kDefaultWait);
  ExecOptions o;
  const char* bad[] = {"domino-exec", "cpu-gpt", "--strategy", "megatron-sync", "--cpu-placement", "socket"};
  EXPECT_THROW(parse_exec_options(6, bad, &o), Error);
  const char* bad_wait[] = {"domino-exec",   "cpu-gpt",       "--strategy",
                            "megatron-sync", "--worker-wait", "yield"};
  EXPECT_THROW(parse_exec_options(6, bad_wait, &o), Error);
}

// What would change nothing is refused rather than ignored: a flag of a backend the run does not use, a shape
// of zero (it used to mean "not given"), a link rate that is not a number.
TEST(ExecOptions, RefusesFlagsThatWouldChangeNothing) {
  register_backend("flagged", [] { return make_backend("cpu"); });
  bool mode = false;
  const BackendFlagAdder flags = [&mode](CLI::App& app) {
    app.add_option_group(backend_flag_group("flagged"))
        ->add_flag("--flagged-mode", mode, "a flagged-backend flag");
  };
  const auto parse = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"domino-exec", "cpu-gpt", "--strategy", "megatron-sync"});
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    ExecOptions o;
    return parse_exec_options(int(argv.size()), argv.data(), &o, flags);
  };
  EXPECT_TRUE(parse({"--backend", "flagged", "--flagged-mode"}));
  EXPECT_TRUE(mode);
  EXPECT_TRUE(parse({"--tp", "2", "--seq-len", "16", "--micro-batch", "2", "--link-gbps", "2"}));
  for (const std::vector<std::string>& refused : {std::vector<std::string>{"--flagged-mode"},
                                                  {"--tp", "0"},
                                                  {"--seq-len", "0"},
                                                  {"--micro-batch", "0"},
                                                  {"--seq-len", "12abc"},
                                                  {"--link-gbps", "nan"},
                                                  {"--link-latency-us", "inf"}}) {
    try {
      parse(refused);
      ADD_FAILURE() << refused.front() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(refused.front()), std::string::npos) << e.what();
    }
  }
}

// Every file of a tensor dump (weights, inputs, every op output of the iteration: gradients included), bytes.
std::map<std::string, std::string> dump_files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_text(e.path().string());
  return out;
}

// Runs tiny-gpt's `strategy` for one warm-up and one dumped iteration in `dir`; returns the dump's files.
std::map<std::string, std::string> run_dumped(const TempDir& dir, const std::string& strategy,
                                              const std::string& placement, const std::string& wait,
                                              bool realtime) {
  const std::string out = dir / (strategy + "-" + placement + "-" + wait + (realtime ? "-rt" : ""));
  // --no-preflight: a one-core machine still runs the unplaced reference and the others are skipped.
  const Outcome o =
      run({model_file("tiny-gpt"), "--strategy", strategy, "--iters", "1", "--warmup", "1", "--cpu-placement",
           placement, "--worker-wait", wait, "--dump-tensors", out, "--dump-iter", "1", "--quiet",
           "--no-preflight", realtime ? "--realtime" : "--no-realtime"},
          dir / "log");
  EXPECT_EQ(o.exit_code, 0) << strategy << " " << placement << " " << wait << (realtime ? " --realtime" : "")
                            << ": " << o.output;
  return dump_files(out);
}

TEST(ExecPlacement, EveryPlacementAndWaitComputesTheSameTensors) {
  TempDir dir;
  const auto domino_ds = [&](const std::string& placement, const std::string& wait, bool realtime = false) {
    return run_dumped(dir, "domino-ds", placement, wait, realtime);
  };
  const auto reference = domino_ds("none", "block");
  ASSERT_GT(reference.size(), 10u);
  if (affinity_cpus().size() < 2) GTEST_SKIP() << "placing 2 ranks needs 2 CPUs in the affinity mask";
  for (const char* placement : {"none", "rank", "compute"})
    for (const char* wait : {"block", "spin"}) {
      if (std::string(placement) == "none" && std::string(wait) == "block") continue;
      EXPECT_TRUE(domino_ds(placement, wait) == reference) << placement << " " << wait;
    }
  // SCHED_FIFO needs root (or CAP_SYS_NICE).
  if (::geteuid() == 0) {
    EXPECT_TRUE(domino_ds("compute", "block", true) == reference) << "--realtime";
  }
}

// Gloo's reduce-scatter receives only into buffers set up beforehand, and its receiving thread polls until
// they are: under --realtime, with every thread of a rank on the rank's one core (the default placement), the
// set-up must not wait for a peer's data (executor/cpu/cpu_collectives.hpp). It hung in its first
// ReduceScatter until Gloo's timeout when the set-up came at the op's first run.
TEST(ExecPlacement, RealtimeRanksOnACoreEachRunTheSequenceParallelCollectives) {
  if (::geteuid() != 0) GTEST_SKIP() << "SCHED_FIFO needs root (or CAP_SYS_NICE)";
  if (affinity_cpus().size() < 2) GTEST_SKIP() << "placing 2 ranks needs 2 CPUs in the affinity mask";
  TempDir dir;
  const auto reference = run_dumped(dir, "megatron-sp", "rank", "block", false);
  ASSERT_GT(reference.size(), 10u);
  EXPECT_TRUE(run_dumped(dir, "megatron-sp", "rank", "block", true) == reference);
}

TEST(ExecPlacement, PlacementTheMaskCannotHoldStopsBeforeAnyRank) {
  const std::vector<int> mask = affinity_cpus();
  ASSERT_FALSE(mask.empty());
  TempDir dir;
  const std::vector<std::string> args{
      model_file("tiny-gpt"), "--strategy", "domino-ds",   "--iters", "1", "--warmup", "0",
      "--no-preflight",       "--json",     dir / "s.json"};
  std::vector<std::string> placed = args;
  placed.insert(placed.end(), {"--cpu-placement", "rank"});
  const Outcome refused = finish(start(placed, dir / "log1", {}, {mask[0]}), 60);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("needs a core per rank"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir / "s.json"));
  // The default placement on the same one-core mask runs, unplaced, and says so.
  const Outcome ran = finish(start(args, dir / "log2", {}, {mask[0]}), 60);
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  ASSERT_TRUE(fs::exists(dir / "s.json"));
  EXPECT_EQ(nlohmann::json::parse(read_text(dir / "s.json"))["cpu_placement"], "none");
  if (mask.size() < 2) return;
  // Where the mask holds a CPU per rank, the default pins and the summary records it.
  ASSERT_EQ(kDefaultPlacement, CpuPlacement::Rank);
  const Outcome placed_by_default = finish(start(args, dir / "log3", {}, {mask[0], mask[1]}), 60);
  EXPECT_EQ(placed_by_default.exit_code, 0) << placed_by_default.output;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir / "s.json"))["cpu_placement"], "rank");
}

}  // namespace
}  // namespace domino
