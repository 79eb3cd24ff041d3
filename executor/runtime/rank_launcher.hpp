// rank_launcher.hpp: the one way Domino starts the rank processes of one machine (domino-exec, its --check
// runs, domino-profile). It forks one process per rank that runs a body in the parent's memory (options,
// schedule, workload travel for free), inside an emulated link's network namespaces when asked, with a fresh
// rendezvous folder per launch, and waits. One stop policy for every caller: on the first failure the others
// get SIGTERM, then SIGKILL a few seconds later, and the error names the first failed rank, how it died and
// its error message. Every rank dies with the parent (PR_SET_PDEATHSIG), so none outlives it; that signal
// follows the thread that forked, so call launch_ranks from a thread that lives until the launch returns
// (the main thread in every tool). An interrupting signal stops the launch cleanly (see launch_ranks).
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
  // Files and folders the ranks write their outputs to (through write_file_atomic). After a launch that did
  // not succeed, the temporaries its ranks left there ("NAME.tmp.PID", a write cut short) are removed.
  std::vector<std::string> output_paths;
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
//
// SIGINT, SIGTERM or SIGHUP while the ranks run (Ctrl-C, a batch system's stop) interrupts the launch: the
// ranks get SIGTERM (SIGKILL after a grace), are reaped, the emulated link and the launch's folder are
// removed, and launch_ranks throws Runtime "interrupted by SIGINT". The caller should then end the process
// by that signal (launch_interrupted_by) so that its own parent sees how it ended.
std::vector<std::string> launch_ranks(const LaunchOptions& options, const RankBody& body);

// The signal that interrupted this process's last interrupted launch; 0 when none was.
int launch_interrupted_by();

// "exited with status 3", "was killed by signal 9 (SIGKILL)": a waitpid status in words.
std::string describe_exit_status(int status);

}  // namespace domino
