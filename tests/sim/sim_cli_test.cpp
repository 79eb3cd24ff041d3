// sim_cli_test.cpp: domino-sim end to end: the JSON figures with their stable keys, a trace file, and exit
// code 2 with a clear message for bad usage, unknown names and malformed profiles.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "sim/model/model_spec.hpp"
#include "sim/model/plan.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path kBin = fs::path(DOMINO_BIN_DIR) / "domino-sim";

struct CliResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

CliResult run_sim(const std::string& args) {
  CliResult r;
  const std::string cmd = "cd " + std::string(DOMINO_SOURCE_DIR) + " && " + kBin.string() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class DominoSimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kBin)) GTEST_SKIP() << kBin << " not built";
  }
};

TEST_F(DominoSimCli, JsonHasStableKeysAndConsistentFigures) {
  const fs::path json_path = fs::temp_directory_path() / "domino_sim_cli.json";
  const fs::path trace_path = fs::temp_directory_path() / "domino_sim_cli_trace.json";
  const CliResult r = run_sim("gpt3-2.7b --strategy domino-ds --tp 8 --seq-len 512 --micro-batch 4 --profile dgx-h100 --json " +
                    json_path.string() + " --trace " + trace_path.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("overlap fraction"), std::string::npos);
  std::ifstream in(json_path);
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const char* key : {"iteration_time_us", "compute_us", "comm_us", "exposed_comm_us", "overlap_fraction",
                          "peak_memory_bytes", "strategies"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  const auto& s = j.at("strategies");
  for (const char* name : {"megatron-sync", "megatron-async", "domino-ds", "domino-deep", "no-comm"}) {
    ASSERT_TRUE(s.contains(name)) << name;
    for (const char* key : {"iteration_time_us", "exposed_comm_us", "speedup_vs_megatron_sync"}) {
      EXPECT_TRUE(s.at(name).contains(key)) << name << " " << key;
    }
  }
  EXPECT_DOUBLE_EQ(s.at("domino-ds").at("iteration_time_us").get<double>(), j.at("iteration_time_us").get<double>());
  EXPECT_DOUBLE_EQ(s.at("megatron-sync").at("speedup_vs_megatron_sync").get<double>(), 1.0);
  EXPECT_GE(s.at("no-comm").at("speedup_vs_megatron_sync").get<double>(),
            s.at("domino-ds").at("speedup_vs_megatron_sync").get<double>());
  std::ifstream tin(trace_path);
  const nlohmann::json trace = nlohmann::json::parse(tin);
  EXPECT_EQ(trace.at("domino").at("profile"), "dgx-h100");
  EXPECT_DOUBLE_EQ(trace.at("domino").at("iteration_time_us").get<double>(), j.at("iteration_time_us").get<double>());
  fs::remove(json_path);
  fs::remove(trace_path);
}

// Where the profile lists algorithms, the report says which one the AllReduces took: on a DGX-H100 at TP 8
// GPT-3 13B's messages (tens of MB) go to NVLS, at TP 4 NVLS is not eligible; a single-curve profile
// (cpu-dev) has nothing to tell.
TEST_F(DominoSimCli, ReportNamesTheAllReduceAlgorithm) {
  const CliResult tp8 = run_sim("gpt3-13b --strategy megatron-sync --profile dgx-h100");
  ASSERT_EQ(tp8.code, 0) << tp8.output;
  EXPECT_NE(tp8.output.find("allreduce algorithms   nvls x "), std::string::npos) << tp8.output;
  const CliResult tp4 = run_sim("gpt3-13b --strategy megatron-sync --profile dgx-h100 --tp 4");
  ASSERT_EQ(tp4.code, 0) << tp4.output;
  EXPECT_NE(tp4.output.find("allreduce algorithms   ring x "), std::string::npos) << tp4.output;
  EXPECT_EQ(tp4.output.find("nvls"), std::string::npos) << tp4.output;
  // An emulated run (one GPU moving a ring's bytes) is predicted with ring only, whatever NVLS would do.
  const CliResult emulated = run_sim("gpt3-13b --strategy megatron-sync --profile dgx-h100 --emulate-tp 8");
  ASSERT_EQ(emulated.code, 0) << emulated.output;
  EXPECT_NE(emulated.output.find("allreduce algorithms   ring x "), std::string::npos) << emulated.output;
  EXPECT_EQ(emulated.output.find("nvls"), std::string::npos) << emulated.output;
  const CliResult cpu = run_sim("cpu-gpt --strategy megatron-sync --profile cpu-dev");
  ASSERT_EQ(cpu.code, 0) << cpu.output;
  EXPECT_EQ(cpu.output.find("allreduce algorithms"), std::string::npos) << cpu.output;
}

// ZeRO-1 over 4 data-parallel ranks: the memory drops by 12 x 3/4 bytes per parameter the rank holds.
TEST_F(DominoSimCli, ZeroOneShardsTheOptimizerStateInTheMemoryFigure) {
  const fs::path plain = fs::temp_directory_path() / "domino_sim_cli_dp1.json";
  const fs::path zero = fs::temp_directory_path() / "domino_sim_cli_zero.json";
  const std::string common = "gpt3-2.7b --strategy megatron-sync --tp 8 --profile dgx-h100 --json ";
  ASSERT_EQ(run_sim(common + plain.string()).code, 0);
  const CliResult r = run_sim(common + zero.string() + " --dp 4 --zero 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("excludes the data-parallel gradient reduction"), std::string::npos) << r.output;
  const nlohmann::json a = nlohmann::json::parse(std::ifstream(plain)), b = nlohmann::json::parse(std::ifstream(zero));
  domino::ModelOverrides tp8;
  tp8.tp = 8;
  const domino::ModelSpec model = domino::load_model(std::string(DOMINO_SOURCE_DIR) + "/configs/models/gpt3-2.7b.yaml", tp8);
  const double params = double(domino::derive_facts(model).params_per_rank);
  EXPECT_NEAR(a["peak_memory_bytes"].get<double>() - b["peak_memory_bytes"].get<double>(), params * 12 * 3 / 4, 4);
  EXPECT_EQ(b["training"]["dp"].get<int>(), 4);
  EXPECT_EQ(b["training"]["zero"].get<int>(), 1);
  EXPECT_EQ(a["training"]["recompute"], "none");
  EXPECT_GT(a["tokens_per_s_per_gpu"].get<double>(), 0);
  EXPECT_GT(a["mfu"].get<double>(), 0);
  fs::remove(plain);
  fs::remove(zero);
}

// A plan's recompute holds unless --recompute is given, which then wins; the figures, the JSON and the trace
// (op ids in the phase rc) follow the mode that ran.
TEST_F(DominoSimCli, RecomputeOfAPlanFileAndTheFlag) {
  domino::ModelOverrides tp8;
  tp8.tp = 8;
  domino::ModelSpec model = domino::load_model(std::string(DOMINO_SOURCE_DIR) + "/configs/models/gpt3-2.7b.yaml", tp8);
  model.training.recompute = domino::Recompute::Selective;
  const fs::path dir = fs::temp_directory_path();
  const fs::path plan = dir / "domino_sim_cli_rc_plan.yaml", kept = dir / "domino_sim_cli_rc_kept.json",
                 flag = dir / "domino_sim_cli_rc_flag.json", trace = dir / "domino_sim_cli_rc_trace.json";
  domino::save_plan(domino::make_strategy_plan("domino-deep", model), plan.string());
  const std::string common = "gpt3-2.7b --tp 8 --profile dgx-h100 --plan " + plan.string() + " --json ";
  const CliResult a = run_sim(common + kept.string() + " --trace " + trace.string());
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("recompute selective"), std::string::npos) << a.output;
  const CliResult b = run_sim(common + flag.string() + " --recompute none");
  ASSERT_EQ(b.code, 0) << b.output;
  const nlohmann::json ja = nlohmann::json::parse(std::ifstream(kept)), jb = nlohmann::json::parse(std::ifstream(flag));
  EXPECT_EQ(ja["training"]["recompute"], "selective");
  EXPECT_EQ(jb["training"]["recompute"], "none");
  EXPECT_LT(ja["peak_memory_bytes"].get<double>(), jb["peak_memory_bytes"].get<double>());
  std::ifstream t(trace);
  const std::string text((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"L31.rc.attn.core.s1\""), std::string::npos);
  for (const fs::path& p : {plan, kept, flag, trace}) fs::remove(p);
}

TEST_F(DominoSimCli, SummaryNeedsNoPlan) {
  const CliResult r = run_sim("--summary");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu-gpt"), std::string::npos);
}

TEST_F(DominoSimCli, BadUsageExitsTwoWithAMessage) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"", "give --plan PLAN or --strategy NAME"},
      {"--strategy domino-dss", "did you mean 'domino-ds'?"},
      {"--strategy domino-ds --profile dgx-h10", "did you mean 'dgx-h100'?"},
      {"--strategy domino-ds --plan p.yaml", "excludes"},
      {"--strategy domino-ds --tp 0", "--tp"},
      {"no-such-model --strategy domino-ds", "unknown model 'no-such-model'"},
      {"llama2-7b --strategy domino-ds --profile dgx-h100", "which has RMSNorm"},
      {"gpt3-6.7b --strategy megatron-sync --profile dgx-h100 --tp 16", "inter_node"},
      {"--strategy domino-ds --dp 0", "--dp 0"},
      {"--strategy domino-ds --zero 3", "--zero 3"},
      {"--strategy domino-ds --recompute partial", "--recompute partial: expected none, selective or full"},
      {"--strategy domino-ds --recompute auto", "--recompute auto: only domino-tune chooses the mode"},
      {"--strategy megatron-sp --tp 2 --recompute full", "recompute: full is not built with sequence parallelism"},
      {"--strategy no-comm --profile tests/data/profiles/bad/unknown_key.yaml",
       "unknown_key.yaml:5:5: profile gemm.bf16: unknown key 'peak_tflop'"},
  };
  for (const auto& c : cases) {
    const CliResult r = run_sim(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("domino-sim: error: "), std::string::npos) << r.output;
  }
}

TEST_F(DominoSimCli, AStrategyTheModelCannotRunIsReportedNotFatal) {
  const CliResult r = run_sim("gpt3-2.7b --strategy megatron-sync --micro-batch 3 --profile dgx-h100");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("domino-ds        n/a"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("domino-deep      n/a"), std::string::npos) << r.output;
}

}  // namespace
