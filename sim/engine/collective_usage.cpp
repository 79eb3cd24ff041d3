// collective_usage.cpp: the algorithms the cost model picks for a schedule's collectives, per kind
// (collective_usage.hpp).
#include "sim/engine/collective_usage.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <utility>

namespace domino {

namespace {

// Whether a level has figures beyond one ring curve for some collective kind.
bool has_algorithm_figures(const CollectiveProfile& c) {
  const auto beyond_ring = [](const std::optional<AlgorithmCurves>& k) { return k && k->has_algorithm_figures(); };
  return c.has_algorithm_figures() || beyond_ring(c.allgather) || beyond_ring(c.reduce_scatter);
}

}  // namespace

std::string collective_algorithm_lines(const Schedule& schedule, const CostModel& cost, int ranks) {
  const Profile& p = cost.profile();
  const int plan_tp = schedule.plan.tp > 0 ? schedule.plan.tp : schedule.model.tp;
  const int tp = ranks > 0 ? ranks : plan_tp;
  if (!schedule.plan.comm_enabled || tp <= 1 ||
      !(has_algorithm_figures(p.intra_node) || (p.inter_node && has_algorithm_figures(*p.inter_node))))
    return "";
  // kind -> algorithm -> (ops, SMs); kinds in OpKind order, so the AllReduce's line comes first.
  std::map<OpKind, std::map<std::string, std::pair<int, int>>> used;
  for (const Op& op : schedule.ops) {
    if (!collective(op.kind)) continue;
    auto& n = used[op.kind][cost.collective(op, tp, p.devices_per_node).algorithm];
    n = {n.first + 1, cost.collective_sms(op, tp, p.devices_per_node)};
  }
  std::string out;
  for (const auto& [kind, algorithms] : used) {
    std::string line;
    for (const auto& [name, n] : algorithms)
      line += fmt::format("{}{} x {}{}", line.empty() ? "" : ", ", name, n.first,
                          n.second > 0 ? fmt::format(" ({} SMs)", n.second) : "");
    out += fmt::format("{:<22} {}\n", std::string(to_string(kind)) + " algorithms", line);
  }
  return out;
}

}  // namespace domino
