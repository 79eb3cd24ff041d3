// launch_env.hpp: env mode, where an outside launcher starts domino-exec once per rank and says which rank it
// is through the environment. Three spellings are read, first match wins: torchrun's (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE), Open MPI's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE) and
// Slurm's inside an srun step (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE
// with SLURM_NODEID). The rendezvous address is MASTER_ADDR:MASTER_PORT under every launcher.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace domino {

struct LaunchEnv {
  std::string launcher;  // which spelling was read: "torchrun", "Open MPI", "Slurm"
  int rank = 0;
  int world = 1;
  int local_rank = -1;   // -1: the launcher did not say
  int local_world = -1;  // ranks on this host; -1: the launcher did not say
};

// Looks one variable up; nullopt when unset. Tests pass a map, the tool passes the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

// The launch this process is one rank of; nullopt when no spelling is complete (the built-in launcher
// runs). Slurm counts only inside an srun step (SLURM_STEP_NUM_TASKS set): a batch script's own shell
// also has SLURM_PROCID and SLURM_NTASKS, and there domino-exec is its own launcher. BadInput on a number
// that does not parse or a rank outside its world.
std::optional<LaunchEnv> read_launch_env(const EnvLookup& env);

// Where the ranks meet: rank 0 serves the rendezvous store there, every rank connects to it.
struct Rendezvous {
  std::string addr;
  int port = 0;
};
// MASTER_ADDR and MASTER_PORT, under every launcher. torchrun's agent already serves a store of its own on
// MASTER_PORT (it says so with TORCHELASTIC_USE_AGENT_STORE): rank 0 then serves ours on the next port.
// BadInput when either is missing or the port is not one.
Rendezvous read_rendezvous(const EnvLookup& env);

// Sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE (when known) in this process's environment, so
// that whatever reads torchrun's names (a backend choosing its device by LOCAL_RANK) sees them whichever
// launcher started the process.
void export_torchrun_names(const LaunchEnv& launch);

// Slurm's task counts per node, "2(x3),1" -> 2,2,2,1; the count of node `node`. BadInput when malformed
// or when the list has no such node.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);

}  // namespace domino
