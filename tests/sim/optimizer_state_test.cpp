// optimizer_state_test.cpp: the bytes parameters cost in the training precision (16-bit models keep fp32
// master weights and moments), ZeRO-1's sharding of that state over the data-parallel group, the optimizer
// step's bytes, and the training context's bad input.
#include <gtest/gtest.h>

#include "sim/base/error.hpp"
#include "tests/sim/schedule_test_util.hpp"

namespace domino {
namespace {

Schedule megatron_sync(const ModelSpec& m, OptimizerKind optimizer = OptimizerKind::Adam) {
  BuildOptions o;
  o.optimizer = optimizer;
  return test::build_verified(m, make_strategy_plan("megatron-sync", m), o);
}

int64_t elements_of(const Schedule& s, BufferRole role) {
  int64_t n = 0;
  for (const BufferDesc& b : s.buffers) n += b.role == role ? b.elements() : 0;
  return n;
}

int64_t all_elements(const Schedule& s) {
  int64_t n = 0;
  for (const BufferDesc& b : s.buffers) n += b.elements();
  return n;
}

// Per parameter, documented in schedule.hpp: bf16 value 2 + gradient 2 + fp32 master 4 + Adam moments 8.
TEST(OptimizerState, Bf16AdamHolds16BytesPerParameterAndFp32MastersAndMoments) {
  const Schedule s = megatron_sync(test::tiny_gpt(2));
  const int64_t params = elements_of(s, BufferRole::Param);
  ASSERT_GT(params, 0);
  EXPECT_EQ(elements_of(s, BufferRole::Grad), params);
  EXPECT_EQ(elements_of(s, BufferRole::OptState), 2 * params);  // m and v
  const int64_t others = all_elements(s) - 4 * params;          // activations, workspaces, data: 2 bytes each
  EXPECT_EQ(schedule_memory_bytes(s), 16 * params + 2 * others);
}

TEST(OptimizerState, Fp32ModelHasNoMasterCopy) {
  ModelSpec m = test::tiny_gpt(2);
  m.dtype = DType::FP32;
  const Schedule s = megatron_sync(m);
  EXPECT_EQ(schedule_memory_bytes(s), 4 * all_elements(s));
}

TEST(OptimizerState, ZeroOneShardsMastersAndMomentsOverDataParallelRanks) {
  ModelSpec m = test::tiny_gpt(2);
  const Schedule plain = megatron_sync(m);
  const int64_t params = elements_of(plain, BufferRole::Param);
  m.training.dp = 4;
  const Schedule dp_only = megatron_sync(m);
  EXPECT_EQ(schedule_memory_bytes(dp_only), schedule_memory_bytes(plain));  // replicas hold everything
  m.training.zero = 1;
  const Schedule zero = megatron_sync(m);
  // 4 + 12/dp bytes per parameter instead of 16: 12 x 3/4 saved.
  EXPECT_EQ(schedule_memory_bytes(plain) - schedule_memory_bytes(zero), 12 * params * 3 / 4);
  // The schedule itself is the same program.
  EXPECT_EQ(zero.ops.size(), plain.ops.size());
}

Op first_step(const Schedule& s) {
  for (const Op& op : s.ops)
    if (op.kind == OpKind::Optimizer) return op;
  throw_runtime("no optimizer step");
}

TEST(OptimizerState, StepMovesMastersAndMomentsOfSixteenBitModels) {
  ModelSpec m = test::tiny_gpt(2);
  const Op adam = first_step(megatron_sync(m));
  const double n = double(adam.out[0].elements());
  // bf16 gradient read, fp32 master read + written, m and v read + written, bf16 parameter written.
  EXPECT_DOUBLE_EQ(adam.bytes, n * (2 + 8 + 16 + 2));
  const Op sgd = first_step(megatron_sync(m, OptimizerKind::SgdMomentum));
  EXPECT_DOUBLE_EQ(sgd.bytes, n * (2 + 8 + 8 + 2));
  m.training.dp = 4, m.training.zero = 1;
  const Op shard = first_step(megatron_sync(m));
  EXPECT_DOUBLE_EQ(shard.bytes, adam.bytes / 4);  // each rank steps its quarter
  EXPECT_DOUBLE_EQ(shard.flops, adam.flops / 4);
}

// fp32 models keep the count the CPU profiles were measured with: every region once.
TEST(OptimizerState, Fp32StepCountsEveryRegionOnce) {
  ModelSpec m = test::tiny_gpt(2);
  m.dtype = DType::FP32;
  const Op adam = first_step(megatron_sync(m));
  EXPECT_DOUBLE_EQ(adam.bytes, double(adam.out[0].elements()) * 4 * 4);
}

void expect_bad_input(const TrainingContext& t, const std::string& says) {
  try {
    validate_training(t);
    FAIL() << "expected BadInput: " << says;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(TrainingContext, RefusesWhatIsNotModelled) {
  TrainingContext t;
  EXPECT_NO_THROW(validate_training(t));
  t.dp = 0;
  expect_bad_input(t, "--dp 0");
  t = {};
  t.zero = 2;
  expect_bad_input(t, "--zero 2");
  // Both recomputation modes are modelled (the plan carries them); only unknown names are refused.
  t = {};
  t.recompute = parse_recompute("full");
  EXPECT_NO_THROW(validate_training(t));
  EXPECT_EQ(parse_recompute("selective"), Recompute::Selective);
  EXPECT_THROW(parse_recompute("partial"), Error);
  // The model's own validation refuses it too.
  ModelSpec m = test::tiny_gpt(2);
  m.training.dp = -1;
  EXPECT_THROW(validate_model(m), Error);
}

}  // namespace
}  // namespace domino
