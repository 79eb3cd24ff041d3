// grad_check.cpp: --check (see grad_check.hpp).
#include "executor/job/grad_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "executor/job/launcher.hpp"
#include "sim/base/error.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

struct Variant {
  std::string label;
  ExecOptions options;
  Job job;
  std::vector<RankSnapshot> ranks;
};

using ParamKey = std::pair<int, int>;  // (ParamKind, layer)

std::map<ParamKey, int32_t> grad_buffers(const Schedule& s) {
  std::map<ParamKey, int32_t> out;
  for (size_t i = 0; i < s.buffers.size(); ++i)
    if (s.buffers[i].role == BufferRole::Grad) out[{int(s.buffers[i].param), s.buffers[i].layer}] = int32_t(i);
  return out;
}

double loss_error(float a, float b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return INFINITY;
  return std::abs(double(a) - double(b)) / std::max(std::abs(double(b)), 1e-30);
}

std::string fmt_err(double e) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", e);
  return buf;
}

// The first op in program order that writes one of the buffers in `names`.
std::string first_writer(const Schedule& s, const std::vector<std::string>& names) {
  for (const Op& op : s.ops)
    for (int i = 0; i < op.n_out; ++i) {
      const Region& r = op.out[size_t(i)];
      if (r.valid() && std::find(names.begin(), names.end(), s.buffers.at(r.buffer).name) != names.end())
        return op_id(op) + " (writes " + s.buffers.at(r.buffer).name + ")";
    }
  return "";
}

// Buffers (activations and gradients) of the plan that differ from the same-named, same-shaped buffers of
// the megatron-sync run on the same rank. A buffer of another shape is never compared: under sequence
// parallelism a rank holds [B, S/tp, h] of a buffer megatron-sync holds whole, in another row order.
std::vector<std::string> differing_buffers(const Variant& plan, const Variant& sync) {
  std::map<std::string, int32_t> sync_index;
  for (size_t i = 0; i < sync.job.schedule.buffers.size(); ++i) sync_index[sync.job.schedule.buffers[i].name] = int32_t(i);
  std::vector<std::string> out;
  const auto& buffers = plan.job.schedule.buffers;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role != BufferRole::Activation && buffers[i].role != BufferRole::Grad) continue;
    auto it = sync_index.find(buffers[i].name);
    if (it == sync_index.end()) continue;
    const BufferDesc& theirs = sync.job.schedule.buffers[size_t(it->second)];
    if (theirs.batch != buffers[i].batch || theirs.seq != buffers[i].seq || theirs.cols != buffers[i].cols) continue;
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      const auto& a = plan.ranks[r].buffers.at(i);
      const auto& b = sync.ranks[r].buffers.at(size_t(it->second));
      if (a.size() == b.size() && max_relative_error(a, b) > kCheckTolerance) {
        out.push_back(buffers[i].name);
        break;
      }
    }
  }
  return out;
}


// The three runs: the plan, megatron-sync at the same TP degree, megatron-sync at tp=1; one iteration each
// from the same seed, no outputs, no emulated link.
std::vector<Variant> check_variants(const ExecOptions& options, const Job& job) {
  ExecOptions base = options;
  RunSettings& r = base.run;
  r.check = false;
  r.iters = 1;
  r.warmup = 0;
  r.trace_path.clear();
  r.json_path.clear();
  r.dump_dir.clear();
  r.quiet = true;
  r.link_gbps = 0;
  r.link_latency_us = 0;
  ExecOptions sync = base;
  sync.job.target.clear();
  sync.job.model = job.model_source;
  sync.job.strategy = "megatron-sync";
  sync.job.force = false;
  sync.job.overrides.tp = job.model.tp;
  sync.job.ranks = 0;
  ExecOptions single = sync;
  single.job.overrides.tp = 1;
  return {{"plan (" + job.plan.strategy + ")", base, job, {}},
          {"megatron-sync tp " + std::to_string(job.model.tp), sync, resolve_job(sync), {}},
          {"megatron-sync tp 1", single, resolve_job(single), {}}};
}

// Launches one run and reads back every rank's buffers (files named PREFIX.rankR.bin).
void run_variant(Variant* run, const std::string& prefix) {
  if (std::getenv("DOMINO_CHECK_KEEP")) std::printf("check: keeping %s\n", prefix.c_str());
  std::printf("check: running %s on %d rank(s)\n", run->label.c_str(), run->job.ranks);
  std::fflush(stdout);
  launch_job(run->options, run->job, prefix + ".rank{rank}.bin");
  for (int r = 0; r < run->job.ranks; ++r) run->ranks.push_back(read_snapshot(prefix + ".rank" + std::to_string(r) + ".bin"));
}

struct Row {
  std::string name;
  double vs_sync, vs_single;
};

// The loss and every full parameter gradient of the plan against both references.
std::vector<Row> compare_with_references(const Job& job, const std::vector<Variant>& runs) {
  std::vector<Row> rows;
  rows.push_back({"loss", loss_error(runs[0].ranks[0].loss, runs[1].ranks[0].loss),
                  loss_error(runs[0].ranks[0].loss, runs[2].ranks[0].loss)});
  const auto sync_grads = grad_buffers(runs[1].job.schedule), single_grads = grad_buffers(runs[2].job.schedule);
  for (const auto& [key, index] : grad_buffers(job.schedule)) {
    const std::vector<float> mine = assemble_full(job, index, runs[0].ranks);
    // Ranks holding different copies of a replicated gradient: whichever copy assemble_full kept, one is wrong.
    const double replicas = replica_disagreement(job, index, runs[0].ranks);
    Row row{job.schedule.buffers[size_t(index)].name, INFINITY, INFINITY};
    if (auto it = sync_grads.find(key); it != sync_grads.end())
      row.vs_sync = std::max(replicas, max_relative_error(mine, assemble_full(runs[1].job, it->second, runs[1].ranks)));
    if (auto it = single_grads.find(key); it != single_grads.end())
      row.vs_single =
          std::max(replicas, max_relative_error(mine, assemble_full(runs[2].job, it->second, runs[2].ranks)));
    rows.push_back(row);
  }
  return rows;
}

// Prints the table; returns the worst row and adds the names of the rows over the tolerance to *failed.
const Row& print_table(const std::vector<Row>& rows, const std::vector<Variant>& runs, std::vector<std::string>* failed) {
  std::printf("\n%-32s %22s %22s  %s\n", "tensor", ("vs " + runs[1].label).c_str(), ("vs " + runs[2].label).c_str(), "");
  const Row* worst = &rows.front();
  for (const Row& row : rows) {
    const bool ok = row.vs_sync <= kCheckTolerance && row.vs_single <= kCheckTolerance;
    std::printf("%-32s %22s %22s  %s\n", row.name.c_str(), fmt_err(row.vs_sync).c_str(), fmt_err(row.vs_single).c_str(),
                ok ? "ok" : "MISMATCH");
    if (!ok) failed->push_back(row.name);
    if (std::max(row.vs_sync, row.vs_single) > std::max(worst->vs_sync, worst->vs_single)) worst = &row;
  }
  std::printf("(max relative error; tolerance %.0e; relative to max(|x|, %.0e * max|x|) per tensor)\n",
              kCheckTolerance, kRelativeFloor);
  std::fflush(stdout);
  return *worst;
}

}  // namespace

double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double scale = 0;
  for (float v : b) scale = std::max(scale, std::abs(double(v)));
  const double floor = std::max(kRelativeFloor * scale, 1e-30);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])) / std::max(std::abs(double(b[i])), floor));
  }
  return worst;
}

namespace {

// Calls at(rank, k, value) for every element of every rank's shard of a parameter gradient, k its index in
// the full [rows, cols] tensor (vocabulary padding skipped); returns the full tensor's element count.
size_t for_each_full_element(const Job& job, int32_t grad_buffer, const std::vector<RankSnapshot>& ranks,
                             const std::function<void(int, size_t, float)>& at) {
  const BufferDesc& buf = job.schedule.buffers.at(size_t(grad_buffer));
  const auto shape = full_shape(job.model, buf);
  for (const RankSnapshot& snap : ranks) {
    const std::vector<float>& local = snap.buffers.at(size_t(grad_buffer));
    if (int64_t(local.size()) != buf.elements()) throw_runtime("snapshot of " + buf.name + " has the wrong size");
    for (int64_t r = 0; r < buf.seq; ++r)
      for (int64_t c = 0; c < buf.cols; ++c) {
        const ParamCoord full = shard_of(job.model, buf, snap.rank, r, c);
        if (vocab_padding(job.model, buf, full)) continue;  // the last vocabulary shard's padding
        if (full.row < 0 || full.row >= shape[0] || full.col < 0 || full.col >= shape[1])
          throw_runtime("shard_of maps " + buf.name + " (" + std::to_string(r) + ", " + std::to_string(c) +
                        ") outside the full tensor");
        at(snap.rank, size_t(full.row * shape[1] + full.col), local[size_t(r * buf.cols + c)]);
      }
  }
  return size_t(shape[0] * shape[1]);
}

}  // namespace

std::vector<float> assemble_full(const Job& job, int32_t grad_buffer, const std::vector<RankSnapshot>& ranks) {
  const BufferDesc& buf = job.schedule.buffers.at(size_t(grad_buffer));
  const auto shape = full_shape(job.model, buf);
  std::vector<float> full(size_t(shape[0] * shape[1]), NAN);
  std::vector<char> covered(full.size(), 0);
  for_each_full_element(job, grad_buffer, ranks, [&](int, size_t k, float v) {
    full[k] = v;
    covered[k] = 1;
  });
  if (std::find(covered.begin(), covered.end(), 0) != covered.end())
    throw_runtime("the ranks' shards of " + buf.name + " do not cover its full tensor");
  return full;
}

double replica_disagreement(const Job& job, int32_t grad_buffer, const std::vector<RankSnapshot>& ranks) {
  const BufferDesc& buf = job.schedule.buffers.at(size_t(grad_buffer));
  const auto shape = full_shape(job.model, buf);
  std::vector<float> first(size_t(shape[0] * shape[1]), NAN), other(first.size(), NAN);
  // The first rank's copy of each element, and the copy of another rank farthest from it.
  for_each_full_element(job, grad_buffer, ranks, [&](int, size_t k, float v) {
    if (std::isnan(first[k])) first[k] = v;
    else if (std::isnan(other[k]) || std::abs(v - first[k]) > std::abs(other[k] - first[k])) other[k] = v;
  });
  std::vector<float> mine, theirs;
  for (size_t k = 0; k < first.size(); ++k) {
    mine.push_back(std::isnan(other[k]) ? first[k] : other[k]);  // unreplicated: no difference
    theirs.push_back(first[k]);
  }
  return max_relative_error(mine, theirs);
}

int run_gradient_check(const ExecOptions& options, const Job& job) {
  TempDir temp("domino-check");
  if (std::getenv("DOMINO_CHECK_KEEP")) temp.keep();
  std::vector<Variant> runs = check_variants(options, job);
  for (size_t v = 0; v < runs.size(); ++v) run_variant(&runs[v], temp.path() + "/run" + std::to_string(v));
  const std::vector<Row> rows = compare_with_references(job, runs);
  std::vector<std::string> failed_names;
  const Row& worst = print_table(rows, runs, &failed_names);
  if (failed_names.empty()) {
    std::printf("check passed: %zu tensors within %.0e\n", rows.size(), kCheckTolerance);
    return 0;
  }
  std::vector<std::string> differing = differing_buffers(runs[0], runs[1]);
  failed_names.erase(std::remove(failed_names.begin(), failed_names.end(), "loss"), failed_names.end());
  std::string first = first_writer(job.schedule, differing);
  if (first.empty()) first = first_writer(job.schedule, failed_names);
  throw_runtime("--check failed: " + std::to_string(rows.size()) + " tensors compared, worst " + worst.name +
                " (" + fmt_err(std::max(worst.vs_sync, worst.vs_single)) + ")" +
                (first.empty() ? std::string() : "; first differing op: " + first));
}

}  // namespace domino
