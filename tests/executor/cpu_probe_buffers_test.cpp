// cpu_probe_buffers_test.cpp: what the CPU backend puts in a profiler probe's buffers
// (RankContext::reproducible_values false). Parameters hold varied finite values in [-1, 1] drawn cheaply
// instead of initial_values; token ids and zero-start buffers are as in training; and a probe that takes
// over the arena a finished probe left behind still starts from those values, not from the old contents.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "executor/job/backends.hpp"
#include "executor/runtime/param_init.hpp"
#include "sim/ir/verify.hpp"

namespace domino {
namespace {

Schedule tiny_schedule(const char* model) {
  ModelOverrides o;
  o.tp = 1;
  const ModelSpec m = load_model(std::string(DOMINO_TEST_DATA) + "/data/executor/" + model + ".yaml", o);
  Schedule s = build_schedule(m, make_strategy_plan("megatron-sync", m));
  verify_schedule(s);
  return s;
}

Region whole(const BufferDesc& b, int32_t index) { return {index, 0, b.batch, 0, b.seq, 0, b.cols}; }

std::unique_ptr<Backend> prepared_probe_backend(const Schedule& s) {
  auto backend = make_backend("cpu");
  RankContext ctx;
  ctx.reproducible_values = false;
  backend->prepare(s, ctx);
  return backend;
}

TEST(CpuProbeBuffers, ParametersAreVariedFiniteValuesTheRestAsInTraining) {
  const Schedule s = tiny_schedule("tiny-gpt");
  const auto backend = prepared_probe_backend(s);
  std::set<float> first_values;  // each parameter's first element: buffers are not all drawn alike
  int params = 0;
  for (int32_t i = 0; i < int32_t(s.buffers.size()); ++i) {
    const BufferDesc& b = s.buffers[size_t(i)];
    const std::vector<float> got = backend->read_region(whole(b, i));
    if (b.role != BufferRole::Param) {
      std::vector<float> want(size_t(b.elements()));
      initial_values(s, i, 0, 1, want.data());
      EXPECT_EQ(got, want) << b.name;
      continue;
    }
    ++params;
    first_values.insert(got.front());
    std::set<float> distinct;
    for (float v : got) {
      ASSERT_TRUE(std::isfinite(v) && v >= -1.0f && v <= 1.0f) << b.name << ": " << v;
      distinct.insert(v);
    }
    EXPECT_GT(distinct.size(), std::min<size_t>(got.size() / 2, 64)) << b.name;
  }
  ASSERT_GT(params, 4);
  EXPECT_GT(first_values.size(), size_t(params) / 2);
}

TEST(CpuProbeBuffers, AProbeTakingOverAFinishedProbesArenaStartsFromItsOwnValues) {
  const Schedule first = tiny_schedule("tiny-gpt");
  // The same layout with every parameter turned into a zero-start activation: the bytes the first probe
  // filled with parameter values must read as zeros in the second.
  Schedule second = first;
  for (BufferDesc& b : second.buffers)
    if (b.role == BufferRole::Param) b.role = BufferRole::Activation;
  prepared_probe_backend(first).reset();
  const auto backend = prepared_probe_backend(second);
  for (int32_t i = 0; i < int32_t(second.buffers.size()); ++i) {
    const BufferDesc& b = second.buffers[size_t(i)];
    if (first.buffers[size_t(i)].role != BufferRole::Param) continue;
    for (float v : backend->read_region(whole(b, i))) ASSERT_EQ(v, 0.0f) << b.name;
  }
}

}  // namespace
}  // namespace domino
