// cuda_preflight_test.cpp: what the CUDA backend tells domino-exec's preflight: one memory pool per device
// the host's ranks use (ranks sharing a device under --emulate-comm share its pool), free bytes read on the
// device, and a per-rank figure that prepare() then allocates at least. Skips without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "executor/cuda/cuda_backend.hpp"
#include "executor/job/preflight.hpp"
#include "sim/model/plan.hpp"

namespace domino {
namespace {

// Devices counted in a child process: this one must not start CUDA before cuda_memory_pools forks (as the
// launcher must not), or that child could not use CUDA at all.
int devices_seen_by_a_child() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(std::min(cuda_device_count(), 100));
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

class CudaPreflight : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = devices_seen_by_a_child();
    if (devices_ == 0) GTEST_SKIP() << "no CUDA device here: GPU tests skipped";
  }
  int devices_ = 0;
};

ModelSpec tiny_gpt() {
  ModelOverrides o;
  o.tp = 1;
  return load_model(std::string(DOMINO_TEST_DATA) + "/data/executor/tiny-gpt.yaml", o);
}

TEST_F(CudaPreflight, PoolsFollowTheDevicesOfTheLocalRanks) {
  const int devices = devices_;
  const std::vector<MemoryPool> pools = cuda_memory_pools(launcher_host_ranks(devices + 1));
  ASSERT_EQ(pools.size(), size_t(devices)) << "one pool per device in use";
  EXPECT_EQ(pools[0].name, "CUDA device 0");
  EXPECT_EQ(pools[0].local_ranks, (std::vector<int>{0, devices})) << "rank `devices` wraps onto device 0";
  for (const MemoryPool& p : pools) EXPECT_GT(p.available_bytes, 0) << p.name;
  HostRanks self = launcher_host_ranks(devices + 1);
  self.self = devices;  // one rank of an outside launch: its own device only
  const std::vector<MemoryPool> own = cuda_memory_pools(self);
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].local_ranks, (std::vector<int>{0, devices}));
}

TEST_F(CudaPreflight, PrepareAllocatesAtLeastTheFootprint) {
  const ModelSpec m = tiny_gpt();
  const Schedule s = build_schedule(m, make_strategy_plan("domino-ds", m));
  CudaOptions o;
  o.dtype = "bf16";
  std::unique_ptr<Backend> cuda = make_cuda_backend(o);
  const HostFootprint f = cuda->host_footprint(s, 4, launcher_host_ranks(1));
  EXPECT_EQ(f.busy_threads_per_rank, 1) << "the GPU computes; the host thread only enqueues";
  ASSERT_EQ(f.pools.size(), 1u);
  RankContext ctx;  // one rank: no NCCL
  cuda->prepare(s, ctx);
  EXPECT_LE(f.bytes_per_rank, cuda->peak_memory_bytes()) << "the footprint is a lower bound of the allocation";
}

}  // namespace
}  // namespace domino
