// calibrate_transfer.cpp: `--fit transfer`: what training adds to a level's collectives over the profiler's
// probe, from the collectives' transfers as training ran them: a time per byte each rank moves, for every
// kind, and a time per collective, the larger of the two, for the kinds the trace holds. Over loopback a
// collective transfers more slowly between compute ops than in the probe (cpu-gpt's 1.5 MiB AllReduce at a
// quarter to two fifths of the probe's bus bandwidth): the kernel's copies of each byte sent or received,
// whichever algorithm moves it. In training the AllReduce, AllGather and ReduceScatter moved their bytes
// within 1.1-1.5x of one another, where the probe had them 1.5-2.7x apart and in another order each day, so
// the time per byte fitted on one kind stands for the transport and is added to every kind's curves, not
// scaled into them. The time per collective (a small AllReduce's 110-200 us over the probe, which a big one's
// bytes hide) is the algorithm's own: the AllGathers of 384 KiB took 11-31 us beyond the time per byte. It
// goes to the kinds it was measured on (docs/fidelity.md, "A time per byte for every kind").
// `--fit sp_transfer`: the AllGather's and the ReduceScatter's own terms, each from its own transfers, added
// to that kind's curves only: the AllReduce's time per byte left them off by what the kinds differ in the
// transport (on one VM 0.84 and 0.91 of a 1.5 MiB AllReduce's time for half its traffic), which only a trace
// of them in training shows (megatron-sp-sync; docs/fidelity.md, "The sequence-parallel collectives").
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <set>

#include "sim/fit/calibrate_terms.hpp"
#include "sim/fit/stats.hpp"

namespace domino::prof::calibration {
namespace {

constexpr size_t kMinIterations = 5;  // a collective's transfer is its median over at least these
constexpr int kMinCollectives = 3;
// The time per collective is told from the time per byte only where the messages' traffic spans this factor.
constexpr double kSpanForTwoTerms = 4;
constexpr double kTabulateUpTo = 4294967296;  // 4 GiB
constexpr OpKind kKinds[] = {OpKind::AllReduce, OpKind::AllGather, OpKind::ReduceScatter};

// The latency the base profile charges a collective of `kind` that ran `algorithm`.
double curve_latency(const CollectiveProfile& level, OpKind kind, const std::string& algorithm) {
  const std::optional<AlgorithmCurves> c = kind_curves(level, kind);
  if (!c) return 0;
  const bool nvls = collective_algorithm_from_name(algorithm) == CollectiveAlgorithm::Nvls;
  return nvls && c->nvls ? c->nvls->latency_us : c->ring.latency_us;
}

// One collective: its kind and message, the bytes a rank moved, what training took beyond the base
// profile's cost, and its weight (the measured transfer's inverse square: relative errors, small and large
// messages alike).
struct Excess {
  OpKind kind = OpKind::AllReduce;
  double bytes = 0, traffic = 0, extra_us = 0, weight = 0;
};

// What training adds to a collective that moves `traffic` bytes per rank: a time per collective (a small
// message's wake-ups and hand-offs) or a time per byte (the copies), the larger: a big message's bytes hide
// the fixed part (over loopback 1.5-8 KiB AllReduces took 110-200 us over the probe, a 1.5 MiB one 650 us,
// 0.4 ns per byte).
struct TransferTerms {
  double per_collective_us = 0, per_byte_us = 0;
  // Without a fixed part the time per byte may be negative (training moved bytes faster than the probe).
  double extra_us(double traffic) const {
    return per_collective_us > 0 ? std::max(per_collective_us, per_byte_us * traffic) : per_byte_us * traffic;
  }
};

double squared_error(const std::vector<Excess>& xs, const TransferTerms& t) {
  double sum = 0;
  for (const Excess& e : xs) {
    const double miss = e.extra_us - t.extra_us(e.traffic);
    sum += e.weight * miss * miss;
  }
  return sum;
}

// Weighted least squares of max(per_collective, per_byte x traffic): every split of the messages by traffic
// into those the fixed part bounds (their weighted mean, at least 0) and those the bytes bound (through the
// origin) is tried. All bytes-bound (no fixed part) is the answer where the traffic does not span
// kSpanForTwoTerms: one size cannot tell the parts apart.
TransferTerms fit_terms(std::vector<Excess> xs) {
  std::sort(xs.begin(), xs.end(), [](const Excess& a, const Excess& b) { return a.traffic < b.traffic; });
  const auto per_byte_over = [&](size_t from) {
    double sxy = 0, sxx = 0;
    for (size_t i = from; i < xs.size(); ++i)
      sxy += xs[i].weight * xs[i].traffic * xs[i].extra_us,
          sxx += xs[i].weight * xs[i].traffic * xs[i].traffic;
    return sxy / sxx;
  };
  TransferTerms best{0, per_byte_over(0)};
  if (!(xs.back().traffic >= kSpanForTwoTerms * xs.front().traffic)) return best;
  double best_error = squared_error(xs, best), sw = 0, sy = 0;
  for (size_t split = 1; split < xs.size(); ++split) {
    sw += xs[split - 1].weight, sy += xs[split - 1].weight * xs[split - 1].extra_us;
    const TransferTerms t{std::max(0.0, sy / sw), std::max(0.0, per_byte_over(split))};
    const double error = squared_error(xs, t);
    if (error < best_error) best = t, best_error = error;
  }
  return best;
}

// A table for a curve without one, so that it can hold a time per collective: its own figure at every power
// of four from 1 B to 4 GiB (the cost model interpolates between rows and holds the end rows beyond them).
void tabulate(CollectiveCurve& curve) {
  if (!curve.table.empty()) return;
  for (double bytes = 1; bytes <= kTabulateUpTo; bytes *= 4)
    curve.table.push_back({bytes, curve.bus_bandwidth_gbps});
}

// The curve with `terms` added for messages among `tp` ranks: the time per byte to its bus bandwidth (GB/s,
// bytes per ns), and to each table row with the time per collective where that is the larger at the row's
// message. False (curve untouched) where a bandwidth would not stay positive.
bool add_terms(CollectiveCurve& curve, OpKind kind, int tp, const TransferTerms& terms) {
  const double per_byte_ns = terms.per_byte_us * 1e3;
  CollectiveCurve changed = curve;
  if (terms.per_collective_us > 0) tabulate(changed);
  changed.bus_bandwidth_gbps = 1 / (1 / curve.bus_bandwidth_gbps + per_byte_ns);
  if (!(changed.bus_bandwidth_gbps > 0)) return false;
  for (auto& row : changed.table) {
    const double traffic = ring_traffic(kind, row.bytes, tp);
    const double us = traffic / (row.bus_bandwidth_gbps * 1e3) + terms.extra_us(traffic);
    row.bus_bandwidth_gbps = traffic / us / 1e3;
    if (!(row.bus_bandwidth_gbps > 0)) return false;
  }
  curve = changed;
  return true;
}

// The curves of the level's kinds `to` with `terms` added, the time per collective only to the kinds
// `measured`; all or none.
bool add_terms_to_level(CollectiveProfile& level, int tp, const TransferTerms& terms,
                        const std::set<OpKind>& measured, const std::set<OpKind>& to) {
  CollectiveProfile changed = level;
  for (OpKind kind : to) {
    std::optional<AlgorithmCurves> c = kind_curves(changed, kind);
    if (!c) continue;
    const TransferTerms own = measured.contains(kind) ? terms : TransferTerms{0, terms.per_byte_us};
    if (!add_terms(c->ring, kind, tp, own) || (c->nvls && !add_terms(*c->nvls, kind, tp, own))) return false;
    set_kind_curves(changed, kind, *c);
  }
  level = changed;
  return true;
}

// Every collective of the trace that ran in kMinIterations timed iterations or more, against the base
// profile (the cost model refuses a profile without a kind's curves).
std::vector<Excess> measured_excess(const TraceSamples& in,
                                    const std::vector<std::vector<TraceEvent>>& iterations) {
  const std::map<int, std::vector<CollectiveRun>> runs = collective_runs(iterations);
  const CollectiveProfile& old = group_collective(in.base, in.tp);
  const CostModel cm(in.base);
  std::vector<Excess> out;
  for (const Sample& s : in.samples) {
    const auto it = runs.find(s.index);
    if (!collective(s.op.kind) || it == runs.end() || it->second.size() < kMinIterations) continue;
    std::vector<double> durations;
    for (const CollectiveRun& run : it->second) durations.push_back(run.dur);
    const double transfer = median_of(durations);
    const CollectiveCost t = cm.collective_cost(s.op.kind, s.op.bytes, in.tp, in.devices_per_node);
    const double predicted = t.us - old.sync_us;  // latency and bandwidth term of the algorithm it ran
    const double traffic = ring_traffic(s.op.kind, s.op.bytes, in.tp);
    if (!(predicted > curve_latency(old, s.op.kind, t.algorithm)) || !(transfer > 0) || !(traffic > 0))
      continue;
    out.push_back({s.op.kind, s.op.bytes, traffic, transfer - predicted, 1 / (transfer * transfer)});
  }
  return out;
}

// "PART (N KINDS ops at M message sizes, median over I iterations)": what a fit's report line stands on.
std::string fitted_head(const std::string& part, const std::vector<Excess>& xs, const std::string& kinds,
                        size_t iterations) {
  std::set<double> sizes;
  for (const Excess& e : xs) sizes.insert(e.bytes);
  return fmt::format("{} ({} {} ops at {} message size{}, median over {} iterations)", part, xs.size(), kinds,
                     sizes.size(), sizes.size() == 1 ? "" : "s", iterations);
}

}  // namespace

void fit_transfer_terms(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                        Profile& p, std::string& report) {
  if (in.tp <= 1) return;
  const std::vector<Excess> xs = measured_excess(in, iterations);
  if (xs.size() < size_t(kMinCollectives)) {
    report += fmt::format("transfer: not fitted ({} collectives over {} or more iterations, {} needed)\n",
                          xs.size(), kMinIterations, kMinCollectives);
    return;
  }
  const TransferTerms terms = fit_terms(xs);
  std::set<OpKind> kinds;
  for (const Excess& e : xs) kinds.insert(e.kind);
  std::string from, others;
  for (OpKind k : kKinds) {
    std::string& list = kinds.contains(k) ? from : others;
    list += std::string(list.empty() ? "" : ", ") + to_string(k);
  }
  const std::string head = fitted_head("transfer", xs, from, iterations.size());
  if (!add_terms_to_level(group_collective(p, in.tp), in.tp, terms, kinds,
                          {std::begin(kKinds), std::end(kKinds)})) {
    report += fmt::format(
        "{}: not fitted ({:.3g} ns per byte would make a bus bandwidth negative: the "
        "collectives ran faster than the profile's fastest rate)\n",
        head, terms.per_byte_us * 1e3);
    return;
  }
  report +=
      fmt::format("{}: {} the larger of {:.1f} us and {:+.4g} ns per byte a rank moves over the profile{}\n",
                  head, from, terms.per_collective_us, terms.per_byte_us * 1e3,
                  others.empty() ? "" : fmt::format("; {} the time per byte alone", others));
}

void fit_sp_transfer_terms(const TraceSamples& in, const std::vector<std::vector<TraceEvent>>& iterations,
                           Profile& p, std::string& report) {
  if (in.tp <= 1) return;
  const std::vector<Excess> all = measured_excess(in, iterations);
  for (OpKind kind : {OpKind::AllGather, OpKind::ReduceScatter}) {
    std::vector<Excess> xs;
    std::copy_if(all.begin(), all.end(), std::back_inserter(xs),
                 [&](const Excess& e) { return e.kind == kind; });
    if (xs.size() < size_t(kMinCollectives)) {
      report += fmt::format("sp_transfer: {} not fitted ({} over {} or more iterations, {} needed)\n",
                            to_string(kind), xs.size(), kMinIterations, kMinCollectives);
      continue;
    }
    const TransferTerms terms = fit_terms(xs);
    const std::string head = fitted_head("sp_transfer", xs, to_string(kind), iterations.size());
    if (!add_terms_to_level(group_collective(p, in.tp), in.tp, terms, {kind}, {kind})) {
      report += fmt::format("{}: not fitted ({:.3g} ns per byte would make a bus bandwidth negative)\n", head,
                            terms.per_byte_us * 1e3);
      continue;
    }
    report +=
        fmt::format("{}: the larger of {:.1f} us and {:+.4g} ns per byte a rank moves over the profile\n",
                    head, terms.per_collective_us, terms.per_byte_us * 1e3);
  }
}

}  // namespace domino::prof::calibration
