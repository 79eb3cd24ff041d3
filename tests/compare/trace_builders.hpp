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
