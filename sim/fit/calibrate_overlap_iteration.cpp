// calibrate_overlap_iteration.cpp: the compute's slowdown beside a collective fitted on an overlapped run's
// iteration time (--fit interference_iteration): the schedule the trace ran, rebuilt from its header, is
// simulated with the calibrated profile, and the slowdown is the one with which the simulated iteration
// equals the measured one.
//
// Why the iteration and not the ops: on a CPU rank whose compute and communication threads share a core, what
// a collective beside compute costs lands mostly between the ops (the compute stream idles while the
// collective waits for a core, its peer's included), not in them; after the per-op fits (comm_delay,
// comm_start) the overlapped calibration run itself still took 3-18 % longer than predicted in 22 of 24
// configurations (docs/fidelity.md, "The compute's loss beside collectives, fitted on the overlapped run").
// The slowdown then stands for all of that loss, as sync_us does for the skew of a run whose streams do not
// overlap (fit_skew_to_iteration).
#include <fmt/format.h>

#include <optional>

#include "sim/base/error.hpp"
#include "sim/engine/simulator.hpp"
#include "sim/fit/calibrate_terms.hpp"
#include "sim/model/model_spec.hpp"

namespace domino::prof::calibration {

namespace {

constexpr int kBisections = 40;

const nlohmann::json& header_field(const TraceFile& trace, const char* key, const char* why) {
  const auto it = trace.meta.find(key);
  if (it == trace.meta.end() || it->is_null())
    throw_bad_input(fmt::format(
        "{}: --fit interference_iteration needs the trace's {} (domino.{}, written by domino-exec)",
        trace.path, why, key));
  return *it;
}

int header_count(const TraceFile& trace, const char* key, const char* why) {
  return int(whole_number(trace, nullptr, std::string("domino.") + key, header_field(trace, key, why), 1,
                          1'000'000));
}

// A shape field traces written before it lack: the model's own then (the fingerprint check tells the rest).
std::optional<int> optional_header_count(const TraceFile& trace, const char* key, const char* why) {
  if (!trace.meta.contains(key) || trace.meta.at(key).is_null()) return std::nullopt;
  return header_count(trace, key, why);
}

std::string header_string(const TraceFile& trace, const char* key, const char* why) {
  const nlohmann::json& v = header_field(trace, key, why);
  if (!v.is_string() || v.get<std::string>().empty())
    throw_bad_input(
        fmt::format("{}: domino.{} must be a non-empty string, got {}", trace.path, key, v.dump()));
  return v.get<std::string>();
}

double simulated_iteration_us(const Schedule& schedule, const Profile& p) {
  SimOptions options;
  options.record_timeline = false;
  options.memory = false;
  return simulate(schedule, CostModel(p), options).iteration_us;
}

}  // namespace

Schedule schedule_of_trace(const TraceFile& trace) {
  ModelOverrides overrides;
  overrides.tp = header_count(trace, "tp", "TP degree");
  overrides.seq_len = optional_header_count(trace, "seq_len", "sequence length");
  overrides.micro_batch = optional_header_count(trace, "micro_batch", "micro-batch");
  const std::string model_name = header_string(trace, "model", "model");
  const std::string strategy = header_string(trace, "strategy", "named strategy");
  const ModelSpec model = load_model(model_name, overrides);
  BuildOptions build;
  if (trace.meta.contains("optimizer") && !trace.meta.at("optimizer").is_null()) {
    const std::string name = header_string(trace, "optimizer", "optimizer");
    const std::optional<OptimizerKind> kind = optimizer_kind_named(name);
    if (!kind)
      throw_bad_input(
          fmt::format("{}: domino.optimizer '{}' is no optimizer domino-exec runs", trace.path, name));
    build.optimizer = *kind;
  }
  Schedule schedule;
  try {
    schedule = build_schedule(model, make_strategy_plan(strategy, model), build);
  } catch (const Error& e) {
    throw_bad_input(
        fmt::format("{}: --fit interference_iteration rebuilds the run's schedule from its model '{}' "
                    "and strategy '{}', which failed: {}",
                    trace.path, model_name, strategy, e.what()));
  }
  const auto fingerprint = trace.meta.find("schedule_fingerprint");
  if (fingerprint != trace.meta.end() && fingerprint->is_string() &&
      fingerprint->get<std::string>() != schedule_fingerprint(schedule))
    throw_bad_input(fmt::format(
        "{}: the schedule of model '{}', strategy '{}' rebuilt here is not the one the "
        "trace ran (schedule_fingerprint {} in the trace, {} rebuilt): give the trace of a "
        "named strategy run with this build's model files",
        trace.path, model_name, strategy, fingerprint->get<std::string>(), schedule_fingerprint(schedule)));
  return schedule;
}

void fit_compute_slowdown_to_iteration(const Schedule& schedule, double iteration_us, Profile& p,
                                       std::string& report) {
  if (p.gpu)
    throw_bad_input(
        "--fit interference_iteration: the profile has a gpu section (SM and HBM sharing), "
        "which has no flat compute slowdown to fit");
  const double before = p.interference.compute_slowdown_during_comm;
  const auto iteration_with = [&](double slowdown) {
    Profile q = p;
    q.interference.compute_slowdown_during_comm = slowdown;
    return simulated_iteration_us(schedule, q);
  };
  const double lowest = iteration_with(0), highest = iteration_with(kMaxFittedSlowdown);
  if (!(highest > lowest * (1 + 1e-9)))
    throw_bad_input(fmt::format(
        "--fit interference_iteration: no collective of this run ran beside compute in the simulation "
        "(predicted {:.1f} ms with any slowdown): it needs an overlapped plan's trace, such as "
        "slices:2x1:batch",
        lowest / 1e3));
  double fitted = 0;
  std::string note;
  if (iteration_us <= lowest) {
    note =
        fmt::format(" (the run took no longer than predicted without any slowdown, {:.1f} ms)", lowest / 1e3);
  } else if (iteration_us >= highest) {
    fitted = kMaxFittedSlowdown;
    note = fmt::format(" (the end of the range: predicted {:.1f} ms with it)", highest / 1e3);
  } else {
    double lo = 0, hi = kMaxFittedSlowdown;  // iteration_with(lo) < iteration_us <= iteration_with(hi)
    for (int step = 0; step < kBisections; ++step) {
      const double mid = 0.5 * (lo + hi);
      (iteration_with(mid) < iteration_us ? lo : hi) = mid;
    }
    fitted = hi;
  }
  p.interference.compute_slowdown_during_comm = fitted;
  report += fmt::format(
      "compute slowdown beside collectives from the iteration time ({:.1f} ms measured; {:.1f} ms predicted "
      "with {:.3g}): {:.3g} -> {:.3g}{}\n",
      iteration_us / 1e3, iteration_with(before) / 1e3, before, before, fitted, note);
}

}  // namespace domino::prof::calibration
