// launch_env.cpp: the rank, world and host-local facts of an outside launch, from whichever launcher's
// environment variables are present (see launch_env.hpp).
#include "executor/job/launch_env.hpp"

#include <cstdlib>
#include <vector>

#include "sim/base/error.hpp"

namespace domino {
namespace {

// One launcher's names for the same four facts.
struct Spelling {
  const char* launcher;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;  // nullptr: derived otherwise (Slurm)
};

// Open MPI before Slurm: mpirun inside a Slurm allocation starts its daemons with srun, and their step
// (one task per node) would otherwise speak for the ranks.
constexpr Spelling kSpellings[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr},
};

constexpr long kMaxRanks = 1 << 20;

int parse_count(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const long x = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || x < 0 || x > kMaxRanks)
    throw_bad_input(name + "='" + text + "' is not a valid number");
  return int(x);
}

std::optional<int> optional_count(const EnvLookup& env, const char* name) {
  if (!name) return std::nullopt;
  const std::optional<std::string> v = env(name);
  if (!v || v->empty()) return std::nullopt;
  return parse_count(name, *v);
}

bool is_set(const EnvLookup& env, const char* name) {
  const std::optional<std::string> v = env(name);
  return v && !v->empty();
}

// Slurm says the tasks of every node of the step; this node's count is the local world.
std::optional<int> slurm_local_world(const EnvLookup& env) {
  const std::optional<std::string> per_node = env("SLURM_STEP_TASKS_PER_NODE");
  const std::optional<int> node = optional_count(env, "SLURM_NODEID");
  if (!per_node || per_node->empty() || !node) return std::nullopt;
  return slurm_tasks_on_node(*per_node, *node);
}

LaunchEnv read_spelling(const EnvLookup& env, const Spelling& s) {
  LaunchEnv launch;
  launch.launcher = s.launcher;
  launch.rank = parse_count(s.rank, env(s.rank).value_or(""));
  launch.world = parse_count(s.world, env(s.world).value_or(""));
  if (launch.world < 1) throw_bad_input(std::string(s.world) + " must be at least 1");
  if (launch.rank >= launch.world)
    throw_bad_input(std::string(s.rank) + "=" + std::to_string(launch.rank) + " is not below " + s.world + "=" +
                    std::to_string(launch.world));
  launch.local_rank = optional_count(env, s.local_rank).value_or(-1);
  launch.local_world = (s.local_world ? optional_count(env, s.local_world) : slurm_local_world(env)).value_or(-1);
  if (launch.local_world == 0 || launch.local_world > launch.world)
    throw_bad_input(std::string(s.launcher) + ": " + std::to_string(launch.local_world) + " ranks on this host, but " +
                    std::to_string(launch.world) + " in all");
  if (launch.local_world > 0 && launch.local_rank >= launch.local_world)
    throw_bad_input(std::string(s.local_rank) + "=" + std::to_string(launch.local_rank) + " is not below the " +
                    std::to_string(launch.local_world) + " ranks on this host");
  return launch;
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

std::optional<LaunchEnv> read_launch_env(const EnvLookup& env) {
  for (const Spelling& s : kSpellings)
    if (is_set(env, s.rank) && is_set(env, s.world)) return read_spelling(env, s);
  return std::nullopt;
}

Rendezvous read_rendezvous(const EnvLookup& env) {
  Rendezvous r;
  r.addr = env("MASTER_ADDR").value_or("");
  const std::string port = env("MASTER_PORT").value_or("");
  if (r.addr.empty() || port.empty())
    throw_bad_input("env mode needs MASTER_ADDR and MASTER_PORT: where rank 0 serves the rendezvous");
  r.port = parse_count("MASTER_PORT", port);
  const std::string agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("");
  if (agent_store == "True" || agent_store == "true" || agent_store == "1") ++r.port;
  if (r.port < 1 || r.port > 65535)
    throw_bad_input("MASTER_PORT=" + port + ": the rendezvous port " + std::to_string(r.port) +
                    " is not a TCP port");
  return r;
}

void export_torchrun_names(const LaunchEnv& launch) {
  ::setenv("RANK", std::to_string(launch.rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(launch.world).c_str(), 1);
  if (launch.local_rank >= 0) ::setenv("LOCAL_RANK", std::to_string(launch.local_rank).c_str(), 1);
  if (launch.local_world > 0) ::setenv("LOCAL_WORLD_SIZE", std::to_string(launch.local_world).c_str(), 1);
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node) {
  const auto malformed = [&] {
    throw_bad_input("SLURM_STEP_TASKS_PER_NODE='" + tasks_per_node + "' is not a list like 2(x3),1");
  };
  if (tasks_per_node.empty()) malformed();
  std::vector<int> per_node;  // the whole list is read: a malformed one is refused wherever it breaks
  for (size_t at = 0; at <= tasks_per_node.size();) {
    size_t end = tasks_per_node.find(',', at);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(at, end - at);
    const size_t open = item.find("(x");
    int repeat = 1;
    if (open != std::string::npos) {
      if (item.back() != ')') malformed();
      repeat = parse_count("SLURM_STEP_TASKS_PER_NODE", item.substr(open + 2, item.size() - open - 3));
    }
    const int tasks = parse_count("SLURM_STEP_TASKS_PER_NODE", item.substr(0, open));
    if (repeat < 1 || per_node.size() + size_t(repeat) > size_t(kMaxRanks)) malformed();
    per_node.insert(per_node.end(), size_t(repeat), tasks);
    at = end + 1;
  }
  if (node < 0 || size_t(node) >= per_node.size())
    throw_bad_input("SLURM_NODEID=" + std::to_string(node) + " but SLURM_STEP_TASKS_PER_NODE='" + tasks_per_node +
                    "' lists " + std::to_string(per_node.size()) + " node(s)");
  return per_node[size_t(node)];
}

}  // namespace domino
