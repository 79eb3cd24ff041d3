// rank_fork.cpp: the profiler's ranks on the one rank launcher (executor/runtime/rank_launcher.hpp): each
// forked rank joins a Gloo group through the launch's rendezvous folder, measures, and hands its JSON back.
#include "executor/profiler/rank_fork.hpp"

#include <chrono>
#include <optional>

#include "executor/runtime/gloo_comm.hpp"
#include "executor/runtime/idle_poller.hpp"
#include "executor/runtime/rank_launcher.hpp"
#include "sim/base/error.hpp"

namespace domino::prof {

CpuPlacement check_placement(const ForkOptions& o) {
  if (o.placement == CpuPlacement::Compute)
    throw_bad_input("domino-profile places whole ranks: --cpu-placement none or rank, not compute");
  // Every rank gets a CPU or none does (place_rank does not share CPUs here), so rank 0 answers for all.
  const bool pinned =
      place_rank({o.placement, o.placement_given, false}, affinity_cpus(), 0, o.ranks).process_cpu >= 0;
  return pinned ? o.placement : CpuPlacement::None;
}

std::vector<nlohmann::json> run_ranks(const ForkOptions& o, const std::function<nlohmann::json(GlooComm&)>& body) {
  if (o.ranks < 1) throw_bad_input("--tp must be at least 1");
  if (o.link_gbps > 0 && o.ranks < 2) throw_bad_input("--link-gbps needs at least 2 ranks (--tp 2 or more)");
  const PlacementRequest placement{check_placement(o), false, false};
  const std::vector<int> cpus = affinity_cpus();
  LaunchOptions lo;
  lo.ranks = o.ranks;
  lo.link_gbps = o.link_gbps;
  lo.deadline_s = o.timeout_s;
  lo.temp_prefix = "domino-profile";
  lo.rank_label = "measuring rank";
  const std::vector<std::string> texts = launch_ranks(lo, [&](const RankSlot& slot) {
    if (o.realtime) enter_realtime();
    const int cpu = place_rank(placement, cpus, slot.rank, slot.world).process_cpu;
    pin_calling_thread(cpu);
    std::optional<IdlePoller> poller;
    if (cpu >= 0 && o.idle_poll) poller.emplace();
    CommConfig cc;
    cc.rank = slot.rank;
    cc.world = slot.world;
    cc.store_dir = slot.rendezvous_dir;
    cc.bind_address = slot.bind_address;
    cc.timeout = std::chrono::milliseconds(120'000);
    GlooComm comm(cc);
    const nlohmann::json result = body(comm);
    comm.barrier("profiler: done");  // nobody tears the mesh down while a peer still reads from it
    return result.dump();
  });
  std::vector<nlohmann::json> results;
  for (int r = 0; r < o.ranks; ++r) {
    try {
      results.push_back(nlohmann::json::parse(texts[size_t(r)]));
    } catch (const nlohmann::json::exception& e) {
      throw_runtime("measuring rank " + std::to_string(r) + " left an unreadable result: " + e.what());
    }
  }
  return results;
}

}  // namespace domino::prof
