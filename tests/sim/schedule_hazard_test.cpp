// schedule_hazard_test.cpp: an independent check that Op::deps make every legal execution equivalent to
// the sequential program. Small models are executed symbolically at element granularity (each element
// remembers which op wrote it last): in program order, then in random and extreme interleavings of the two
// streams that honour only per-stream order and deps; every op must see the same writers in all of them.
// A second, exact check computes happens-before and requires every conflicting cross-stream pair to be
// ordered. The sequential run also checks the accumulate flags: no read of never-written memory, and no
// gradient contribution overwritten.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <random>

#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

constexpr int32_t kUnwritten = -1;
constexpr int32_t kInitial = -2;  // parameters, data, optimizer state: valid before the iteration

// Whether out[j] of op is read-modify-write ("(+)=" or an optimizer update).
bool accumulates(const Op& op, int j) {
  switch (op.code) {
    case OpCode::MatMul:
    case OpCode::MatMulDgrad:
      return j == 0 && op.attrs.accumulate;
    case OpCode::MatMulWgrad:
      return op.attrs.accumulate;
    case OpCode::LayerNormBwd:
    case OpCode::RmsNormBwd:
    case OpCode::EmbeddingBwd:
      return j == 0 ? op.attrs.accumulate : op.attrs.accumulate_params;
    case OpCode::AttnBwd:
      return j >= 1 && op.attrs.accumulate;
    case OpCode::AdamStep:
    case OpCode::SgdStep:
    case OpCode::AllReduce:  // in place: reduces what is there (sequence parallelism: norm gradients)
      return true;
    default:
      return false;
  }
}

template <typename F>
void for_each_element(const Schedule& s, const Region& r, F&& f) {
  const BufferDesc& b = s.buffers[size_t(r.buffer)];
  for (int64_t bi = r.b0; bi < r.b1; ++bi) {
    for (int64_t si = r.s0; si < r.s1; ++si) {
      const int64_t base = (bi * b.seq + si) * b.cols;
      for (int64_t c = r.c0; c < r.c1; ++c) f(base + c);
    }
  }
}

struct Memory {
  std::vector<std::vector<int32_t>> last;  // last writer per element
  explicit Memory(const Schedule& s) {
    for (const BufferDesc& b : s.buffers) {
      const bool initial =
          b.role == BufferRole::Param || b.role == BufferRole::Data || b.role == BufferRole::OptState;
      last.emplace_back(size_t(b.elements()), initial ? kInitial : kUnwritten);
    }
  }
  // Executes op: returns a hash of the writers it reads; reports misuse through `problems`.
  uint64_t run(const Schedule& s, const Op& op, std::vector<std::string>* problems) {
    uint64_t h = 1469598103934665603ull;
    bool uninit = false, overwrite = false;
    const auto read = [&](const Region& r) {
      auto& v = last[size_t(r.buffer)];
      for_each_element(s, r, [&](int64_t i) {
        uninit |= v[size_t(i)] == kUnwritten;
        h = (h ^ uint64_t(v[size_t(i)] + 3)) * 1099511628211ull;
      });
    };
    for (int i = 0; i < op.n_in; ++i) read(op.in[size_t(i)]);
    for (int j = 0; j < op.n_out; ++j) {
      if (accumulates(op, j)) read(op.out[size_t(j)]);
    }
    for (int j = 0; j < op.n_out; ++j) {
      const Region& r = op.out[size_t(j)];
      auto& v = last[size_t(r.buffer)];
      const bool grad = s.buffers[size_t(r.buffer)].role == BufferRole::Grad;
      for_each_element(s, r, [&](int64_t i) {
        overwrite |= grad && !accumulates(op, j) && v[size_t(i)] >= 0;
        v[size_t(i)] = op.index;
      });
    }
    if (problems && uninit) problems->push_back(op_id(op) + " reads memory nothing wrote");
    if (problems && overwrite)
      problems->push_back(op_id(op) + " overwrites a gradient contribution with '='");
    return h;
  }
};

// Runs the ops in an order that honours stream order and deps; policy 0: random, 1: comm first, 2: compute
// first.
void check_interleaving(const Schedule& s, const std::vector<uint64_t>& expected, const Memory& final_mem,
                        int policy, uint32_t seed) {
  std::vector<std::vector<int32_t>> queue(kNumStreams);
  for (const Op& op : s.ops) queue[size_t(op.stream)].push_back(op.index);
  std::vector<size_t> head(kNumStreams, 0);
  std::vector<uint8_t> done(s.ops.size(), 0);
  std::mt19937 rng(seed);
  Memory mem(s);
  for (size_t executed = 0; executed < s.ops.size(); ++executed) {
    std::vector<int> ready;
    for (int st = 0; st < kNumStreams; ++st) {
      if (head[size_t(st)] == queue[size_t(st)].size()) continue;
      const Op& op = s.ops[size_t(queue[size_t(st)][head[size_t(st)]])];
      bool ok = true;
      for (const int32_t d : op.deps) ok &= done[size_t(d)] != 0;
      if (ok) ready.push_back(st);
    }
    ASSERT_FALSE(ready.empty()) << "deadlock after " << executed << " ops";
    int st = ready[0];
    if (ready.size() > 1) {
      if (policy == 0) st = ready[rng() % ready.size()];
      if (policy == 1) st = int(Stream::Comm);
      if (policy == 2) st = int(Stream::Compute);
    }
    const Op& op = s.ops[size_t(queue[size_t(st)][head[size_t(st)]++])];
    ASSERT_EQ(mem.run(s, op, nullptr), expected[size_t(op.index)])
        << op_id(op) << " sees other writers than in program order (policy " << policy << ")";
    done[size_t(op.index)] = 1;
  }
  ASSERT_EQ(mem.last, final_mem.last) << "final contents differ (policy " << policy << ")";
}

bool overlaps(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.b0 < b.b1 && b.b0 < a.b1 && a.s0 < b.s1 && b.s0 < a.s1 && a.c0 < b.c1 &&
         b.c0 < a.c1;
}

bool conflict(const Op& x, const Op& y) {
  for (int i = 0; i < x.n_out; ++i) {
    for (int j = 0; j < y.n_in; ++j)
      if (overlaps(x.out[size_t(i)], y.in[size_t(j)])) return true;
    for (int j = 0; j < y.n_out; ++j)
      if (overlaps(x.out[size_t(i)], y.out[size_t(j)])) return true;
  }
  for (int i = 0; i < x.n_in; ++i) {
    for (int j = 0; j < y.n_out; ++j)
      if (overlaps(x.in[size_t(i)], y.out[size_t(j)])) return true;
  }
  return false;
}

// Exact: every pair of conflicting ops on different streams is ordered by happens-before.
void check_happens_before(const Schedule& s) {
  const size_t n = s.ops.size(), words = (n + 63) / 64;
  std::vector<uint64_t> bits;  // row i: the ops that happen before op i
  bits.resize(n * words);
  const auto row = [&](size_t i) { return bits.data() + i * words; };
  std::vector<int32_t> last_on(kNumStreams, -1);
  const auto merge = [&](size_t into, int32_t from) {
    for (size_t w = 0; w < words; ++w) row(into)[w] |= row(size_t(from))[w];
    row(into)[size_t(from) / 64] |= 1ull << (size_t(from) % 64);
  };
  for (const Op& op : s.ops) {
    if (last_on[size_t(op.stream)] >= 0) merge(size_t(op.index), last_on[size_t(op.stream)]);
    for (const int32_t d : op.deps) merge(size_t(op.index), d);
    last_on[size_t(op.stream)] = op.index;
  }
  for (const Op& c : s.ops) {
    if (c.stream != Stream::Comm) continue;
    for (const Op& x : s.ops) {
      if (x.stream == c.stream || !conflict(c, x)) continue;
      const auto [early, late] = c.index < x.index ? std::pair(&c, &x) : std::pair(&x, &c);
      const size_t e = size_t(early->index);
      EXPECT_TRUE(row(size_t(late->index))[e / 64] >> (e % 64) & 1)
          << op_id(*late) << " conflicts with " << op_id(*early) << " but does not wait for it";
    }
  }
}

ModelSpec micro(ModelSpec m) {
  m.hidden = 16, m.heads = 4, m.ffn_hidden = 32, m.vocab = 16, m.seq_len = 4, m.micro_batch = 4;
  return m;
}

// A tied head's weight gradient and the embedding's scatter share one gradient buffer.
ModelSpec tied_geglu(ModelSpec m) {
  m.name += "-tied-geglu";
  m.tied_embeddings = true, m.activation = Activation::Geglu;
  return m;
}

TEST(ScheduleHazards, EveryInterleavingMatchesProgramOrder) {
  for (const ModelSpec& m : {micro(test::tiny_gpt(2)), micro(test::tiny_llama(2)), micro(test::tiny_llama(4)),
                             tied_geglu(micro(test::tiny_gpt(2)))}) {
    std::vector<test::NamedPlan> plans = test::plans_for(m);
    for (test::NamedPlan& np : test::sp_plans_for(m)) plans.push_back(std::move(np));
    for (const auto& np : plans) {
      SCOPED_TRACE(m.name + " tp " + std::to_string(m.tp) + " / " + np.name);
      const Schedule s = test::build_verified(m, np.plan);
      Memory seq(s);
      std::vector<uint64_t> expected(s.ops.size());
      std::vector<std::string> problems;
      for (const Op& op : s.ops) expected[size_t(op.index)] = seq.run(s, op, &problems);
      for (const auto& p : problems) ADD_FAILURE() << p;
      check_happens_before(s);
      for (int policy = 0; policy < 3; ++policy) {
        for (uint32_t seed = 0; seed < (policy == 0 ? 4u : 1u); ++seed)
          check_interleaving(s, expected, seq, policy, seed);
      }
    }
  }
}

// The check itself must be able to fail: dropping one needed dep must be caught.
TEST(ScheduleHazards, CheckCatchesAMissingDependency) {
  const ModelSpec m = micro(test::tiny_gpt(2));
  Schedule s = test::build_verified(m, make_strategy_plan("domino-ds", m));
  Op* victim = nullptr;
  for (Op& op : s.ops) {
    if (op.code == OpCode::ResidualAdd && !op.deps.empty()) {
      victim = &op;
      break;
    }
  }
  ASSERT_NE(victim, nullptr);
  victim->deps.clear();
  Memory seq(s);
  std::vector<uint64_t> expected(s.ops.size());
  for (const Op& op : s.ops) expected[size_t(op.index)] = seq.run(s, op, nullptr);
  EXPECT_NONFATAL_FAILURE(check_happens_before(s), "does not wait for");
  // Compute first: the residual add runs before the AllReduce it needed.
  bool mismatch = false;
  {
    ::testing::TestPartResultArray results;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
      check_interleaving(s, expected, seq, 2, 0);
    }
    mismatch = results.size() > 0;
  }
  EXPECT_TRUE(mismatch);
}

}  // namespace
}  // namespace domino
