// probe_schedule.cpp: builds the probe schedules (see probe_schedule.hpp). Every op keeps its shape and
// regions; only buffer numbers, op indices, streams and cross-stream deps are set here.
#include "executor/profiler/probe_schedule.hpp"

#include <algorithm>
#include <vector>

#include "sim/base/error.hpp"

namespace domino::prof {

namespace {

// Appends `copies` copies of mini's op to `s` (and its buffers: once, or once per copy); returns their indices.
std::vector<int32_t> append_chain(Schedule& s, const Schedule& mini, int copies, bool separate_buffers) {
  if (mini.ops.size() != 1) throw_runtime("profiler: a probe schedule must hold exactly one op");
  std::vector<int32_t> indices;
  int32_t first_buffer = -1;
  for (int c = 0; c < std::max(1, copies); ++c) {
    if (c == 0 || separate_buffers) {
      first_buffer = int32_t(s.buffers.size());
      for (const BufferDesc& b : mini.buffers) {
        s.buffers.push_back(b);
        if (separate_buffers && c > 0) s.buffers.back().name.append("#").append(std::to_string(c));
      }
    }
    Op op = mini.ops.front();
    op.index = int32_t(s.ops.size());
    op.layer = int16_t(c);  // every copy needs an op id of its own (the IR verifier insists)
    op.deps.clear();
    for (int i = 0; i < op.n_in; ++i)
      if (op.in[size_t(i)].valid()) op.in[size_t(i)].buffer += first_buffer;
    for (int i = 0; i < op.n_out; ++i)
      if (op.out[size_t(i)].valid()) op.out[size_t(i)].buffer += first_buffer;
    indices.push_back(op.index);
    s.ops.push_back(op);
  }
  return indices;
}

std::vector<int32_t> append_allreduces(Schedule& s, double bytes, int copies) {
  const int64_t elements = std::max<int64_t>(1, int64_t(bytes / 4));
  BufferDesc b;
  b.name = "profile.allreduce";
  b.role = BufferRole::OptState;  // kept in fp32 by every backend, whatever the model's dtype
  b.cols = elements;
  s.buffers.push_back(b);
  const Region r{int32_t(s.buffers.size() - 1), 0, 1, 0, 1, 0, elements};
  std::vector<int32_t> indices;
  for (int c = 0; c < std::max(1, copies); ++c) {
    Op op;
    op.index = int32_t(s.ops.size());
    op.name = "profile.ar";
    op.layer = int16_t(c);
    op.kind = OpKind::AllReduce;
    op.code = OpCode::AllReduce;
    op.stream = Stream::Comm;
    op.in[0] = r;
    op.out[0] = r;
    op.n_in = 1;
    op.n_out = 1;
    op.m = 1;
    op.n = elements;
    op.bytes = 4.0 * double(elements);
    op.dtype = DType::FP32;
    indices.push_back(op.index);
    s.ops.push_back(op);
  }
  return indices;
}

// An fp32 schedule of no model's plan: the AllReduce probes' buffers are fp32 on every backend.
Schedule empty_fp32_schedule() {
  Schedule s;
  s.model = default_model();
  s.model.dtype = DType::FP32;
  s.plan.tp = 1;
  s.plan.strategy = "profile";
  return s;
}

// A chain of GEMMs (compute stream) and one of AllReduces (communication stream) whose first waits for the
// first GEMM (the two run side by side) or for the last (the AllReduce follows the whole stretch).
Schedule gemms_and_allreduces(const Schedule& gemm_mini, int gemms, double bytes, int allreduces,
                              bool after_last_gemm) {
  Schedule s;
  s.model = gemm_mini.model;
  s.plan = gemm_mini.plan;
  const std::vector<int32_t> g = append_chain(s, gemm_mini, gemms, false);
  const std::vector<int32_t> a = append_allreduces(s, bytes, allreduces);
  s.ops[size_t(a.front())].deps = {after_last_gemm ? g.back() : g.front()};
  return s;
}

}  // namespace

Schedule chain_of(const Schedule& mini, int copies, bool separate_buffers) {
  Schedule s;
  s.model = mini.model;
  s.plan = mini.plan;
  append_chain(s, mini, copies, separate_buffers);
  return s;
}

void fill_with_values(Schedule& schedule, int ranks) {
  for (BufferDesc& b : schedule.buffers) {
    const bool zeros = b.role == BufferRole::Activation || b.role == BufferRole::Grad || b.role == BufferRole::Workspace;
    const bool sharded_weight = b.role == BufferRole::Param &&
                                (b.param == ParamKind::QkvWeight || b.param == ParamKind::ProjWeight ||
                                 b.param == ParamKind::Fc1Weight || b.param == ParamKind::Fc2Weight);
    // Parameters have one batch row (param_init.hpp): a batched activation keeps its zeros.
    if ((!zeros && !sharded_weight) || b.batch != 1) continue;
    b.role = BufferRole::Param;
    b.param = ParamKind::PositionEmbedding;  // replicated: every rank draws every row and column
  }
  // Only initialisation reads model.tp (every rank must be inside the group); no kernel does.
  schedule.model.tp = std::max(schedule.model.tp, ranks);
}

Schedule allreduce_chain(double bytes, int copies) {
  Schedule s = empty_fp32_schedule();
  append_allreduces(s, bytes, copies);
  return s;
}

Schedule gemms_beside_allreduces(const Schedule& gemm_mini, int gemms, double bytes, int allreduces) {
  return gemms_and_allreduces(gemm_mini, gemms, bytes, allreduces, false);
}

Schedule gemms_then_allreduce(const Schedule& gemm_mini, int gemms) {
  return gemms_and_allreduces(gemm_mini, gemms, 4, 1, true);
}

Schedule sp_collective_chain(OpCode code, double bytes, int tp, int copies) {
  if (code != OpCode::AllGather && code != OpCode::ReduceScatter)
    throw_runtime("profiler: a sequence-parallel probe is an AllGather or a ReduceScatter");
  if (tp < 1) throw_runtime("profiler: a sequence-parallel probe needs at least one rank");
  const int64_t per_rank = std::max<int64_t>(1, int64_t(bytes / 4 / tp + 0.5));
  Schedule s = empty_fp32_schedule();
  s.model.tp = tp;  // the ranks the collective's rows are spread over
  const auto buffer = [&](const char* name, int64_t seq) {
    BufferDesc b;
    b.name = name;
    b.role = BufferRole::OptState;  // fp32 on every backend
    b.seq = seq;
    b.cols = per_rank;
    s.buffers.push_back(b);
    return Region{int32_t(s.buffers.size() - 1), 0, 1, 0, seq, 0, per_rank};
  };
  const Region local = buffer("profile.sharded", 1), full = buffer("profile.full", tp);
  const bool gather = code == OpCode::AllGather;
  for (int c = 0; c < std::max(1, copies); ++c) {
    Op op;
    op.index = int32_t(s.ops.size());
    op.name = gather ? "profile.ag" : "profile.rs";
    op.layer = int16_t(c);
    op.kind = kind_of(code);
    op.code = code;
    op.stream = Stream::Comm;
    op.in[0] = gather ? local : full;
    op.out[0] = gather ? full : local;
    op.n_in = op.n_out = 1;
    op.m = tp;
    op.n = per_rank;
    op.bytes = 4.0 * double(full.elements());
    op.dtype = DType::FP32;
    s.ops.push_back(op);
  }
  return s;
}

Schedule collective_after_gemms(const Schedule& collective, const Schedule& gemm_mini, int gemms) {
  if (collective.ops.size() != 1 || !domino::collective(collective.ops.front().kind))
    throw_runtime("profiler: a collective after GEMMs needs a schedule of exactly one collective");
  Schedule s;
  s.model = gemm_mini.model;
  s.model.tp = collective.model.tp;
  s.plan = gemm_mini.plan;
  const std::vector<int32_t> g = append_chain(s, gemm_mini, gemms, false);
  const std::vector<int32_t> c = append_chain(s, collective, 1, false);
  s.ops[size_t(c.front())].deps = {g.back()};
  return s;
}

double collective_bytes(const Op& op) {
  const Region& r = op.code == OpCode::AllGather ? op.out[0] : op.in[0];
  return 4.0 * double(r.elements());
}

}  // namespace domino::prof
