// exec_two_hosts_test.cpp: the cluster path on one machine: two network namespaces joined by a veth link
// stand for two hosts, each runs one domino-exec rank as torchrun or srun would start it (RANK, WORLD_SIZE,
// MASTER_ADDR = the first host's address), and the ranks train over real TCP between the hosts: both exit
// 0 and write their outputs. Skips without root or iproute2; the namespaces go in every case.
#include <gtest/gtest.h>

#include <filesystem>

#include "exec_test_util.hpp"
#include "executor/runtime/link_emulation.hpp"

namespace domino {
namespace {

using namespace exectest;
namespace fs = std::filesystem;

TEST(ExecTwoHosts, OneRankPerHostTrainsOverTcp) {
  std::string why;
  if (!LinkEmulation::available(&why)) GTEST_SKIP() << "two hosts need network namespaces: " << why;
  LinkEmulation::install_signal_cleanup();  // a crash or a stop signal removes them too
  LinkEmulationConfig config;
  config.ranks = 2;  // two namespaces joined by one veth pair, no rate limit
  const LinkEmulation hosts(config);  // removed when the test ends, whatever it asserted
  TempDir dir;
  std::vector<Proc> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv = hosts.exec_prefix(r);
    argv.insert(argv.end(), {exec_bin(), model_file("tiny-gpt"), "--strategy", "domino-ds", "--iters", "2",
                             "--warmup", "1", "--json", dir / "s.json", "--trace", dir / "t.json", "--dump-tensors",
                             dir / "dump", "--timeout", "60"});
    ranks.push_back(start_program(argv, dir / ("log" + std::to_string(r)),
                                  {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
                                   "MASTER_ADDR=" + hosts.address_of(0), "MASTER_PORT=29500"}));
  }
  for (int r = 0; r < 2; ++r) {
    const Outcome o = finish(ranks[size_t(r)], 120);
    EXPECT_EQ(o.exit_code, 0) << "rank " << r << ": " << o.output;
  }
  EXPECT_TRUE(fs::exists(dir / "s.json"));
  EXPECT_TRUE(fs::exists(dir / "t.json"));
  for (int r = 0; r < 2; ++r) {
    const std::string rank_dir = dir / ("dump/rank" + std::to_string(r));
    EXPECT_TRUE(fs::is_directory(rank_dir) && !fs::is_empty(rank_dir)) << rank_dir;
  }
  const std::string log0 = read_text(dir / "log0");
  EXPECT_NE(log0.find("iter   2"), std::string::npos) << log0;  // rank 0 printed every iteration
}

}  // namespace
}  // namespace domino
