// profiler_backend_test.cpp: domino-profile measures through the Backend interface. The probe schedules
// (chains, AllReduce chains, the sequence-parallel AllGather / ReduceScatter probes, the two-stream
// experiments) have the shapes the measuring code relies on, and a backend registered under a test name that
// counts the ops issued on its stream drivers sees every probe: compute ops, the three collectives, the
// interference and arrival-skew experiments; a compute probe's repeats run on one worker thread, as a
// training run's iterations do; a compute stage runs in passes over all its probes. No timed assertions.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "executor/cpu/cpu_backend.hpp"
#include "executor/job/backends.hpp"
#include "executor/profiler/probe_schedule.hpp"
#include "executor/profiler/profile_workload.hpp"
#include "executor/profiler/rank_fork.hpp"
#include "executor/profiler/rank_measure.hpp"
#include "executor/runtime/sp_collective.hpp"
#include "sim/base/error.hpp"

namespace domino::prof {
namespace {

// Issued ops by opcode name, in this process (each forked rank has its own copy); the compute stream's
// iterations that issued ops, and the kernel thread ids that issued them.
std::mutex issued_mutex;
std::map<std::string, int> issued;
int compute_iterations = 0;
std::set<long> compute_threads;
std::vector<std::string> compute_ops;  // each compute-stream op issued, in order, as op_identity names it
// The SCHED_FIFO priorities (0: another policy) of the threads that issued ops, by stream name.
std::map<std::string, std::set<int>> issuing_priorities;

int fifo_priority_of_calling_thread() {
  sched_param param{};
  int policy = 0;
  if (::pthread_getschedparam(::pthread_self(), &policy, &param) != 0 || policy != SCHED_FIFO) return 0;
  return param.sched_priority;
}

std::string op_identity(const Op& op) {
  return fmt::format("{} {}x{}x{} {}B", to_string(op.code), op.m, op.n, op.k, int64_t(op.bytes));
}

class CountingDriver final : public StreamDriver {
 public:
  CountingDriver(std::unique_ptr<StreamDriver> inner, Stream stream)
      : inner_(std::move(inner)), stream_(stream) {}
  void attach_thread() override { inner_->attach_thread(); }
  void begin_iteration(SteadyClock::time_point t0) override {
    issued_this_iteration_ = false;
    inner_->begin_iteration(t0);
  }
  void wait_for(const Op& dep) override { inner_->wait_for(dep); }
  void issue(const Op& op) override {
    {
      std::lock_guard lock(issued_mutex);
      ++issued[to_string(op.code)];
      issuing_priorities[to_string(stream_)].insert(fifo_priority_of_calling_thread());
      if (stream_ == Stream::Compute) {
        compute_threads.insert(long(::syscall(SYS_gettid)));
        compute_ops.push_back(op_identity(op));
        compute_iterations += !issued_this_iteration_;
        issued_this_iteration_ = true;
      }
    }
    inner_->issue(op);
  }
  void synchronize() override { inner_->synchronize(); }
  std::vector<OpTiming> finish_iteration() override { return inner_->finish_iteration(); }

 private:
  std::unique_ptr<StreamDriver> inner_;
  Stream stream_;
  bool issued_this_iteration_ = false;
};

// The CPU backend, counting; its profiling traits ask for chains of 3 so that chains are exercised.
class CountingBackend final : public Backend {
 public:
  std::string name() const override { return "counting-cpu"; }
  TimingMode timing_mode() const override { return inner_->timing_mode(); }
  void prepare(const Schedule& s, const RankContext& ctx) override { inner_->prepare(s, ctx); }
  std::unique_ptr<StreamDriver> make_stream_driver(Stream s) override {
    return std::make_unique<CountingDriver>(inner_->make_stream_driver(s), s);
  }
  void begin_iteration(int64_t step) override { inner_->begin_iteration(step); }
  std::vector<float> read_region(const Region& r) override { return inner_->read_region(r); }
  int64_t peak_memory_bytes() const override { return inner_->peak_memory_bytes(); }
  ProfilingTraits profiling_traits() const override {
    ProfilingTraits t = inner_->profiling_traits();
    t.min_chain = 3;
    t.probe_budget_us = 1000;
    return t;
  }

 private:
  std::unique_ptr<Backend> inner_ = make_cpu_backend();
};

Workload tiny_workload() {
  WorkloadOptions wo;
  wo.quick = true;
  wo.max_allreduce_bytes = 4096;
  Workload w = plan_workload(wo);
  w.gemms.resize(std::min<size_t>(w.gemms.size(), 2));
  w.memory_ops.resize(std::min<size_t>(w.memory_ops.size(), 2));
  w.attention.resize(std::min<size_t>(w.attention.size(), 1));
  w.interference_bytes = 4096;
  w.interference_gemm = w.gemms.front();
  return w;
}

TEST(ProfilerProbeSchedule, ChainsCopyTheOpOnSharedOrSeparateBuffers) {
  const Schedule mini = synthetic_gemm(8, 16, 4);
  const Schedule shared = chain_of(mini, 3, false);
  ASSERT_EQ(shared.ops.size(), 3u);
  EXPECT_EQ(shared.buffers.size(), mini.buffers.size());
  const Schedule separate = chain_of(mini, 3, true);
  ASSERT_EQ(separate.buffers.size(), 3 * mini.buffers.size());
  for (size_t i = 0; i < separate.ops.size(); ++i) {
    const Op& op = separate.ops[i];
    EXPECT_EQ(op.index, int32_t(i));
    EXPECT_EQ(op.out[0].buffer, int32_t(i * mini.buffers.size()) + mini.ops[0].out[0].buffer);
    EXPECT_EQ(op.m, 8);
    EXPECT_TRUE(op.deps.empty());
  }
}

TEST(ProfilerProbeSchedule, TwoStreamExperimentsWaitWhereTheyMust) {
  const Schedule mini = synthetic_gemm(8, 16, 4);
  const Schedule both = gemms_beside_allreduces(mini, 4, 1024, 2);
  ASSERT_EQ(both.ops.size(), 6u);
  EXPECT_EQ(both.ops[4].stream, Stream::Comm);
  EXPECT_EQ(both.ops[4].deps, std::vector<int32_t>{0});  // the GEMMs run when the AllReduces start
  EXPECT_DOUBLE_EQ(collective_bytes(both.ops[5]), 1024);
  const Schedule skew = gemms_then_allreduce(mini, 5);
  ASSERT_EQ(skew.ops.size(), 6u);
  EXPECT_EQ(skew.ops.back().deps, std::vector<int32_t>{4});  // after the last GEMM
  Schedule filled = chain_of(mini, 2, false);
  fill_with_values(filled, 4);
  EXPECT_GE(filled.model.tp, 4);
  for (const BufferDesc& b : filled.buffers) EXPECT_EQ(b.role, BufferRole::Param) << b.name;
}

// A collective probed as a training step runs it: the GEMMs on the compute stream, the collective after the
// last of them on its own buffers, in the collective's TP group.
TEST(ProfilerProbeSchedule, ACollectiveAfterGemmsWaitsForTheLastOne) {
  const Schedule mini = synthetic_gemm(8, 16, 4);
  const Schedule ag = collective_after_gemms(sp_collective_chain(OpCode::AllGather, 1000, 4, 1), mini, 3);
  ASSERT_EQ(ag.ops.size(), 4u);
  EXPECT_EQ(ag.model.tp, 4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ag.ops[size_t(i)].kind, OpKind::Gemm);
  const Op& gather = ag.ops.back();
  EXPECT_EQ(gather.stream, Stream::Comm);
  EXPECT_EQ(gather.deps, std::vector<int32_t>{2});
  EXPECT_GE(gather.out[0].buffer, int32_t(mini.buffers.size()));  // not a GEMM's buffer
  EXPECT_DOUBLE_EQ(collective_bytes(gather), 4.0 * 4 * 63);
  const SpCollectiveShape g = sp_collective_shape(ag, gather, 4);
  EXPECT_EQ(g.group_rows, 4);
  const Schedule ar = collective_after_gemms(allreduce_chain(4096, 1), mini, 1);
  EXPECT_EQ(ar.ops.back().deps, std::vector<int32_t>{0});
  EXPECT_DOUBLE_EQ(collective_bytes(ar.ops.back()), 4096);
  EXPECT_THROW(collective_after_gemms(allreduce_chain(4096, 2), mini, 1),
               domino::Error);  // one collective only
  EXPECT_THROW(collective_after_gemms(mini, mini, 1), domino::Error);
}

TEST(ProfilerProbeSchedule, SequenceParallelProbesSpreadTheFullBufferOverTheRanks) {
  const Schedule ag = sp_collective_chain(OpCode::AllGather, 1000, 4, 2);
  ASSERT_EQ(ag.ops.size(), 2u);
  for (const Op& op : ag.ops) {
    EXPECT_EQ(op.stream, Stream::Comm);
    EXPECT_EQ(op.kind, OpKind::AllGather);
    // 1000 B = 250 floats, 62.5 per rank: 63 each, so the full buffer holds 4 x 63 floats.
    EXPECT_DOUBLE_EQ(collective_bytes(op), 4.0 * 4 * 63);
    EXPECT_DOUBLE_EQ(op.bytes, collective_bytes(op));
  }
  const SpCollectiveShape g = sp_collective_shape(ag, ag.ops[0], 4);  // the executors accept its geometry
  EXPECT_EQ(g.part, 1);
  EXPECT_EQ(g.group_rows, 4);
  const Schedule rs = sp_collective_chain(OpCode::ReduceScatter, 4, 2, 1);  // less than a float per rank
  EXPECT_EQ(rs.ops[0].out[0].elements(), 1);  // this rank's one float
  EXPECT_DOUBLE_EQ(collective_bytes(rs.ops[0]), 8);
  EXPECT_EQ(collective_samples_key(OpKind::AllReduce), "collectives");
  EXPECT_EQ(collective_samples_key(OpKind::ReduceScatter), "reducescatter");
}

// Measures `w` on two forked ranks of the counting backend; `answer` turns a rank's figures, with what that
// rank counted in hand, into what the rank returns.
std::vector<nlohmann::json> measure_counted(const Workload& w,
                                            const std::function<nlohmann::json(nlohmann::json)>& answer,
                                            bool realtime = false, bool collectives_after_compute = false) {
  register_backend("counting-cpu", [] { return std::make_unique<CountingBackend>(); });
  MeasureOptions mo;
  mo.quick = true;
  mo.backend = "counting-cpu";
  mo.realtime = realtime;
  mo.collectives_after_compute = collectives_after_compute;
  ForkOptions fo;
  fo.ranks = 2;
  fo.timeout_s = 120;
  fo.realtime = realtime;
  return run_ranks(fo, [&](GlooComm& comm) {
    nlohmann::json out = measure_rank(w, comm, mo);
    std::lock_guard lock(issued_mutex);
    return answer(std::move(out));
  });
}

// --collectives-after-compute: every collective probe's iteration (two warm-up ones too) runs GEMMs first;
// its entries say how long. Without it no collective probe runs a GEMM.
TEST(ProfilerBackend, CollectivesAfterComputeRunGemmsBeforeEachCollective) {
  const Workload w = tiny_workload();
  const auto gemms_and_entries = [&](bool after_compute) {
    return measure_counted(
        w,
        [](nlohmann::json out) {
          out["compute_ops_issued"] = compute_ops.size();
          return out;
        },
        false, after_compute);
  };
  const auto alone = gemms_and_entries(false), after = gemms_and_entries(true);
  ASSERT_EQ(after.size(), 2u);
  for (size_t r = 0; r < after.size(); ++r) {
    int iterations = 0;
    for (const char* key : {"collectives", "allgather", "reducescatter"})
      for (size_t i = 0; i < after[r][key].size(); ++i) {
        const nlohmann::json& e = after[r][key][i];
        EXPECT_GT(e.value("compute_before_us", 0.0), 0) << key << " " << e["bytes"];
        EXPECT_FALSE(alone[r][key][i].contains("compute_before_us")) << key;
        iterations += int(e["samples_us"].size()) + 2;
      }
    ASSERT_GT(iterations, 0);
    // The compute probes' repeats vary with their timing: at least one compute op more per collective
    // iteration (half of that, for the slack).
    EXPECT_GE(after[r]["compute_ops_issued"].get<int>() - alone[r]["compute_ops_issued"].get<int>(),
              iterations / 2)
        << "rank " << r;
  }
}

TEST(ProfilerBackend, EveryProbeRunsThroughTheNamedBackend) {
  const Workload w = tiny_workload();
  const auto ranks = measure_counted(w, [](nlohmann::json out) {
    out["issued"] = issued;
    out["compute_iterations"] = compute_iterations;
    out["compute_threads"] = compute_threads.size();
    return out;
  });
  ASSERT_EQ(ranks.size(), 2u);
  for (const nlohmann::json& r : ranks) {
    const auto count = [&](const std::string& code) { return r["issued"].value(code, 0); };
    // Every compute sample is one issued op (chains of 3: two samples per iteration, the first left out).
    std::map<std::string, int> samples;
    for (const auto& e : r["compute"]) samples[e["code"].get<std::string>()] += int(e["samples_us"].size());
    for (const auto& [code, n] : samples) {
      EXPECT_GT(n, 0) << code;
      EXPECT_GE(count(code), n) << code;
    }
    int allreduce_samples = 0;
    for (const auto& e : r["collectives"]) allreduce_samples += int(e["samples_us"].size());
    allreduce_samples += int(r["interference"]["allreduce_alone_us"].size());
    allreduce_samples += int(r["interference"]["allreduce_during_us"].size());
    allreduce_samples += int(r["sync"]["allreduce_us"].size());
    EXPECT_GT(allreduce_samples, 0);
    EXPECT_GE(count("AllReduce"), allreduce_samples);
    EXPECT_FALSE(r["interference"]["gemm_alone_us"].empty());
    // A probe's repeats share its workers (a new worker per repeat paid its first allocations inside the op):
    // far fewer compute threads than compute iterations.
    EXPECT_LT(2 * r["compute_threads"].get<int>(), r["compute_iterations"].get<int>())
        << r["compute_threads"] << " threads for " << r["compute_iterations"] << " iterations";
    // The sequence-parallel pair at every AllReduce size, each sample one issued op of its kind.
    for (const auto& [key, code] : {std::pair{"allgather", "AllGather"}, std::pair{"reducescatter", "ReduceScatter"}}) {
      ASSERT_EQ(r[key].size(), r["collectives"].size()) << key;
      int n = 0;
      for (const auto& e : r[key]) {
        EXPECT_EQ(e["kind"], key);
        n += int(e["samples_us"].size());
      }
      EXPECT_GT(n, 0) << key;
      EXPECT_GE(count(code), n) << key;
    }
  }
}

// The GEMM and memory-bound stages each run in the backend's compute_passes over all their probes (on the
// CPU G1 G2 G1 G2 G1 G2, not G1 G1 G1 G2 G2 G2), so that the machine's drift lands on every probe of a stage
// alike.
TEST(ProfilerBackend, ComputeProbesRunInPassesOverTheirStage) {
  const Workload w = tiny_workload();
  ASSERT_EQ(w.gemms.size(), 2u);
  ASSERT_EQ(w.memory_ops.size(), 2u);
  const auto ranks = measure_counted(w, [](const nlohmann::json&) { return nlohmann::json(compute_ops); });
  const int passes = CountingBackend().profiling_traits().compute_passes;
  ASSERT_GT(passes, 1);
  std::vector<std::string> want;  // each probe's op once per pass, a stage's passes one after another
  for (const std::vector<Probe>* stage : {&w.gemms, &w.memory_ops})
    for (int pass = 0; pass < passes; ++pass)
      for (const Probe& p : *stage) want.push_back(op_identity(p.mini->ops.front()));
  ASSERT_NE(want[0], want[1]);
  ASSERT_NE(want[size_t(2 * passes)], want[size_t(2 * passes + 1)]);
  for (const nlohmann::json& r : ranks) {
    std::vector<std::string> runs;  // the issued ops with repeats of one op collapsed into one run
    for (const std::string& id : r.get<std::vector<std::string>>())
      if (runs.empty() || runs.back() != id) runs.push_back(id);
    ASSERT_GE(runs.size(), want.size());
    EXPECT_EQ(std::vector<std::string>(runs.begin(), runs.begin() + std::ptrdiff_t(want.size())), want);
  }
}

// Whether this process may schedule a thread SCHED_FIFO (root or CAP_SYS_NICE), tried on a thread of its own.
bool may_use_fifo() {
  bool ok = false;
  std::thread([&] {
    sched_param param{};
    param.sched_priority = 1;
    ok = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &param) == 0;
  }).join();
  return ok;
}

// Default scheduling leaves every thread out of SCHED_FIFO; --realtime (MeasureOptions and ForkOptions
// realtime) issues every probe's collectives SCHED_FIFO and its compute under the normal policy, as
// domino-exec --realtime runs a plan.
TEST(ProfilerBackend, RealtimeProbesRunCommunicationAboveCompute) {
  const Workload w = tiny_workload();
  const auto priorities = [](const nlohmann::json&) { return nlohmann::json(issuing_priorities); };
  for (const nlohmann::json& r : measure_counted(w, priorities)) {
    EXPECT_EQ(r["compute"], nlohmann::json({0}));
    EXPECT_EQ(r["comm"], nlohmann::json({0}));
  }
  if (!may_use_fifo()) GTEST_SKIP() << "this process may not use SCHED_FIFO (needs root or CAP_SYS_NICE)";
  for (const nlohmann::json& r : measure_counted(w, priorities, true)) {
    EXPECT_EQ(r["compute"], nlohmann::json({0})) << r;
    EXPECT_EQ(r["comm"], nlohmann::json({kRealtimeCommPriority})) << r;
  }
}

// The command line names the backend; one the registry does not know is bad input (exit 2), found before
// any rank is forked.
TEST(ProfilerCli, UnknownBackendIsBadInput) {
  const std::string bin = std::string(DOMINO_BIN_DIR) + "/domino-profile";
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << bin << " not built";
  const std::string out = (std::filesystem::temp_directory_path() / "domino_profile_nope.yaml").string();
  const int status = std::system((bin + " --backend nope --quick -o " + out + " 2> /dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace domino::prof
