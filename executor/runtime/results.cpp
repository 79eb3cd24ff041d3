// results.cpp: rank reports (JSON text through the rendezvous store) and their merge (see results.hpp).
#include "executor/runtime/results.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

#include "sim/base/error.hpp"

namespace domino {

std::string rank_result_to_text(const RankResult& r) {
  nlohmann::json iterations = nlohmann::json::array();
  for (const IterationRecord& it : r.iterations) {
    nlohmann::json spans = nlohmann::json::array();
    for (const OpTiming& t : it.spans) spans.push_back({t.op, t.start_us, t.end_us});
    iterations.push_back({{"timed", it.timed},
                          {"time_us", it.time_us},
                          {"start_us", it.start_us},
                          {"loss", std::isfinite(it.loss) ? nlohmann::json(it.loss) : nlohmann::json(nullptr)},
                          {"spans", std::move(spans)}});
  }
  return nlohmann::json{{"rank", r.rank},
                        {"peak_memory_bytes", r.peak_memory_bytes},
                        {"huge_page_bytes", r.huge_page_bytes},
                        {"clock_domain", r.clock_domain},
                        {"iterations", iterations}}
      .dump();
}

RankResult rank_result_from_text(const std::string& text) {
  RankResult r;
  try {
    const auto j = nlohmann::json::parse(text);
    r.rank = j.at("rank").get<int>();
    r.peak_memory_bytes = j.at("peak_memory_bytes").get<int64_t>();
    r.huge_page_bytes = j.value("huge_page_bytes", int64_t(-1));
    r.clock_domain = j.at("clock_domain").get<std::string>();
    for (const auto& it : j.at("iterations")) {
      IterationRecord rec;
      rec.timed = it.at("timed").get<bool>();
      rec.time_us = it.at("time_us").get<double>();
      rec.start_us = it.at("start_us").get<double>();
      rec.loss = it.at("loss").is_null() ? NAN : it.at("loss").get<float>();
      for (const auto& s : it.at("spans")) rec.spans.push_back({s.at(0).get<int32_t>(), s.at(1).get<double>(), s.at(2).get<double>()});
      r.iterations.push_back(std::move(rec));
    }
  } catch (const nlohmann::json::exception& e) {
    throw_bad_input(std::string("malformed rank report: ") + e.what());
  }
  return r;
}

namespace {

// Whether the ranks' iteration starts compare: every rank reads one clock and the ranks are numbered 0 ..
// n-1.
bool on_one_clock(const std::vector<RankResult>& ranks) {
  for (const RankResult& r : ranks)
    if (r.clock_domain.empty() || r.clock_domain != ranks[0].clock_domain || r.rank < 0 ||
        size_t(r.rank) >= ranks.size())
      return false;
  return true;
}

// Indexed by rank: how long after the earliest rank each started iteration i (ranks on one clock).
std::vector<double> start_offsets(const std::vector<RankResult>& ranks, size_t i) {
  double earliest = std::numeric_limits<double>::infinity();
  for (const RankResult& r : ranks) earliest = std::min(earliest, r.iterations[i].start_us);
  std::vector<double> offsets(ranks.size(), 0.0);
  for (const RankResult& r : ranks) offsets[size_t(r.rank)] = r.iterations[i].start_us - earliest;
  return offsets;
}

// The typical iterations among the timed ones (positions into `samples`, the iteration times): the middle
// half of them by time, n/4 left out at either end (DurationSpread::typical_mean_us); all of them below four.
std::vector<bool> typical_iterations(const std::vector<double>& samples) {
  std::vector<size_t> by_time(samples.size());
  std::iota(by_time.begin(), by_time.end(), size_t(0));
  std::stable_sort(by_time.begin(), by_time.end(),
                   [&](size_t a, size_t b) { return samples[a] < samples[b]; });
  const size_t cut = samples.size() / 4;
  std::vector<bool> typical(samples.size(), false);
  for (size_t j = cut; j < samples.size() - cut; ++j) typical[by_time[j]] = true;
  return typical;
}

// Per rank, each op's duration over the timed iterations (`samples`: their times), attached to the
// representative iteration's spans.
void attach_duration_spread(const std::vector<RankResult>& ranks, const std::vector<size_t>& timed,
                            const std::vector<double>& samples, Timeline& tl) {
  const std::vector<bool> typical = typical_iterations(samples);
  struct Durations {
    std::vector<double> all, typical;
  };
  std::map<std::pair<int32_t, int32_t>, Durations> durations;  // (rank, op)
  for (const RankResult& r : ranks)
    for (size_t k = 0; k < timed.size(); ++k)
      for (const OpTiming& t : r.iterations[timed[k]].spans) {
        Durations& d = durations[{r.rank, t.op}];
        d.all.push_back(t.end_us - t.start_us);
        if (typical[k]) d.typical.push_back(t.end_us - t.start_us);
      }
  const auto mean = [](const std::vector<double>& v) {
    return v.empty() ? -1.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  };
  for (OpSpan& s : tl.spans) {
    const auto it = durations.find({s.rank, s.op});
    if (it == durations.end()) continue;
    std::vector<double>& d = it->second.all;
    std::sort(d.begin(), d.end());
    s.spread = {
        int32_t(d.size()), percentile_sorted(d, 0.1), percentile_sorted(d, 0.5), percentile_sorted(d, 0.9),
        mean(d),           mean(it->second.typical)};
  }
}

std::vector<std::vector<double>> compute_busy(const std::vector<const RankResult*>& by_rank,
                                              const std::vector<size_t>& timed, const Schedule& schedule) {
  std::vector<std::vector<double>> out;
  for (const RankResult* r : by_rank) {
    std::vector<double> busy;
    for (size_t i : timed) {
      double sum = 0;
      for (const OpTiming& t : r->iterations[i].spans) {
        if (t.op < 0 || size_t(t.op) >= schedule.ops.size())
          throw_runtime("rank " + std::to_string(r->rank) + " reported op " + std::to_string(t.op) +
                        ", which the schedule does not have");
        if (schedule.ops[size_t(t.op)].stream == Stream::Compute) sum += t.end_us - t.start_us;
      }
      busy.push_back(sum);
    }
    out.push_back(std::move(busy));
  }
  return out;
}

// Every rank's spans of iteration `i`, shifted by the rank's start offset (`offsets`, by rank; empty where
// the ranks do not read one clock: each counts from its own start).
std::vector<OpSpan> spans_on_one_clock(const std::vector<RankResult>& ranks, size_t i,
                                       const std::vector<double>& offsets) {
  std::vector<OpSpan> out;
  for (const RankResult& r : ranks) {
    const double shift = offsets.empty() ? 0.0 : offsets[size_t(r.rank)];
    for (const OpTiming& t : r.iterations[i].spans)
      out.push_back({t.op, int32_t(r.rank), t.start_us + shift, t.end_us + shift, {}});
  }
  return out;
}

}  // namespace

RunSummary summarize(const std::vector<RankResult>& ranks, const Schedule& schedule, bool every_iteration) {
  RunSummary out;
  if (ranks.empty()) throw_runtime("no rank reported a result");
  const size_t n_iter = ranks[0].iterations.size();
  for (const RankResult& r : ranks)
    if (r.iterations.size() != n_iter) throw_runtime("ranks ran different numbers of iterations");
  std::vector<size_t> timed;
  std::vector<double> samples;
  for (size_t i = 0; i < n_iter; ++i) {
    if (!ranks[0].iterations[i].timed) {
      ++out.warmup;
    } else {
      double t = 0;
      for (const RankResult& r : ranks) t = std::max(t, r.iterations[i].time_us);
      timed.push_back(i);
      samples.push_back(t);
    }
  }
  for (const IterationRecord& it : ranks[0].iterations) out.losses.push_back(it.loss);
  out.mean_us =
      samples.empty() ? 0 : std::accumulate(samples.begin(), samples.end(), 0.0) / double(samples.size());
  out.median_us = percentile(samples, 0.5);
  out.p10_us = percentile(samples, 0.1);
  out.p90_us = percentile(samples, 0.9);
  Timeline& tl = out.timeline;
  tl.source = "measured";
  tl.ranks = int32_t(ranks.size());
  tl.iteration_us = out.median_us;
  tl.iteration_samples_us = samples;
  std::vector<std::vector<double>> offsets;  // per timed iteration, where the ranks read one clock
  if (on_one_clock(ranks))
    for (size_t i : timed) {
      offsets.push_back(start_offsets(ranks, i));
      out.start_skew_us.push_back(*std::max_element(offsets.back().begin(), offsets.back().end()));
    }
  if (!timed.empty()) {
    // The timed iteration closest to the median stands for the run in the trace.
    size_t pick = 0;
    for (size_t k = 1; k < timed.size(); ++k)
      if (std::abs(samples[k] - out.median_us) < std::abs(samples[pick] - out.median_us)) pick = k;
    if (!offsets.empty()) tl.rank_start_offsets_us = offsets[pick];
    tl.spans = spans_on_one_clock(ranks, timed[pick], tl.rank_start_offsets_us);
    attach_duration_spread(ranks, timed, samples, tl);
    const std::vector<double> own_clocks;
    if (every_iteration)
      for (size_t k = 0; k < timed.size(); ++k)
        tl.iteration_spans.push_back(
            spans_on_one_clock(ranks, timed[k], offsets.empty() ? own_clocks : offsets[k]));
  }
  std::vector<const RankResult*> by_rank;
  for (const RankResult& r : ranks) by_rank.push_back(&r);
  std::sort(by_rank.begin(), by_rank.end(), [](const auto* a, const auto* b) { return a->rank < b->rank; });
  out.compute_busy_us = compute_busy(by_rank, timed, schedule);
  for (const RankResult* r : by_rank) {
    tl.peak_memory_bytes.push_back(r->peak_memory_bytes);
    out.huge_page_bytes.push_back(r->huge_page_bytes);
  }
  return out;
}

nlohmann::json summary_json(const RunSummary& s, const Schedule& schedule, const nlohmann::json& meta) {
  nlohmann::json losses = nlohmann::json::array();
  for (float l : s.losses) losses.push_back(std::isfinite(l) ? nlohmann::json(l) : nlohmann::json(nullptr));
  nlohmann::json j{{"model", schedule.model.name},
                   {"strategy", schedule.plan.strategy},
                   {"tp", schedule.model.tp},
                   {"seq_len", schedule.model.seq_len},
                   {"micro_batch", schedule.model.micro_batch},
                   {"ranks", s.timeline.ranks},
                   {"ops", schedule.ops.size()},
                   {"warmup", s.warmup},
                   {"iteration_time_us",
                    {{"mean", s.mean_us},
                     {"median", s.median_us},
                     {"p10", s.p10_us},
                     {"p90", s.p90_us},
                     {"samples", s.timeline.iteration_samples_us}}},
                   {"peak_memory_bytes", s.timeline.peak_memory_bytes},
                   {"huge_page_bytes", s.huge_page_bytes},
                   {"compute_busy_us", s.compute_busy_us},
                   {"loss", losses}};
  if (!s.start_skew_us.empty())
    j["rank_start_skew_us"] = {{"median", percentile(s.start_skew_us, 0.5)},
                               {"p90", percentile(s.start_skew_us, 0.9)},
                               {"max", *std::max_element(s.start_skew_us.begin(), s.start_skew_us.end())},
                               {"samples", s.start_skew_us}};
  for (const auto& [k, v] : meta.items()) j[k] = v;
  return j;
}

}  // namespace domino
