// trace_reader.cpp: read_trace, the strict reader of the Chrome traces the simulator and the executor
// write (schema in sim/trace/timeline.hpp). Every defect is a BadInput naming the file and the event, because
// a silently skipped op would show up later as a wrong error figure rather than as a broken file.
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "sim/base/error.hpp"
#include "sim/base/json_text.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {
namespace {

using nlohmann::json;

// "traceEvents[12] (L3.fwd.mlp.fc1)": where an event is, for messages.
std::string event_where(size_t index, const json& event) {
  std::string s = "traceEvents[" + std::to_string(index) + "]";
  if (event.is_object()) {
    auto it = event.find("name");
    if (it != event.end() && it->is_string()) s += " (" + it->get<std::string>() + ")";
  }
  return s;
}

class EventChecker {
 public:
  EventChecker(const std::string& path, size_t index, const json& event)
      : path_(path), where_(event_where(index, event)), event_(event) {}

  [[noreturn]] void fail(const std::string& what) const { throw_bad_input(path_ + ": " + where_ + ": " + what); }

  const json& field(const char* key) const {
    auto it = event_.find(key);
    if (it == event_.end()) fail(std::string("missing field \"") + key + "\"");
    return *it;
  }
  std::string string_field(const char* key) const {
    const json& v = field(key);
    if (!v.is_string()) fail(std::string("field \"") + key + "\" must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  double number_field(const char* key) const {
    const json& v = field(key);
    if (!v.is_number()) fail(std::string("field \"") + key + "\" must be a number, got " + v.dump());
    double d = v.get<double>();
    if (!std::isfinite(d)) fail(std::string("field \"") + key + "\" is not finite");
    return d;
  }
  int32_t int_field(const char* key) const {
    const json& v = field(key);
    if (!v.is_number_integer()) fail(std::string("field \"") + key + "\" must be an integer, got " + v.dump());
    int64_t i = v.get<int64_t>();
    if (i < 0 || i > 1'000'000) fail(std::string("field \"") + key + "\" out of range: " + v.dump());
    return static_cast<int32_t>(i);
  }

 private:
  const std::string& path_;
  std::string where_;
  const json& event_;
};

// A spread time: a finite number >= 0.
double read_spread_time(const EventChecker& check, const json& args, const char* key) {
  const json& x = args.at(key);
  if (!x.is_number() || !(x.get<double>() >= 0 && x.get<double>() <= kMaxTimeUs))
    check.fail(std::string("args.") + key + " must be a time from 0 to 1e12 us, got " + x.dump());
  return x.get<double>();
}

// args.dur_iterations/dur_p10/dur_median/dur_p90: all four or none, counts and times that make sense;
// dur_mean and dur_typical_mean (optional) only beside them.
DurationSpread read_duration_spread(const EventChecker& check, const json& args) {
  const char* keys[4] = {"dur_iterations", "dur_p10", "dur_median", "dur_p90"};
  int present = 0;
  for (const char* key : keys) present += args.contains(key) ? 1 : 0;
  if (present == 0) {
    for (const char* key : {"dur_mean", "dur_typical_mean"})
      if (args.contains(key))
        check.fail(std::string("args.") + key +
                   " needs dur_iterations, dur_p10, dur_median and dur_p90 beside it");
    return {};
  }
  if (present < 4) check.fail("args.dur_iterations, dur_p10, dur_median and dur_p90 go together; some are missing");
  const json& n = args.at("dur_iterations");
  if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > 1'000'000)
    check.fail("args.dur_iterations must be a positive integer, got " + n.dump());
  double v[3];
  for (int i = 0; i < 3; ++i) v[i] = read_spread_time(check, args, keys[i + 1]);
  if (v[0] > v[1] || v[1] > v[2])
    check.fail("args.dur_p10 <= dur_median <= dur_p90 does not hold: " + json(v[0]).dump() + ", " +
               json(v[1]).dump() + ", " + json(v[2]).dump());
  const double mean = args.contains("dur_mean") ? read_spread_time(check, args, "dur_mean") : -1;
  const double typical =
      args.contains("dur_typical_mean") ? read_spread_time(check, args, "dur_typical_mean") : -1;
  return {int32_t(n.get<int64_t>()), v[0], v[1], v[2], mean, typical};
}

TraceEvent read_complete_event(const std::string& path, size_t index, const json& e) {
  EventChecker check(path, index, e);
  TraceEvent ev;
  ev.id = check.string_field("name");
  if (ev.id.empty()) check.fail("empty \"name\" (the op id)");
  ev.kind = check.string_field("cat");
  ev.rank = check.int_field("pid");
  ev.stream = check.int_field("tid");
  if (ev.stream > 1) check.fail("\"tid\" must be 0 (compute) or 1 (communication), got " + std::to_string(ev.stream));
  ev.start_us = check.number_field("ts");
  ev.dur_us = check.number_field("dur");
  if (ev.dur_us < 0) check.fail("negative \"dur\" " + e.at("dur").dump());
  if (std::abs(ev.start_us) > kMaxTimeUs || ev.dur_us > kMaxTimeUs)
    check.fail("\"ts\" " + e.at("ts").dump() + " or \"dur\" " + e.at("dur").dump() +
               " beyond 1e12 us (11.6 days): not a training step's time");
  auto args = e.find("args");
  if (args != e.end()) {
    if (!args->is_object()) check.fail("\"args\" must be an object");
    ev.args = *args;
    for (const char* key : {"flops", "bytes"}) {
      auto v = args->find(key);
      if (v == args->end()) continue;
      if (!v->is_number()) check.fail(std::string("args.") + key + " must be a number, got " + v->dump());
      (std::string(key) == "flops" ? ev.flops : ev.bytes) = v->get<double>();
    }
    ev.spread = read_duration_spread(check, *args);
    if (args->contains("arrival_wait_us")) {
      ev.arrival_wait_us = read_spread_time(check, *args, "arrival_wait_us");
      if (ev.arrival_wait_us > ev.dur_us + 1e-6 * (1 + ev.dur_us))
        check.fail("args.arrival_wait_us " + args->at("arrival_wait_us").dump() +
                   " is longer than the span's \"dur\" " + e.at("dur").dump() + " (the wait is part of it)");
    }
  } else {
    ev.args = json::object();
  }
  return ev;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input(path + ": cannot open trace file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

json parse_json(const std::string& text, const std::string& path) {
  JsonParse parsed = parse_json_text(text);
  if (!parsed.failure) return std::move(parsed.value);
  const JsonFailure& f = *parsed.failure;
  if (f.kind == JsonFailure::Kind::TooDeep) throw_bad_input(path + ": " + f.message + ": not a trace");
  // A syntax error or a number beyond a double's range: nlohmann's message already says where.
  throw_bad_input(path + ": not a JSON trace: " + f.message);
}

}  // namespace

TraceFile read_trace(const std::string& path) { return read_trace_string(read_file(path), path); }

double mean_iteration_us(const TraceFile& trace) {
  const auto samples = trace.meta.find("iteration_samples_us");
  if (samples == trace.meta.end()) return 0;
  if (!samples->is_array())
    throw_bad_input(trace.path + ": domino.iteration_samples_us must be an array of times, not " +
                    std::string(samples->type_name()));
  if (samples->empty()) return 0;
  double sum = 0;
  for (const json& v : *samples) {
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= kMaxTimeUs))
      throw_bad_input(trace.path + ": domino.iteration_samples_us holds " + v.dump() + ", not a time");
    sum += v.get<double>();
  }
  return sum / double(samples->size());
}

TraceFile read_trace_string(const std::string& text, const std::string& path) {
  json doc = parse_json(text, path);
  if (!doc.is_object()) throw_bad_input(path + ": expected a JSON object with \"traceEvents\", got " + std::string(doc.type_name()));
  auto events = doc.find("traceEvents");
  if (events == doc.end()) throw_bad_input(path + ": missing \"traceEvents\" (not a Chrome trace?)");
  if (!events->is_array()) throw_bad_input(path + ": \"traceEvents\" must be an array");

  TraceFile trace;
  trace.path = path;
  trace.meta = json::object();
  auto meta = doc.find("domino");
  if (meta != doc.end()) {
    if (!meta->is_object()) throw_bad_input(path + ": \"domino\" must be an object");
    trace.meta = *meta;
    auto source = meta->find("source");
    if (source != meta->end()) {
      if (!source->is_string()) throw_bad_input(path + ": domino.source must be a string");
      trace.source = source->get<std::string>();
    }
  }

  std::set<std::pair<int32_t, std::string>> seen;  // (rank, id): one span per op and rank
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) throw_bad_input(path + ": traceEvents[" + std::to_string(i) + "] is not an object");
    auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string())
      throw_bad_input(path + ": " + event_where(i, e) + ": missing string field \"ph\"");
    const std::string phase = ph->get<std::string>();
    if (phase == "X") {
      TraceEvent ev = read_complete_event(path, i, e);
      if (!seen.emplace(ev.rank, ev.id).second)
        throw_bad_input(path + ": " + event_where(i, e) + ": op appears twice on rank " + std::to_string(ev.rank) +
                        " (a trace holds one iteration: one span per op and rank)");
      trace.events.push_back(std::move(ev));
    } else if (phase != "M") {
      trace.other_events.push_back(e);
    }
  }
  if (trace.events.empty()) throw_bad_input(path + ": no complete (\"ph\": \"X\") events: nothing to compare");
  return trace;
}

}  // namespace domino
