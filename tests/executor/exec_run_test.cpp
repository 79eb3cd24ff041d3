// exec_run_test.cpp: domino-exec end to end on tiny models: 2- and 4-rank runs whose measured trace has
// exactly the simulator's op ids on every rank, a falling loss and a summary; plan files (naming their
// model, refused for another TP degree unless --force); env mode as torchrun starts it; tensor dumps;
// bad input; and, where root and iproute2 allow, the emulated link.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include "exec_test_util.hpp"
#include "executor/runtime/link_emulation.hpp"
#include "executor/runtime/tensor_dump.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {
namespace {

using namespace exectest;
namespace fs = std::filesystem;

TEST(ExecRun, TwoRanksTraceHasTheSimulatorsOpIdsAndLossFalls) {
  TempDir dir;
  const Outcome o = run({model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "4", "--warmup", "2",
                         "--lr", "3e-3", "--trace", dir / "t.json", "--json", dir / "s.json"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const ModelSpec m = tiny("tiny-gpt", 2);
  expect_trace_of(dir / "t.json", build_schedule(m, make_strategy_plan("domino-ds", m)), 2);
  const nlohmann::json s = read_json(dir / "s.json");
  EXPECT_EQ(s["iteration_time_us"]["samples"].size(), 4u);
  EXPECT_GT(s["iteration_time_us"]["median"].get<double>(), 0);
  EXPECT_LE(s["iteration_time_us"]["p10"].get<double>(), s["iteration_time_us"]["p90"].get<double>());
  EXPECT_EQ(s["peak_memory_bytes"].size(), 2u);
  EXPECT_GT(s["peak_memory_bytes"][1].get<int64_t>(), 0);
  ASSERT_EQ(s["huge_page_bytes"].size(), 2u);  // what of each rank's buffers the kernel holds on huge pages
  for (int r : {0, 1}) {
    EXPECT_GE(s["huge_page_bytes"][r].get<int64_t>(), 0) << "/proc/self/smaps unread on rank " << r;
    EXPECT_LE(s["huge_page_bytes"][r].get<int64_t>(), s["peak_memory_bytes"][r].get<int64_t>());
  }
  const auto& loss = s["loss"];
  ASSERT_EQ(loss.size(), 6u);
  EXPECT_LT(loss[5].get<double>(), loss[0].get<double>() - 0.3) << loss.dump();
  EXPECT_NE(o.output.find("iter   5"), std::string::npos) << o.output;  // rank 0 prints every iteration
}

// Four ranks run on machines with fewer cores too: this checks the op ids, not the times (--no-preflight).
TEST(ExecRun, FourRanksLlama) {
  TempDir dir;
  // domino-ds refuses Llama models (DeepSpeed's Domino has no RMSNorm, SwiGLU, GQA or rotary): the same
  // slicing in the deep order.
  const Outcome o = run({model_file("tiny-llama"), "--strategy", "domino-deep", "--tp", "4", "--iters", "2",
                         "--warmup", "1", "--trace", dir / "t.json", "--no-preflight"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const ModelSpec m = tiny("tiny-llama", 4);
  expect_trace_of(dir / "t.json", build_schedule(m, make_strategy_plan("domino-deep", m)), 4);
}

TEST(ExecRun, PlanFileNamesItsModelAndTp) {
  TempDir dir;
  ModelOverrides small;
  small.seq_len = 16;
  small.micro_batch = 2;
  const ModelSpec m = load_model("cpu-gpt", small);
  BlockPlan b{SplitDim::Sequence, 2, 2, OverlapMode::Inter, true};
  save_plan(make_uniform_plan(m, b, b, "custom"), dir / "plan.yaml");
  const Outcome o = run({dir / "plan.yaml", "--seq-len", "16", "--micro-batch", "2", "--iters", "1", "--warmup", "0",
                         "--trace", dir / "t.json"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  expect_trace_of(dir / "t.json", build_schedule(m, make_uniform_plan(m, b, b, "custom")), m.tp);
}

TEST(ExecRun, PlanForAnotherTpIsRefusedUnlessForced) {
  TempDir dir;
  const ModelSpec m = tiny("tiny-gpt", 2);
  save_plan(make_strategy_plan("domino-ds", m), dir / "plan.yaml");
  const Outcome refused = run({dir / "plan.yaml", "--model", model_file("tiny-gpt"), "--tp", "4"}, dir / "log1");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--force"), std::string::npos) << refused.output;
  const Outcome forced = run({dir / "plan.yaml", "--model", model_file("tiny-gpt"), "--tp", "4", "--force",
                              "--iters", "1", "--warmup", "0", "--no-preflight"},
                             dir / "log2");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
}

TEST(ExecRun, BadInputIsExitTwoWithAMessage) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{model_file("tiny-gpt"), "--strategy", "domino-dss"}, "domino-ds"},
      {{model_file("tiny-llama"), "--strategy", "domino-ds"}, "RMSNorm"},
      {{model_file("tiny-gpt"), "--strategy", "domino-ds", "--ranks", "3"}, "--ranks"},
      {{dir / "missing-plan.yaml"}, "missing-plan.yaml"},
      {{model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "0"}, "--iters"},
      {{model_file("tiny-gpt"), "--strategy", "domino-ds", "--emulate-sms", "0"}, "--emulate-sms"},
      {{model_file("tiny-gpt"), "--strategy", "domino-ds", "--emulate-busbw", "-3"}, "--emulate-busbw"},
      {{model_file("tiny-gpt"), "--strategy", "domino-ds", "--nan-check", "--no-nan-check"}, "contradict"},
      {{model_file("tiny-gpt"), "--strategy", "domino-ds", "--weight-decay", "-0.1"}, "--weight-decay"},
  };
  for (const auto& [args, needle] : cases) {
    const Outcome o = run(args, dir / "log");
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_NE(o.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << o.output;
  }
}

TEST(ExecRun, ThreadsFlagReachesEigen) {
  // Built with OpenMP (not in sanitizer builds), --threads gives each rank's GEMMs that many threads;
  // without OpenMP the run says the flag has no effect rather than ignoring it silently.
  TempDir dir;
  const Outcome o = run({model_file("tiny-gpt"), "--strategy", "megatron-sync", "--threads", "2", "--iters", "1",
                         "--warmup", "0", "--json", dir / "s.json"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const bool warned = o.output.find("--threads 2 has no effect") != std::string::npos;
#ifdef _OPENMP
  EXPECT_FALSE(warned) << o.output;
#else
  EXPECT_TRUE(warned) << o.output;
#endif
}

// Without the CUDA backend built this is bad usage (exit 2); with it but no usable device, a runtime
// failure (exit 1). Either way the job stops with a message naming CUDA, never a hang or a crash.
TEST(ExecRun, CudaBackendWithoutDeviceFailsWithAMessage) {
  if (fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0"))
    GTEST_SKIP() << "an NVIDIA device is present: this checks the message on machines without one";
  TempDir dir;
  const Outcome o = run({model_file("tiny-gpt"), "--strategy", "domino-ds", "--backend", "cuda"}, dir / "log");
  EXPECT_TRUE(o.exit_code == 1 || o.exit_code == 2) << o.output;
  EXPECT_NE(o.output.find("CUDA"), std::string::npos) << o.output;
}

TEST(ExecRun, EnvModeAsTorchrunStartsIt) {
  TempDir dir;
  run_env_mode_ranks({model_file("tiny-gpt"), "--strategy", "megatron-sync", "--iters", "2", "--warmup", "0", "--json",
                      dir / "s.json"},
                     dir);
  ASSERT_TRUE(fs::exists(dir / "s.json"));
  EXPECT_EQ(read_json(dir / "s.json")["peak_memory_bytes"].size(), 2u);
}

TEST(ExecRun, DumpTensorsWritesEveryRanksOutputs) {
  TempDir dir;
  const Outcome o = run({model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "1", "--warmup", "1",
                         "--dump-tensors", dir / "dump", "--dump-iter", "1"},
                        dir / "log");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  const ModelSpec m = tiny("tiny-gpt", 2);
  const Schedule s = build_schedule(m, make_strategy_plan("domino-ds", m));
  for (int r = 0; r < 2; ++r) {
    const std::string rank_dir = dir / ("dump/rank" + std::to_string(r));
    EXPECT_TRUE(fs::exists(rank_dir + "/" + op_id(s.ops.front()) + ".out0.npy")) << rank_dir;
    EXPECT_TRUE(fs::exists(rank_dir + "/" + op_id(s.ops.back()) + ".out0.npy")) << rank_dir;
    for (const BufferDesc& b : s.buffers) {
      if (b.role != BufferRole::Param) continue;
      EXPECT_TRUE(fs::exists(rank_dir + "/" + b.name + ".npy")) << b.name;
    }
  }
}

// The vocab-parallel layout docs/tensor-dumps.md describes: each rank dumps its vocabulary shard of the
// token embedding, the head and the logits; in rank order they are the tp 1 run's tensors; the lookups of
// the ranks sum to the all-reduced embedding; the per-token max after its AllReduce is the whole row's.
TEST(ExecRun, DumpedVocabShardsAssembleTheSingleRankTensors) {
  TempDir dir;
  for (const char* tp : {"1", "2"}) {
    const Outcome o = run({model_file("tiny-gpt"), "--strategy", "megatron-sync", "--tp", tp, "--iters", "1",
                           "--warmup", "0", "--dump-tensors", dir / ("tp" + std::string(tp))},
                          dir / "log");
    ASSERT_EQ(o.exit_code, 0) << o.output;
  }
  const ModelSpec m = tiny("tiny-gpt", 2);
  const int64_t n = m.vocab_per_rank(), h = m.hidden, rows = m.tokens();
  const auto load = [&](const std::string& tp_dir, int rank, const std::string& file, std::vector<int64_t> shape) {
    std::vector<int64_t> got;
    const std::vector<float> v = read_npy(dir / (tp_dir + "/rank" + std::to_string(rank) + "/" + file), &got);
    EXPECT_EQ(got, shape) << file;
    return v;
  };
  const std::vector<float> table = load("tp1", 0, "emb.tok.npy", {m.vocab, h});
  const std::vector<float> head = load("tp1", 0, "head.w.npy", {h, m.vocab});
  const std::vector<float> logits = load("tp1", 0, "head.fwd.logits.out0.npy", {m.micro_batch, m.seq_len, m.vocab});
  const std::vector<float> max1 = load("tp1", 0, "head.fwd.loss.max.ar.out0.npy", {m.micro_batch, m.seq_len, 1});
  const std::vector<float> x0 = load("tp2", 0, "emb.fwd.ar.out0.npy", {m.micro_batch, m.seq_len, h});
  std::vector<float> lookup_sum(x0.size(), 0.0f);
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> t = load("tp2", r, "emb.tok.npy", {n, h});
    const std::vector<float> w = load("tp2", r, "head.w.npy", {h, n});
    const std::vector<float> l = load("tp2", r, "head.fwd.logits.out0.npy", {m.micro_batch, m.seq_len, n});
    for (int64_t i = 0; i < n * h; ++i) ASSERT_EQ(t[size_t(i)], table[size_t(r * n * h + i)]) << "emb.tok rank " << r;
    for (int64_t i = 0; i < h; ++i)
      for (int64_t c = 0; c < n; ++c) ASSERT_EQ(w[size_t(i * n + c)], head[size_t(i * m.vocab + r * n + c)]);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < n; ++c)
        ASSERT_NEAR(l[size_t(i * n + c)], logits[size_t(i * m.vocab + r * n + c)], 1e-4) << "logits rank " << r;
    const std::vector<float> part = load("tp2", r, "emb.fwd.out0.npy", {m.micro_batch, m.seq_len, h});
    for (size_t i = 0; i < part.size(); ++i) lookup_sum[i] += part[i];
    const std::vector<float> mx = load("tp2", r, "head.fwd.loss.max.ar.out0.npy", {m.micro_batch, m.seq_len, 1});
    for (int64_t i = 0; i < rows; ++i) ASSERT_NEAR(mx[size_t(i)], max1[size_t(i)], 1e-4) << "max rank " << r;
  }
  for (size_t i = 0; i < x0.size(); ++i) ASSERT_EQ(lookup_sum[i], x0[i]) << "the sum of the shards' lookups";
}

TEST(ExecRun, EmulatedLinkRunsAndCleansUp) {
  std::string why;
  if (!LinkEmulation::available(&why)) GTEST_SKIP() << "link emulation unavailable: " << why;
  TempDir dir;
  const Proc p = start({model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "2", "--warmup", "1",
                        "--link-gbps", "1", "--json", dir / "s.json"},
                       dir / "log");
  const Outcome o = finish(p, 120);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(read_json(dir / "s.json")["link_gbps"].get<double>(), 1.0);
  // No namespace of that launcher is left.
  const std::string prefix = "dmn" + std::to_string(p.pid) + "-";
  if (fs::exists("/run/netns")) {
    for (const auto& e : fs::directory_iterator("/run/netns")) {
      EXPECT_NE(e.path().filename().string().rfind(prefix, 0), 0u) << e.path();
    }
  }
}

}  // namespace
}  // namespace domino
