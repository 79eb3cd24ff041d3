// rank_launcher.hpp: the one way Domino starts the rank processes of one machine (domino-exec, its --check
// runs, domino-profile). It forks one process per rank that runs a body in the parent's memory (options,
// schedule, workload travel for free), inside an emulated link's network namespaces when asked, with a fresh
// rendezvous folder per launch, and waits. One stop policy for every caller: on the first failure the others
// get SIGTERM, then SIGKILL a few seconds later, and the error names the first failed rank, how it died and
// its error message. Every rank dies with the parent (PR_SET_PDEATHSIG), so none outlives it; that signal
// follows the thread that forked, so call launch_ranks from a thread that lives until the launch returns
// (the main thread in every tool).
//
// The parent must not have started CUDA, OpenMP thread pools or Gloo before launching: a forked child
// inherits none of their threads, only their (then inconsistent) state.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace domino {

struct LaunchOptions {
  int ranks = 1;
  double link_gbps = 0;  // > 0: every rank in its own network namespace, egress shaped to this rate (root)
  int deadline_s = 0;    // > 0: ranks still running this long after the start are stopped and the launch fails
  std::string temp_prefix = "domino-ranks";  // the launch's temporary folder: $TMPDIR/PREFIX.XXXXXX
  std::string rank_label = "rank";           // how errors name a rank process ("rank 1 exited with status 1")
};

// Where one rank process stands; what the body needs to join its group.
struct RankSlot {
  int rank = 0;
  int world = 1;
  std::string rendezvous_dir;  // empty at the start, shared by the launch's ranks (Gloo's FileStore)
  std::string bind_address;    // 127.0.0.1, or this rank's address on the emulated link
};

// Runs in the rank process; what it returns comes back to the parent (any bytes). An exception ends the rank
// with exit code 2 for bad input (domino::Error BadInput), else 1, and its message reaches the parent's error.
using RankBody = std::function<std::string(const RankSlot&)>;

// Starts options.ranks processes running `body` and waits for all of them. Returns what each returned, by
// rank. Throws domino::Error naming the first failed rank (BadInput when it failed on bad input, else
// Runtime); BadInput for bad options; Runtime when the deadline passes or a fork or the link fails.
std::vector<std::string> launch_ranks(const LaunchOptions& options, const RankBody& body);

// "exited with status 3", "was killed by signal 9 (SIGKILL)": a waitpid status in words.
std::string describe_exit_status(int status);

}  // namespace domino
