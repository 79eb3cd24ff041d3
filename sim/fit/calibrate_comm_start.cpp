// calibrate_comm_start.cpp: the wait of a collective whose turn comes while its rank computes
// (interference.comm_start_wait_us and its decay with the thread's sleep), fitted on a measured trace that
// carries each op's deps. On a CPU rank the communication thread sleeps between collectives; woken while the
// compute thread holds the core, it starts when the compute stream next stands idle or when the kernel lets
// it in, sooner the longer it slept. The fit takes the wait and decay that, capped by each collective's next
// idle moment as the simulator caps them, best reproduce the measured starts.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/fit/calibrate_terms.hpp"

namespace domino::prof::calibration {

namespace {

// A collective whose stream's previous op ended within this of its deps had no thread to wake (it ran on);
// a compute op that starts within this of the collective's deps could take the core then.
constexpr double kAtOnceUs = 50;
// A compute op that starts within this after a collective's end, its stream idle before, was woken by it.
constexpr double kWokenWithinUs = 300;
// A gap between two compute ops longer than this is the compute thread waiting: the core was free.
constexpr double kIdleGapUs = 100;
// The grids tried: waits 0 to kMaxWaitUs by kWaitStepUs; decays from kFirstDecayUs growing by kDecayGrowth
// (0, no decay, first).
constexpr double kWaitStepUs = 10, kMaxWaitUs = 20'000, kFirstDecayUs = 250, kDecayGrowth = 1.2;
constexpr int kDecays = 30;
constexpr size_t kMinSamples = 5;
// The decay is fitted only on this many: with fewer, samples that all slept long fit any wait at no sleep
// (six gave 20 ms, the grid's end, less by exp(-slept / 2.7 ms), and collectives due after a short sleep then
// waited up to 9 ms each where none had been measured above 4), so the wait is fitted alone.
constexpr size_t kMinSamplesForDecay = 2 * kMinSamples;

// A collective due while its rank's compute stream had an op ready: how long its thread had slept, how long
// after it was due it started, and how long after that the compute stream first stood idle (no wait
// outlasts it).
struct DueBesideCompute {
  double slept = 0, lag = 0, until_idle = 0;
};

// One rank's spans in start order, the compute stream's without its collectives (they sleep in the library).
struct RankSpans {
  std::vector<const TraceEvent*> compute, comm;
  std::map<int64_t, double> end_of;  // op index -> end
};

double end_us(const TraceEvent& e) { return e.start_us + e.dur_us; }

// The latest end of the ops `deps` lists (+inf when one is not in the trace).
double deps_end(const RankSpans& r, const nlohmann::json& deps, double floor) {
  for (const auto& d : deps) {
    const auto it = d.is_number_integer() ? r.end_of.find(d.get<int64_t>()) : r.end_of.end();
    floor = std::max(floor, it == r.end_of.end() ? std::numeric_limits<double>::infinity() : it->second);
  }
  return floor;
}

const nlohmann::json& deps_of(const TraceEvent& e) {
  static const nlohmann::json none = nlohmann::json::array();
  const auto it = e.args.find("deps");
  return it != e.args.end() && it->is_array() ? *it : none;
}

// Whether the compute stream's first op from `due` on was ready then (all its deps done): the compute thread
// wanted the core. If so, when the run of back-to-back compute ops from it ended.
std::optional<double> busy_until(const RankSpans& r, double due) {
  auto it = std::find_if(r.compute.begin(), r.compute.end(),
                         [&](const TraceEvent* e) { return e->start_us >= due - 1; });
  if (it == r.compute.end() || deps_end(r, deps_of(**it), 0) > due + kAtOnceUs) return std::nullopt;
  double end = end_us(**it);
  for (++it; it != r.compute.end() && (*it)->start_us <= end + kIdleGapUs; ++it)
    end = std::max(end, end_us(**it));
  return end;
}

// Whether the compute stream stood idle at `t` and an op of it started within kWokenWithinUs after.
bool compute_woken_at(const RankSpans& r, double t) {
  bool woken = false;
  for (const TraceEvent* e : r.compute) {
    if (e->start_us < t - kAtOnceUs && end_us(*e) > t + kAtOnceUs) return false;  // it ran through t
    woken = woken || (e->start_us >= t - kAtOnceUs && e->start_us <= t + kWokenWithinUs);
  }
  return woken;
}

// The trace's collectives due beside compute: `asleep`, their thread woken for them; `resumed`, their thread
// awake from the collective before, whose end woke the compute thread.
struct DueSamples {
  std::vector<DueBesideCompute> asleep, resumed;
};

// Adds one iteration's collectives due beside compute (`events`: that iteration's spans of every rank).
void add_due_beside_compute(const std::vector<TraceEvent>& events, DueSamples& out) {
  std::map<int32_t, RankSpans> ranks;
  for (const TraceEvent& e : events) {
    RankSpans& r = ranks[e.rank];
    if (e.stream == 1)
      r.comm.push_back(&e);
    else if (const auto kind = kinds_by_name().find(e.kind);
             kind == kinds_by_name().end() || !collective(kind->second))
      r.compute.push_back(&e);
    if (e.args.contains("op") && e.args["op"].is_number_integer())
      r.end_of[e.args["op"].get<int64_t>()] = end_us(e);
  }
  const auto by_start = [](const TraceEvent* a, const TraceEvent* b) { return a->start_us < b->start_us; };
  for (auto& [rank, r] : ranks) {
    std::sort(r.compute.begin(), r.compute.end(), by_start);
    std::sort(r.comm.begin(), r.comm.end(), by_start);
    for (size_t i = 1; i < r.comm.size(); ++i) {  // the first has no sleep to measure
      const TraceEvent& e = *r.comm[i];
      const double before = end_us(*r.comm[i - 1]);
      if (deps_of(e).empty()) continue;
      const double due = deps_end(r, deps_of(e), before);
      if (!std::isfinite(due)) continue;
      const bool awake = before >= due - kAtOnceUs;
      if (awake && !compute_woken_at(r, before)) continue;
      const double from = awake ? before : due;
      if (const std::optional<double> idle = busy_until(r, from))
        (awake ? out.resumed : out.asleep)
            .push_back({from - before, std::max(0.0, e.start_us - from), std::max(0.0, *idle - from)});
    }
  }
}

// The collectives due beside compute over `iterations` where the trace has them, else over its one iteration.
DueSamples due_beside_compute(const TraceFile& trace,
                              const std::vector<std::vector<TraceEvent>>& iterations) {
  DueSamples out;
  for (const std::vector<TraceEvent>& events : iterations) add_due_beside_compute(events, out);
  if (iterations.empty()) add_due_beside_compute(trace.events, out);
  return out;
}

struct WaitFit {
  double wait = 0, decay = 0, error = std::numeric_limits<double>::infinity();
};

// Least squares of the measured waits against the simulator's, min(wait x exp(-slept / decay), until idle);
// without `decaying`, the wait alone (decay 0).
WaitFit fit_wait(const std::vector<DueBesideCompute>& due, bool decaying) {
  WaitFit best;
  std::vector<double> factor(due.size());
  for (int d = 0; d <= (decaying ? kDecays : 0); ++d) {
    const double decay = d == 0 ? 0 : kFirstDecayUs * std::pow(kDecayGrowth, d - 1);
    for (size_t k = 0; k < due.size(); ++k) factor[k] = decay > 0 ? std::exp(-due[k].slept / decay) : 1;
    for (double wait = 0; wait <= kMaxWaitUs; wait += kWaitStepUs) {
      double error = 0;
      for (size_t k = 0; k < due.size(); ++k) {
        const double e = due[k].lag - std::min(wait * factor[k], due[k].until_idle);
        error += e * e;
      }
      if (error < best.error) best = {wait, decay, error};
    }
  }
  return best;
}

// "2050 us, less by exp(-slept / 3852 us)", or "1590 us" without a decay.
std::string wait_text(double wait, double decay) {
  return decay > 0 ? fmt::format("{:.0f} us, less by exp(-slept / {:.0f} us)", wait, decay)
                   : fmt::format("{:.0f} us", wait);
}

// One wait fitted on its samples and reported as `name` (`when`: which collectives they are), from the
// profile's wait and decay; nothing when there are too few samples (the report says so).
std::optional<WaitFit> fit_reported(const std::vector<DueBesideCompute>& due, bool decaying, const char* name,
                                    const char* when, double wait, double decay, std::string& report) {
  if (due.size() < kMinSamples) {
    report += fmt::format("{}: not fitted ({} collectives came due {}; {} needed)\n", name, due.size(), when,
                          kMinSamples);
    return std::nullopt;
  }
  double lag = 0;
  for (const DueBesideCompute& d : due) lag += d.lag;
  const bool with_decay = decaying && due.size() >= kMinSamplesForDecay;
  const WaitFit fit = fit_wait(due, with_decay);
  report += fmt::format(
      "{} ({} collectives due {}, mean wait {:.0f} us): {} -> {}{}\n", name, due.size(), when,
      lag / double(due.size()), wait_text(wait, decay), wait_text(fit.wait, fit.decay),
      decaying && !with_decay
          ? fmt::format(" (no decay: {} collectives fit one, {} needed)", due.size(), kMinSamplesForDecay)
          : "");
  return fit;
}

}  // namespace

void fit_comm_start(const TraceFile& trace, const std::vector<std::vector<TraceEvent>>& iterations,
                    Profile& p, std::string& report) {
  const DueSamples due = due_beside_compute(trace, iterations);
  if (iterations.size() > 1)
    report += fmt::format("comm start: {} iterations of the trace pooled\n", iterations.size());
  InterferenceProfile& i = p.interference;
  if (const auto fit =
          fit_reported(due.asleep, true, "comm start wait",
                       "while their rank's compute had an op ready, with their deps in the trace",
                       i.comm_start_wait_us, i.comm_start_wait_decay_us, report)) {
    i.comm_start_wait_us = fit->wait;
    i.comm_start_wait_decay_us = fit->decay;
  }
  if (const auto fit =
          fit_reported(due.resumed, false, "comm resume wait", "as the one before woke the compute thread",
                       i.comm_resume_wait_us, 0, report))
    i.comm_resume_wait_us = fit->wait;
}

}  // namespace domino::prof::calibration
