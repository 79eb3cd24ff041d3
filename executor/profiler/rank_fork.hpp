// rank_fork.hpp: runs a measuring body in `ranks` forked processes joined by a Gloo group (FileStore in a
// fresh temporary folder), optionally inside an emulated link's network namespaces, and collects each
// rank's JSON result. Forking (not re-executing) keeps the parent's workload: the children share it. A thin
// adapter on the one rank launcher (executor/runtime/rank_launcher.hpp), which also sets the stop policy.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

namespace domino {
class GlooComm;
}

namespace domino::prof {

struct ForkOptions {
  int ranks = 2;
  double link_gbps = 0;  // > 0: ranks in LinkEmulation namespaces, egress shaped to this rate
  int timeout_s = 900;   // the whole measurement; a stuck rank is killed after this
};

// Results of every rank, by rank. Throws domino::Error (runtime) naming the rank that failed and why.
std::vector<nlohmann::json> run_ranks(const ForkOptions& options,
                                      const std::function<nlohmann::json(GlooComm&)>& body);

}  // namespace domino::prof
