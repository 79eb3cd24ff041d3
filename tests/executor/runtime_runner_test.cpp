// runtime_runner_test.cpp: the per-rank runtime. With a recording backend whose ops take random time, every
// op starts only after its cross-stream deps finished and each stream keeps program order; a failing op
// stops the iteration with its error instead of hanging the other stream; the same with workers that spin
// before blocking, and with the compute worker pinned to a CPU (only the compute ops run pinned). With the
// CPU backend on one rank: deterministic losses that fall, NaN detection naming op and rank, and tensor
// dumps.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "executor/job/backends.hpp"
#include "executor/runtime/cpu_placement.hpp"
#include "executor/runtime/rank_runner.hpp"
#include "executor/runtime/tensor_dump.hpp"
#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;

ModelSpec tiny(const char* name, int tp) {
  ModelOverrides o;
  o.tp = tp;
  return load_model(std::string(DOMINO_TEST_DATA) + "/data/executor/" + name + ".yaml", o);
}

Schedule tiny_schedule(const char* name, int tp, const char* strategy) {
  const ModelSpec m = tiny(name, tp);
  Schedule s = build_schedule(m, make_strategy_plan(strategy, m));
  verify_schedule(s);
  return s;
}

// Checks the runtime's promises from inside the ops: deps done before an op starts, streams in order.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(int fail_at = -1) : fail_at_(fail_at) {}
  std::string name() const override { return "recording"; }
  TimingMode timing_mode() const override { return TimingMode::HostClock; }
  void prepare(const Schedule& s, const RankContext&) override {
    s_ = &s;
    done_.reset(new std::atomic<int64_t>[s.ops.size()]);
    for (size_t i = 0; i < s.ops.size(); ++i) done_[i] = 0;
  }
  std::unique_ptr<StreamDriver> make_stream_driver(Stream) override { return std::make_unique<Driver>(*this); }
  void begin_iteration(int64_t step) override { step_ = step; }
  std::vector<float> read_region(const Region& r) override { return std::vector<float>(size_t(r.elements()), 1.0f); }
  int64_t peak_memory_bytes() const override { return 0; }

  std::atomic<int> violations{0};
  std::atomic<int> ran{0};
  // The CPUs the issuing thread may run on, per stream (written by that stream's one worker).
  std::vector<int> cpus_of_stream[kNumStreams];

 private:
  class Driver final : public StreamDriver {
   public:
    explicit Driver(RecordingBackend& b) : b_(b), rng_(std::random_device{}()) {}
    void begin_iteration(SteadyClock::time_point) override { last_ = -1; }
    void wait_for(const Op& dep) override {
      if (b_.done_[size_t(dep.index)].load() != b_.step_) ++b_.violations;
    }
    void issue(const Op& op) override {
      if (op.index <= last_) ++b_.violations;  // program order within the stream
      last_ = op.index;
      for (int32_t d : op.deps)
        if (b_.done_[size_t(d)].load() != b_.step_) ++b_.violations;
      if (op.index == b_.fail_at_) throw_runtime("injected failure in " + op_id(op));
      b_.cpus_of_stream[int(op.stream)] = affinity_cpus();
      std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 50));
      b_.done_[size_t(op.index)].store(b_.step_);
      ++b_.ran;
      timings_.push_back({op.index, 0, 1});
    }
    std::vector<OpTiming> finish_iteration() override { return std::move(timings_); }

   private:
    RecordingBackend& b_;
    std::minstd_rand rng_;
    int32_t last_ = -1;
    std::vector<OpTiming> timings_;
  };

  const Schedule* s_ = nullptr;
  std::unique_ptr<std::atomic<int64_t>[]> done_;
  int64_t step_ = 0;
  int fail_at_;
};

// Runs 1 warm-up + 3 timed iterations of tiny-gpt domino-ds on the recording backend with `o`'s waits and
// pinning; expects every promise kept.
void expect_deps_and_order_kept(RunnerOptions o, RecordingBackend* backend) {
  const Schedule s = tiny_schedule("tiny-gpt", 2, "domino-ds");
  size_t comm_ops = 0, cross_deps = 0;
  for (const Op& op : s.ops) {
    comm_ops += op.stream == Stream::Comm;
    cross_deps += op.deps.size();
  }
  ASSERT_GT(comm_ops, 0u);
  ASSERT_GT(cross_deps, 0u);
  backend->prepare(s, {});
  o.warmup = 1;
  o.iters = 3;
  o.check_finite = false;
  const RankResult r = run_iterations(s, *backend, nullptr, 0, o);
  EXPECT_EQ(backend->violations.load(), 0);
  EXPECT_EQ(backend->ran.load(), int(s.ops.size()) * 4);
  ASSERT_EQ(r.iterations.size(), 4u);
  EXPECT_FALSE(r.iterations[0].timed);
  EXPECT_TRUE(r.iterations[3].timed);
  for (const auto& it : r.iterations) EXPECT_EQ(it.spans.size(), s.ops.size());
}

TEST(RankRunner, HonoursDepsAndStreamOrder) {
  RecordingBackend backend;
  expect_deps_and_order_kept({}, &backend);
}

TEST(RankRunner, SpinningWorkersHonourDepsAndStreamOrder) {
  RecordingBackend backend;
  RunnerOptions o;
  o.wait = WorkerWait::Spin;
  expect_deps_and_order_kept(o, &backend);
}

// The compute worker runs on the CPU it is given; the communication worker keeps the whole mask.
TEST(RankRunner, ComputeWorkerRunsOnItsCpuOnly) {
  const std::vector<int> mask = affinity_cpus();
  ASSERT_FALSE(mask.empty());
  RecordingBackend backend;
  RunnerOptions o;
  o.compute_cpu = mask.back();
  expect_deps_and_order_kept(o, &backend);
  EXPECT_EQ(backend.cpus_of_stream[int(Stream::Compute)], std::vector<int>{mask.back()});
  EXPECT_EQ(backend.cpus_of_stream[int(Stream::Comm)], mask);
}

// The runner verifies what it is handed: a dependency on a later op (which would wait forever) is a
// BadInput naming the op, before any op is issued.
TEST(RankRunner, RejectsAMalformedScheduleBeforeIssuingAnything) {
  Schedule s = tiny_schedule("tiny-gpt", 2, "domino-ds");
  Op* victim = nullptr;
  for (Op& op : s.ops)
    if (!op.deps.empty() && !victim) victim = &op;
  ASSERT_NE(victim, nullptr);
  victim->deps.back() = int32_t(s.ops.size() - 1);
  RecordingBackend backend;
  backend.prepare(s, {});
  RunnerOptions o;
  o.warmup = 0;
  o.iters = 1;
  try {
    run_iterations(s, backend, nullptr, 0, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(op_id(*victim)), std::string::npos) << e.what();
  }
  EXPECT_EQ(backend.ran.load(), 0);
}

TEST(RankRunner, FailingOpStopsWithItsError) {
  const Schedule s = tiny_schedule("tiny-gpt", 2, "domino-ds");
  // Fail a compute op that a comm op waits for, so the comm worker is blocked when it happens.
  int victim = -1;
  for (const Op& op : s.ops)
    if (op.stream == Stream::Comm && !op.deps.empty()) {
      victim = op.deps.front();
      break;
    }
  ASSERT_GE(victim, 0);
  RecordingBackend backend(victim);
  backend.prepare(s, {});
  RunnerOptions o;
  o.warmup = 0;
  o.iters = 2;
  o.check_finite = false;
  try {
    run_iterations(s, backend, nullptr, 0, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op_id(s.ops[size_t(victim)])), std::string::npos) << e.what();
  }
}

std::vector<float> cpu_losses(const Schedule& s, double lr, int iters, RunnerOptions o = {}) {
  auto backend = make_backend("cpu");
  RankContext ctx;
  ctx.hyper.lr = float(lr);
  backend->prepare(s, ctx);
  o.warmup = 0;
  o.iters = iters;
  std::vector<float> losses;
  for (const auto& it : run_iterations(s, *backend, nullptr, 0, o).iterations) losses.push_back(it.loss);
  return losses;
}

TEST(RankRunner, CpuSingleRankLossFallsAndIsDeterministic) {
  for (const char* model : {"tiny-gpt", "tiny-llama"}) {
    const Schedule s = tiny_schedule(model, 1, "megatron-sync");
    const std::vector<float> a = cpu_losses(s, 3e-3, 6), b = cpu_losses(s, 3e-3, 6);
    EXPECT_EQ(a, b) << model;
    // Near ln(vocab) at the start (small random weights), clearly lower after a few steps.
    EXPECT_NEAR(a.front(), std::log(float(s.model.vocab)), 0.5) << model;
    EXPECT_LT(a.back(), a.front() - 0.3f) << model;
  }
}

TEST(RankRunner, NanIsCaughtNamingOpAndRank) {
  const Schedule s = tiny_schedule("tiny-gpt", 1, "megatron-sync");
  try {
    cpu_losses(s, 1e30, 3);
    FAIL() << "a learning rate of 1e30 produced no NaN/Inf";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
    EXPECT_NE(what.find("NaN or Inf"), std::string::npos) << what;
    bool names_an_op = false;
    for (const Op& op : s.ops) names_an_op |= what.find("op " + op_id(op) + " ") != std::string::npos;
    EXPECT_TRUE(names_an_op) << what;
  }
}

TEST(RankRunner, DumpsWeightsInputsAndEveryOutput) {
  const Schedule s = tiny_schedule("tiny-llama", 1, "megatron-sync");
  std::string dir = (fs::temp_directory_path() / "domino-dump.XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  RunnerOptions o;
  o.dump_iter = 1;
  o.dump_dir = dir;
  cpu_losses(s, 1e-3, 2, o);
  for (const Op& op : s.ops)
    for (int i = 0; i < op.n_out; ++i) {
      const std::string path = dir + "/rank0/" + op_id(op) + ".out" + std::to_string(i) + ".npy";
      ASSERT_TRUE(fs::exists(path)) << path;
    }
  // A weight read back has its 2-D shape and the initial scale; token ids are whole numbers below vocab.
  for (const BufferDesc& b : s.buffers) {
    if (b.role != BufferRole::Param && b.role != BufferRole::Data) continue;
    std::vector<int64_t> shape;
    const std::vector<float> v = read_npy(dir + "/rank0/" + b.name + ".npy", &shape);
    ASSERT_EQ(int64_t(v.size()), b.elements()) << b.name;
    if (b.role == BufferRole::Param) {
      EXPECT_EQ(shape, (std::vector<int64_t>{b.seq, b.cols})) << b.name;
    }
    if (b.role != BufferRole::Data) continue;
    for (float t : v) ASSERT_TRUE(t >= 0 && t < float(s.model.vocab) && t == std::floor(t)) << b.name;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace domino
