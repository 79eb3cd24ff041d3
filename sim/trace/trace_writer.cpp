// trace_writer.cpp: Chrome-trace JSON (Perfetto, chrome://tracing) of a timeline, the same schema for
// predicted and measured runs (docs/trace-format.md). Times are microseconds, as the format requires.
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <set>

#include "sim/base/error.hpp"
#include "sim/base/files.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {

namespace {

using nlohmann::json;

json op_args(const Op& op) {
  json args{{"op", op.index},
            {"layer", op.layer},
            {"phase", to_string(op.phase)},
            {"block", to_string(op.block)},
            {"slice", op.slice},
            {"chunk", op.chunk},
            {"code", to_string(op.code)},
            {"dtype", to_string(op.dtype)},
            {"m", op.m},
            {"n", op.n},
            {"k", op.k},
            {"flops", op.flops},
            {"bytes", op.bytes}};
  if (op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter) args["reduce"] = to_string(op.attrs.reduce);
  if (op.attrs.row_blocks > 1) args["row_blocks"] = op.attrs.row_blocks;  // a GEMM run as that many products
  if (op.chunk >= 0 && memory_bound(op.kind))
    args["chunks"] = op.attrs.chunks;  // the row block's column chunks (profile.hpp chunk_rows)
  // What the op waited for on the other stream: with the spans, when it became free to start.
  if (!op.deps.empty()) args["deps"] = op.deps;
  return args;
}

json metadata_event(const char* what, int32_t pid, int32_t tid, const std::string& name) {
  json e{{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

// For each collective, the first op in program order that lists it as a dep (the op that waits on it).
std::vector<int32_t> first_waiters(const Schedule& schedule) {
  std::vector<int32_t> waiter(schedule.ops.size(), -1);
  for (const Op& op : schedule.ops) {
    for (int32_t d : op.deps) {
      if (d >= 0 && static_cast<size_t>(d) < schedule.ops.size() && collective(schedule.ops[d].kind) &&
          waiter[d] < 0) {
        waiter[d] = op.index;
      }
    }
  }
  return waiter;
}

}  // namespace

// Not the ops' bytes or FLOPs, which a backend's storage type changes.
std::string schedule_fingerprint(const Schedule& schedule) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const Op& op : schedule.ops) {
    for (const char c : op_id(op)) mix(uint64_t(uint8_t(c)));
    for (const int64_t v : {int64_t(op.kind), int64_t(op.code), int64_t(op.stream), op.m, op.n, op.k})
      mix(uint64_t(v));
    for (const int32_t d : op.deps) mix(uint64_t(int64_t(d)));
    mix(~uint64_t(0));  // op boundary
  }
  return fmt::format("{:016x}", h);
}

json trace_json(const Schedule& schedule, const Timeline& timeline, const json& meta) {
  const std::string source = timeline.source.empty() ? "predicted" : timeline.source;
  json events = json::array();
  std::set<int32_t> ranks;
  for (const OpSpan& s : timeline.spans) ranks.insert(s.rank);
  for (int32_t r : ranks) {
    events.push_back(metadata_event("process_name", r, -1, "rank " + std::to_string(r) + " (" + source + ")"));
    events.push_back(metadata_event("thread_name", r, 0, "compute"));
    events.push_back(metadata_event("thread_name", r, 1, "communication"));
  }

  // (rank, op) -> span, to anchor flow arrows.
  std::map<std::pair<int32_t, int32_t>, const OpSpan*> by_op;
  for (const OpSpan& s : timeline.spans) {
    if (s.op < 0 || static_cast<size_t>(s.op) >= schedule.ops.size()) {
      throw_runtime("timeline span names op " + std::to_string(s.op) + ", which the schedule does not have (" +
                    std::to_string(schedule.ops.size()) + " ops)");
    }
    const Op& op = schedule.ops[s.op];
    json args = op_args(op);
    if (s.spread.samples > 0) {
      args["dur_iterations"] = s.spread.samples;
      args["dur_p10"] = s.spread.p10_us;
      args["dur_median"] = s.spread.median_us;
      args["dur_p90"] = s.spread.p90_us;
      if (s.spread.has_mean()) args["dur_mean"] = s.spread.mean_us;
      if (s.spread.has_typical_mean()) args["dur_typical_mean"] = s.spread.typical_mean_us;
    }
    if (s.arrival_wait_us >= 0) args["arrival_wait_us"] = s.arrival_wait_us;
    events.push_back(json{{"name", op_id(op)},
                          {"cat", to_string(op.kind)},
                          {"ph", "X"},
                          {"ts", s.start_us},
                          {"dur", s.end_us - s.start_us},
                          {"pid", s.rank},
                          {"tid", static_cast<int>(op.stream)},
                          {"args", std::move(args)}});
    by_op[{s.rank, s.op}] = &s;
  }

  const std::vector<int32_t> waiter = first_waiters(schedule);
  int64_t flow_id = 0;
  for (const auto& [key, span] : by_op) {
    const int32_t w = waiter[key.second];
    if (w < 0) continue;
    const auto it = by_op.find({key.first, w});
    if (it == by_op.end()) continue;
    const Op& ar = schedule.ops[key.second];
    const Op& wop = schedule.ops[w];
    ++flow_id;
    events.push_back(json{{"name", "wait"}, {"cat", "dependency"}, {"ph", "s"}, {"id", flow_id},
                          {"pid", key.first}, {"tid", static_cast<int>(ar.stream)}, {"ts", span->start_us}});
    events.push_back(json{{"name", "wait"}, {"cat", "dependency"}, {"ph", "f"}, {"bp", "e"}, {"id", flow_id},
                          {"pid", key.first}, {"tid", static_cast<int>(wop.stream)}, {"ts", it->second->start_us}});
  }

  json domino = meta.is_object() ? meta : json::object();
  domino["source"] = source;
  domino["model"] = schedule.model.name;
  domino["strategy"] = schedule.plan.strategy;
  domino["tp"] = schedule.plan.tp;
  domino["seq_len"] = schedule.model.seq_len;
  domino["micro_batch"] = schedule.model.micro_batch;
  domino["schedule_fingerprint"] = schedule_fingerprint(schedule);
  domino["ranks"] = timeline.ranks;
  domino["ops"] = schedule.ops.size();
  domino["iteration_time_us"] = timeline.iteration_us;
  domino["iteration_samples_us"] = timeline.iteration_samples_us;
  domino["peak_memory_bytes"] = timeline.peak_memory_bytes;
  if (timeline.source == "measured") {
    domino["rank_clocks"] = timeline.rank_start_offsets_us.empty() ? "per-rank" : "shared";
    if (!timeline.rank_start_offsets_us.empty())
      domino["rank_start_offsets_us"] = timeline.rank_start_offsets_us;
    if (!timeline.iteration_spans.empty()) {
      json iterations = json::array();
      for (const std::vector<OpSpan>& spans : timeline.iteration_spans) {
        json rows = json::array();
        for (const OpSpan& s : spans) rows.push_back(json::array({s.rank, s.op, s.start_us, s.end_us}));
        iterations.push_back(std::move(rows));
      }
      domino["iteration_spans"] = std::move(iterations);
    }
  }
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"domino", std::move(domino)}};
}

void write_trace(const std::string& path, const Schedule& schedule, const Timeline& timeline, const json& meta) {
  write_file_atomic(path, trace_json(schedule, timeline, meta).dump() + "\n");
}

}  // namespace domino
