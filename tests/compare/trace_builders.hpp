// trace_builders.hpp: small in-memory traces for the comparison tests, and paths of the fixture traces.
#pragma once

#include <string>
#include <vector>

#include "sim/trace/timeline.hpp"

namespace domino::test {

inline TraceEvent span(const std::string& id, const std::string& kind, int rank, int stream, double start, double dur) {
  TraceEvent e;
  e.id = id;
  e.kind = kind;
  e.rank = rank;
  e.stream = stream;
  e.start_us = start;
  e.dur_us = dur;
  e.args = nlohmann::json::object();
  return e;
}

// An op's span with the executor's args (op index, bytes; no GEMM shape), as the calibration reads them.
inline TraceEvent op_event(int rank, int stream, int op, const std::string& kind, double start, double dur,
                           double bytes) {
  TraceEvent e = span(kind + "." + std::to_string(op), kind, rank, stream, start, dur);
  e.bytes = bytes;
  e.args = {{"op", op}, {"m", 0}, {"n", 0}, {"k", 0}, {"flops", 0}, {"bytes", bytes}};
  return e;
}

// One timed iteration of `events` as a measured trace's domino.iteration_spans row: [rank, op, start, end].
inline nlohmann::json iteration_spans_of(const std::vector<TraceEvent>& events) {
  nlohmann::json one = nlohmann::json::array();
  for (const TraceEvent& e : events) one.push_back({e.rank, e.args["op"], e.start_us, e.start_us + e.dur_us});
  return one;
}

inline TraceFile trace(const std::string& path, std::vector<TraceEvent> events,
                       nlohmann::json meta = nlohmann::json::object()) {
  TraceFile t;
  t.path = path;
  t.events = std::move(events);
  t.meta = std::move(meta);
  if (t.meta.contains("source")) t.source = t.meta["source"].get<std::string>();
  return t;
}

inline std::string trace_data(const std::string& name) { return std::string(DOMINO_TEST_DATA) + "/data/traces/" + name; }

}  // namespace domino::test
