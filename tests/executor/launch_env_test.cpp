// launch_env_test.cpp: env mode's reading of an outside launch (executor/job/launch_env.hpp): torchrun's,
// Open MPI's and an srun step's spellings of rank, world and host-local ranks, which one wins when several
// are set, Slurm's per-node task lists, bad values as bad input, the rendezvous address (and torchrun's own
// store on MASTER_PORT); and two ranks started with Open MPI's and Slurm's names train together end to end.
#include <gtest/gtest.h>

#include <map>

#include "exec_test_util.hpp"
#include "executor/job/launch_env.hpp"
#include "sim/base/error.hpp"

namespace domino {
namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup lookup(const Vars& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LaunchEnv read(const Vars& vars) {
  const std::optional<LaunchEnv> l = read_launch_env(lookup(vars));
  EXPECT_TRUE(l.has_value());
  return l.value_or(LaunchEnv{});
}

bool refused_as_bad_input(const Vars& vars) {
  try {
    read_launch_env(lookup(vars));
  } catch (const Error& e) {
    return e.kind() == ErrorKind::BadInput;
  }
  return false;
}

TEST(LaunchEnv, NoLauncherMeansTheBuiltInOne) {
  EXPECT_FALSE(read_launch_env(lookup({})).has_value());
  EXPECT_FALSE(read_launch_env(lookup({{"RANK", "0"}})).has_value()) << "a rank without a world size";
  EXPECT_FALSE(read_launch_env(lookup({{"RANK", ""}, {"WORLD_SIZE", ""}})).has_value());
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv l = read({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}});
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.world, 8);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_world, 4);
  const LaunchEnv bare = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(bare.local_rank, -1);
  EXPECT_EQ(bare.local_world, -1);
}

TEST(LaunchEnv, OpenMpi) {
  const LaunchEnv l = read({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(l.launcher, "Open MPI");
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.world, 4);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_world, 2);
}

TEST(LaunchEnv, SlurmStepWithItsTasksPerNode) {
  const LaunchEnv l = read({{"SLURM_PROCID", "6"}, {"SLURM_STEP_NUM_TASKS", "7"}, {"SLURM_NTASKS", "16"},
                            {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "3"},
                            {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}});
  EXPECT_EQ(l.launcher, "Slurm");
  EXPECT_EQ(l.rank, 6);
  EXPECT_EQ(l.world, 7) << "the step's tasks, not the allocation's";
  EXPECT_EQ(l.local_rank, 0);
  EXPECT_EQ(l.local_world, 1);
}

TEST(LaunchEnv, SlurmBatchShellIsNotARank) {
  // sbatch's script has these too; there domino-exec launches its own ranks.
  EXPECT_FALSE(read_launch_env(lookup({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}}))
                   .has_value());
}

TEST(LaunchEnv, TorchrunThenOpenMpiThenSlurm) {
  const Vars slurm{{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}};
  Vars ompi = slurm;
  ompi.insert({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(read(ompi).launcher, "Open MPI") << "mpirun's daemons may sit in a Slurm step of their own";
  Vars torchrun = ompi;
  torchrun.insert({{"RANK", "7"}, {"WORLD_SIZE", "8"}});
  EXPECT_EQ(read(torchrun).launcher, "torchrun");
  EXPECT_EQ(read(torchrun).rank, 7);
}

TEST(LaunchEnv, BadNumbersAreBadInput) {
  EXPECT_TRUE(refused_as_bad_input({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
  EXPECT_TRUE(refused_as_bad_input({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_TRUE(refused_as_bad_input({{"RANK", "2"}, {"WORLD_SIZE", "2"}})) << "rank past the world";
  EXPECT_TRUE(refused_as_bad_input({{"RANK", "0"}, {"WORLD_SIZE", "0"}}));
  EXPECT_TRUE(refused_as_bad_input({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}));
  EXPECT_TRUE(refused_as_bad_input({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}));
  EXPECT_TRUE(refused_as_bad_input({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NODEID", "2"},
                                    {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}}))
      << "a node the list does not have";
}

TEST(LaunchEnv, SlurmTasksPerNodeLists) {
  EXPECT_EQ(slurm_tasks_on_node("8", 0), 8);
  EXPECT_EQ(slurm_tasks_on_node("4(x2)", 1), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("3,1,2", 2), 2);
  for (const char* bad : {"", "x", "2(x", "2(x0)", "2(3)", "2,,1"}) {
    try {
      slurm_tasks_on_node(bad, 0);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << bad;
    }
  }
  EXPECT_THROW(slurm_tasks_on_node("2(x3),1", 4), Error);
}

TEST(LaunchEnv, RendezvousAtMasterAddrAndPort) {
  const Rendezvous r = read_rendezvous(lookup({{"MASTER_ADDR", "node01"}, {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(r.addr, "node01");
  EXPECT_EQ(r.port, 29500);
  // torchrun's agent serves its own store on MASTER_PORT: ours goes on the next port.
  EXPECT_EQ(read_rendezvous(lookup({{"MASTER_ADDR", "node01"}, {"MASTER_PORT", "29500"},
                                    {"TORCHELASTIC_USE_AGENT_STORE", "True"}}))
                .port,
            29501);
  for (const Vars& bad : {Vars{{"MASTER_PORT", "29500"}}, Vars{{"MASTER_ADDR", "node01"}},
                          Vars{{"MASTER_ADDR", "node01"}, {"MASTER_PORT", "http"}},
                          Vars{{"MASTER_ADDR", "node01"}, {"MASTER_PORT", "70000"}}}) {
    try {
      read_rendezvous(lookup(bad));
      ADD_FAILURE() << "accepted " << bad.size() << " variables";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    }
  }
}

// Two ranks named the way mpirun or srun names them rendezvous at MASTER_ADDR:MASTER_PORT and train.
void two_ranks_train(const exectest::RankEnv& names) {
  using namespace exectest;
  TempDir dir;
  run_env_mode_ranks({model_file("tiny-gpt"), "--strategy", "megatron-sync", "--iters", "1", "--warmup", "0",
                      "--json", dir / "s.json", "--dump-tensors", dir / "dump"},
                     dir, 2, names);
  EXPECT_TRUE(std::filesystem::exists(dir / "s.json"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "dump/rank0"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "dump/rank1"));
}

TEST(LaunchEnv, OpenMpiNamedRanksTrain) {
  two_ranks_train([](int r, int) {
    return std::vector<std::string>{"OMPI_COMM_WORLD_RANK=" + std::to_string(r), "OMPI_COMM_WORLD_SIZE=2",
                                    "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(r), "OMPI_COMM_WORLD_LOCAL_SIZE=2"};
  });
}

TEST(LaunchEnv, SrunNamedRanksTrain) {
  two_ranks_train([](int r, int) {
    return std::vector<std::string>{"SLURM_PROCID=" + std::to_string(r), "SLURM_STEP_NUM_TASKS=2",
                                    "SLURM_LOCALID=" + std::to_string(r), "SLURM_NODEID=0",
                                    "SLURM_STEP_TASKS_PER_NODE=2"};
  });
}

}  // namespace
}  // namespace domino
