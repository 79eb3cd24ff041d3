// profile_workload.cpp: builds the probe list from schedules the builder makes (see profile_workload.hpp).
#include "executor/profiler/profile_workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "sim/base/error.hpp"
#include "sim/ir/gemm_blocks.hpp"

namespace domino::prof {

namespace {

// Ops bigger than this are not probed on the host (a GPU-sized model given to the CPU profiler).
constexpr int64_t kMaxProbeBytes = int64_t(1) << 30;

std::optional<Schedule> try_build(const ModelSpec& model, int p, int q, SplitDim dim) {
  try {
    validate_model(model);
    const BlockPlan b{dim, p, q, OverlapMode::None, false};
    const Plan plan = make_uniform_plan(model, b, b, "custom");
    return build_schedule(model, plan);
  } catch (const Error&) {
    return std::nullopt;  // p or q does not divide this model: not a shape it can produce
  }
}

class Builder {
 public:
  explicit Builder(Workload& w) : w_(w) {}

  const Schedule* keep(Schedule s) {
    w_.schedules.push_back(std::move(s));
    return &w_.schedules.back();
  }

  // The product the backend runs (one block of a GEMM whose rows slice the sequence of several batch
  // entries: the cost model times it once per block where it has no figure for the whole op). Each transpose
  // pair separately: the executor calls Eigen with transposed operands for dgrad and wgrad. With
  // `whole_blocked`, such a GEMM also as a whole, its blocks back to back as the backend runs them.
  void add_gemm(const Schedule& s, const Op& whole, bool whole_blocked) {
    const Op op = gemm_block(whole);
    add_gemm_probe(s, op, 1, fmt::format("gemm {}x{}x{} {}", op.m, op.n, op.k, to_string(op.code)));
    const int64_t blocks = whole.attrs.row_blocks;
    if (whole_blocked && blocks > 1)
      add_gemm_probe(
          s, whole, blocks,
          fmt::format("gemm {}x{}x{} {} x{} blocks", op.m, op.n, op.k, to_string(op.code), blocks));
  }

  void add_synthetic_gemm(int64_t m, int64_t n, int64_t k, DType dtype) {
    if (!gemm_seen_.insert(std::make_tuple(m, n, k, OpCode::MatMul, 1)).second) return;
    w_.gemms.push_back({fmt::format("gemm {}x{}x{} MatMul", m, n, k), keep(synthetic_gemm(m, n, k, dtype))});
  }

  // One op per (opcode, bytes; on a column chunk also its rows: a chunk pays per row), at most max_per_code
  // new ones of a schedule; every parameter size of the optimizer and the embedding (their sizes are few and
  // each is paid once per step).
  void add_memory_ops(const Schedule& s, int max_per_code) {
    std::map<OpCode, int> taken;
    for (const Op& op : s.ops) {
      if (!memory_bound(op.kind)) continue;
      const bool per_parameter = op.kind == OpKind::Optimizer || op.kind == OpKind::Embedding;
      if (!per_parameter && taken[op.code] >= max_per_code) continue;
      if (!mem_seen_.insert({op.code, int64_t(op.bytes), op.chunk >= 0 ? op.m : -1}).second) continue;
      Schedule mini = extract_op(s, op);
      if (mini_bytes(mini) > kMaxProbeBytes) continue;
      ++taken[op.code];
      const std::string label = fmt::format("{} {} {}B{}", to_string(op.kind), to_string(op.code),
                                            int64_t(op.bytes), op.chunk >= 0 ? " column chunk" : "");
      w_.memory_ops.push_back({label, keep(std::move(mini))});
    }
  }

  // The first layer's attention ops, every slice of it (a sequence slice's queries see more keys than the
  // slice before), one probe per (opcode, FLOPs, bytes).
  void add_attention(const Schedule& s, const std::string& tag) {
    for (const Op& op : s.ops) {
      if (op.kind != OpKind::Attention || op.layer != 0) continue;
      if (!attn_seen_.insert({op.code, op.flops, op.bytes}).second) continue;
      Schedule mini = extract_op(s, op);
      if (mini_bytes(mini) > kMaxProbeBytes) continue;
      const std::string slice = op.slice >= 0 ? fmt::format(" slice {}", op.slice) : "";
      w_.attention.push_back(
          {fmt::format("attention {} {}{}", to_string(op.code), tag, slice), keep(std::move(mini))});
    }
  }

 private:
  // op: the product or whole op to run; m, n, k: one block's (the key).
  void add_gemm_probe(const Schedule& s, const Op& op, int64_t blocks, std::string label) {
    const Op block = gemm_block(op);
    if (!gemm_seen_.insert(std::make_tuple(block.m, block.n, block.k, op.code, blocks)).second) return;
    Schedule mini = extract_op(s, op);
    if (mini_bytes(mini) > kMaxProbeBytes) return;
    w_.gemms.push_back({std::move(label), keep(std::move(mini))});
  }

  Workload& w_;
  std::set<std::tuple<int64_t, int64_t, int64_t, OpCode, int64_t>> gemm_seen_;  // a block's shape, blocks
  std::set<std::tuple<OpCode, int64_t, int64_t>> mem_seen_;  // code, bytes, rows of a chunk (-1: whole rows)
  std::set<std::tuple<OpCode, double, double>> attn_seen_;
};

}  // namespace

Schedule extract_op(const Schedule& s, const Op& op) {
  Schedule mini;
  mini.model = s.model;
  mini.plan = s.plan;
  std::map<int32_t, int32_t> renumber;
  Op o = op;
  o.index = 0;
  o.deps.clear();
  const auto map_region = [&](Region& r) {
    if (!r.valid()) return;
    auto it = renumber.find(r.buffer);
    if (it == renumber.end()) {
      it = renumber.emplace(r.buffer, int32_t(mini.buffers.size())).first;
      mini.buffers.push_back(s.buffers.at(size_t(r.buffer)));
    }
    r.buffer = it->second;
  };
  for (int i = 0; i < o.n_in; ++i) map_region(o.in[size_t(i)]);
  for (int i = 0; i < o.n_out; ++i) map_region(o.out[size_t(i)]);
  mini.ops.push_back(o);
  return mini;
}

Schedule synthetic_gemm(int64_t m, int64_t n, int64_t k, DType dtype) {
  Schedule s;
  s.model = default_model();
  s.model.dtype = dtype;
  s.plan.tp = 1;
  s.plan.strategy = "profile";
  const auto buffer = [&](const char* name, int64_t rows, int64_t cols) {
    BufferDesc b;
    b.name = name;
    b.role = BufferRole::Workspace;
    b.seq = rows;
    b.cols = cols;
    s.buffers.push_back(b);
    return Region{int32_t(s.buffers.size() - 1), 0, 1, 0, rows, 0, cols};
  };
  Op op;
  op.name = "profile.gemm";
  op.kind = OpKind::Gemm;
  op.code = OpCode::MatMul;
  op.stream = Stream::Compute;
  op.in[0] = buffer("A", m, k);
  op.in[1] = buffer("B", k, n);
  op.out[0] = buffer("C", m, n);
  op.n_in = 2;
  op.n_out = 1;
  op.m = m;
  op.n = n;
  op.k = k;
  op.flops = 2.0 * double(m) * double(n) * double(k);
  op.bytes = 4.0 * double(m * k + k * n + m * n);
  op.dtype = dtype;
  s.ops.push_back(op);
  return s;
}

int64_t mini_bytes(const Schedule& s) {
  int64_t total = 0;
  for (const BufferDesc& b : s.buffers) total += b.elements() * 4;
  return total;
}

namespace {

// Memory-bound ops as every --for model's plans run them: at its TP degree (optimizer steps and the embedding
// on the real parameter shards), its micro-batch split 1, 2 and 4 ways by batch and by sequence, at other
// token counts (activations scale with the tokens; parameters do not), and on column chunks (the residual
// adds of a row-parallel output in q chunks, which pay per row: MemoryCost::chunk_row_us).
void add_memory_probes(Builder& add, const WorkloadOptions& opt, const ModelSpec& base) {
  const std::vector<ModelSpec> memory_models = opt.models.empty() ? std::vector<ModelSpec>{base} : opt.models;
  for (const ModelSpec& model : memory_models) {
    struct Shape {
      ModelSpec model;  // at a micro-batch
      int p, q;
    };
    std::vector<Shape> shapes;
    for (int p : opt.quick ? std::vector<int>{1} : std::vector<int>{1, 2, 4}) shapes.push_back({model, p, 1});
    for (int mb : opt.quick ? std::vector<int>{1, 8} : std::vector<int>{1, 4, 16}) {
      ModelSpec m = model;
      m.micro_batch = mb;
      shapes.push_back({m, 1, 1});
    }
    for (int q : opt.quick ? std::vector<int>{2} : std::vector<int>{2, 4})
      for (int p : opt.quick ? std::vector<int>{1} : std::vector<int>{1, 2}) shapes.push_back({model, p, q});
    for (const Shape& sh : shapes)
      for (SplitDim dim : {SplitDim::Batch, SplitDim::Sequence})
        if (const auto s = try_build(sh.model, sh.p, sh.q, dim)) add.add_memory_ops(*s, opt.quick ? 1 : 4);
  }
}

// Attention over sequence length and heads per rank (the TP degree divides the heads), whole and split in
// two by sequence; then as every --for model's plans run it, its micro-batch split 1, 2 and 4 ways by batch
// and by sequence. A sequence slice keeps its probabilities' rows whole while its FLOPs shrink, which is what
// tells attention's FLOP rate from its byte rate (attention.per_code).
void add_attention_probes(Builder& add, const WorkloadOptions& opt, const ModelSpec& base) {
  const std::vector<int> seqs = opt.quick ? std::vector<int>{64, 128} : std::vector<int>{64, 128, 256};
  for (int seq : seqs)
    for (int tp : {1, 2, 4}) {
      if (opt.quick && tp == 4) continue;
      ModelSpec m = base;
      m.gpus_per_node = std::max(m.gpus_per_node, tp);
      m.seq_len = seq;
      m.tp = tp;
      m.micro_batch = std::min(base.micro_batch, 4);
      const std::string tag = fmt::format("seq {} heads/rank {}", seq, m.heads_per_rank());
      if (const auto s = try_build(m, 1, 1, SplitDim::Batch)) add.add_attention(*s, tag);
      if (const auto s = try_build(m, 2, 1, SplitDim::Sequence)) add.add_attention(*s, tag + " sequence/2");
    }
  for (const ModelSpec& model : opt.models)
    for (int p : opt.quick ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 4})
      for (SplitDim dim : {SplitDim::Batch, SplitDim::Sequence})
        if (const auto s = try_build(model, p, 1, dim))
          add.add_attention(*s, fmt::format("{} {}/{}", model.name, to_string(dim), p));
}

}  // namespace

Workload plan_workload(const WorkloadOptions& opt) {
  Workload w;
  Builder add(w);
  const ModelSpec base = opt.models.empty() ? default_model() : opt.models.front();
  for (const ModelSpec& m : opt.models) w.model_name += (w.model_name.empty() ? "" : ", ") + m.name;
  if (w.model_name.empty()) w.model_name = base.name;
  const std::vector<int> ps = {1, 2, 4, 8}, qs = {1, 2, 4};

  // GEMMs: the model's exact shapes for every p and q, else a log-spaced grid (cost model interpolates).
  double max_ar = 0;
  std::set<double> ar_sizes;
  for (const ModelSpec& model : opt.models) {
    const size_t before = w.gemms.size();
    for (int p : ps)
      for (int q : qs)
        for (SplitDim dim : {SplitDim::Batch, SplitDim::Sequence}) {
          const auto s = try_build(model, p, q, dim);
          if (!s) continue;
          for (const Op& op : s->ops) {
            if (op.kind == OpKind::Gemm) add.add_gemm(*s, op, opt.whole_blocked_gemms);
            if (op.kind == OpKind::AllReduce && op.bytes > 0) {
              ar_sizes.insert(op.bytes);
              max_ar = std::max(max_ar, op.bytes);
            }
          }
        }
    if (w.gemms.size() == before) throw_bad_input("--for " + model.name + ": no plan of this model builds (check its tp)");
  }
  if (opt.models.empty()) {
    const std::vector<int64_t> grid = opt.quick ? std::vector<int64_t>{128, 512} : std::vector<int64_t>{64, 256, 1024};
    for (int64_t m : grid)
      for (int64_t n : grid)
        for (int64_t k : grid) add.add_synthetic_gemm(m, n, k, opt.grid_dtype);
    if (!opt.quick) add.add_synthetic_gemm(2048, 1024, 1024, opt.grid_dtype);
  }

  add_memory_probes(add, opt, base);

  add_attention_probes(add, opt, base);

  // AllReduce sizes: 4 B and powers of 4 (quick: of 16) up to the largest the model needs, plus its sizes.
  if (opt.models.empty()) max_ar = opt.max_allreduce_bytes;
  const double step = opt.quick ? 16 : 4;
  for (double b = 4; b < max_ar * 1.0001; b *= step) ar_sizes.insert(b);
  ar_sizes.insert(max_ar);
  w.allreduce_bytes.assign(ar_sizes.begin(), ar_sizes.end());

  // Interference: the model's biggest forward GEMM beside its biggest AllReduce (or a 1 GFLOP GEMM, 4 MiB).
  if (!opt.models.empty()) {
    if (const auto s = try_build(base, 1, 1, SplitDim::Batch)) {
      const Op* best = nullptr;
      for (const Op& op : s->ops)
        if (op.kind == OpKind::Gemm && op.phase == Phase::Forward && (!best || op.flops > best->flops)) best = &op;
      if (best) w.interference_gemm = Probe{"interference gemm", add.keep(extract_op(*s, *best))};
    }
    w.interference_bytes = max_ar;
  }
  if (!w.interference_gemm) w.interference_gemm = Probe{"interference gemm", add.keep(synthetic_gemm(1024, 1024, 512))};
  if (!(w.interference_bytes > 0)) w.interference_bytes = 4.0 * 1024 * 1024;
  return w;
}

}  // namespace domino::prof
