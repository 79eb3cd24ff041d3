// schedule.hpp: the schedule IR, the one program both the simulator and the executor interpret.
//
// A Schedule is a list of ops in *program order*: executing them one after another in this order on a
// single device is a correct training iteration. Each op runs on a stream (compute or communication);
// a stream executes its ops in program order. Cross-stream ordering is given by Op::deps alone (the
// builder derives them from data hazards on buffer regions and adds the waits the plan's overlap mode
// asks for). Any execution that honours per-stream order and deps is therefore equivalent to the
// sequential program: this is what lets the executor run exactly what the simulator timed.
//
// Tensors live in buffers allocated once (BufferDesc). A buffer is a 3-D row-major array
// [batch][seq][cols] of elements; a Region is a box inside one buffer. Weights are buffers with batch 1,
// seq = input rows, cols = output columns. Rows of a region are (b, s) pairs in b-major order; a
// region with a partial seq range and more than one batch entry is a strided view (one contiguous
// block of rows per batch entry). Column ranges are strided views too (row stride = buffer cols).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/model/model_spec.hpp"
#include "sim/model/plan.hpp"

namespace domino {

enum class Stream : uint8_t { Compute = 0, Comm = 1 };
constexpr int kNumStreams = 2;
// Recompute: forward ops re-run during the backward pass (Plan::recompute), ids "L3.rc.attn.core.s0".
enum class Phase : uint8_t { Forward, Backward, Optimizer, Recompute };
enum class Block : uint8_t { Attn, Mlp, Embedding, Head, None };

// What an op costs like (cost model, reports). Several opcodes share a kind.
enum class OpKind : uint8_t {
  Gemm, Attention, Norm, Activation, Elementwise, Copy, AllReduce, Optimizer, Embedding, Loss,
  AllGather, ReduceScatter,
};
constexpr int kNumOpKinds = 12;

// What an op computes (executor). Inputs in[], outputs out[]; "(+)=" means "+=" when attrs.accumulate,
// else "=". Every region of in/out may be a strided view unless it says "contiguous".
enum class OpCode : uint8_t {
  // out[0] (+)= in[0] · in[1] (+ in[2] broadcast over rows, if present: a [1,1,N] bias region).
  MatMul,
  // out[0] (+)= in[0] · in[1]^T                     (input gradient: dX = dY · W^T)
  MatMulDgrad,
  // out[0] (+)= in[0]^T · in[1]                     (weight gradient: dW = X^T · dY), rows summed over
  // the whole region; if out[1] is present, out[1] (+)= column sums of in[1] (bias gradient).
  // A tied head (ModelSpec::tied_embeddings) uses the embedding's shard E [V_l, h] as its weight through
  // the same three: logits = MatMulDgrad(x, E) = x · E^T, dx = MatMul(dlogits, E),
  // dE (+)= MatMulWgrad(dlogits, x).
  MatMulWgrad,
  // in[0]=x, in[1]=gamma [1,1,h], in[2]=beta [1,1,h] (LayerNorm only); out[0]=y, out[1]=stats [.,.,2]
  // holding (mean, rstd) per row (RMSNorm: mean stored as 0). eps = attrs.eps.
  // Grouped (QK-norm per head): attrs.head_dim = g > 0 normalises each group of g columns of a row on its
  // own with the one gamma (and beta) [1,1,g] every group shares; stats then holds (mean, rstd) per group,
  // [., ., 2 * cols/g]. The backward takes the same attrs.head_dim (then with chunks = 1).
  LayerNormFwd,
  RmsNormFwd,
  // in[0]=x (the forward input), in[1]=stats, in[2]=gamma, in[3..3+n)=dy given as n column chunks
  // (attrs.chunks = n; chunk c covers columns [c*h/n, (c+1)*h/n) of dy, each a contiguous buffer);
  // out[0] (+)= dx, out[1] (+)= dgamma, out[2] (+)= dbeta (LayerNorm only). attrs.accumulate applies to
  // out[0]; attrs.accumulate_params to out[1], out[2].
  LayerNormBwd,
  RmsNormBwd,
  // out[0] = gelu(in[0]) (tanh approximation).
  GeluFwd,
  // out[0] = gelu'(in[0]) * in[1]       (in[0] = forward input, in[1] = dy)
  GeluBwd,
  // in[0] = [gate | up], 2f columns; out[0] = silu(gate) * up, f columns.
  SwigluFwd,
  // in[0] = forward input [gate | up], in[1] = dy (f columns); out[0] = [dgate | dup] (2f columns).
  SwigluBwd,
  // In place on out[0] (== in[0]): rotary embedding on attrs.heads heads of attrs.head_dim columns each,
  // position of a row = its seq index; rotate-half convention, base 10000. RopeBwd applies the inverse.
  // Partial rotary (GPT-NeoX rotary_pct, GPT-J rotary_dim): attrs.rotary_dims = r > 0 rotates only the
  // first r columns of each head, rotate-half within them (GPT-NeoX's layout: pairs (i, i + r/2), angle
  // pos * 10000^(-2i/r)); the other columns pass through. 0: all head_dim columns.
  RopeFwd,
  RopeBwd,
  // Causal attention for the query rows of one slice. in[0]=Q [rows, H*d], in[1]=K [keys, KV*d],
  // in[2]=V [keys, KV*d] where K/V cover the same batch range and seq [0, kv_end) with kv_end >= the
  // query rows' last position (query position = seq index, key position = seq index: causal mask
  // key_pos <= query_pos). H = attrs.heads, KV = attrs.kv_heads (query head h uses KV head h / (H/KV)),
  // d = attrs.head_dim, scale 1/sqrt(d). out[0]=context [rows, H*d]; out[1]=probabilities P, a region of
  // the probs buffer [batch, seq(query), H*seq_len(keys)] covering the query rows, head-major columns
  // (column = head*seq_len + key position), entries beyond kv_end or above the diagonal written as 0.
  // Sliding window (attrs.window = w > 0): the query at position i sees keys (i - w, i] only; K/V may then
  // start at seq k0 > 0 (any k0 <= max(0, first query position - w + 1)); P entries outside are 0.
  AttnFwd,
  // in[0]=Q, in[1]=K, in[2]=V, in[3]=P (as in AttnFwd), in[4]=dcontext [rows, H*d];
  // out[0] = dQ (query rows; "="), out[1] = dK, out[2] = dV over the key rows of in[1]/in[2]
  // ("(+)=" with attrs.accumulate: several query slices contribute to the same keys). With accumulate,
  // the dK/dV rows at seq positions below attrs.overwrite_end are written ("=") nonetheless: with a
  // sliding window the slice processed first no longer covers every key, so each slice writes the keys no
  // slice before it touched. attrs.window as in AttnFwd.
  AttnBwd,
  // out[0] = in[0] + in[1] (+ in[2], a [1,1,n] bias broadcast over rows, if present). On column chunk
  // Op::chunk of a row block's q chunks, attrs.chunks = q (what the block's rows cost: profile.hpp).
  ResidualAdd,
  // Vocabulary-parallel ops (embedding, loss) see one shard of the vocabulary (see vocab_shard() below):
  // the rank holds ids [rank*n, rank*n + n), n = the table's rows or the logits' columns; ids at or beyond
  // attrs.vocab are padding (the last shard when tp does not divide the vocabulary). Token ids are floats.
  //
  // out[0] = the table row of each token id in[0] [B,S,1] that lies in this rank's shard of the table
  // in[1] [1,n,h], zero for the others (an AllReduce sums the shards). Positions: PositionAdd, after the sum.
  EmbeddingFwd,
  // in[0] = token ids, in[1] = dy [B,S,h]; out[0] (+)= scatter-add of the rows whose token lies in this
  // rank's shard into the table gradient [1,n,h]; GPT: out[1] (+)= positional gradient [1,seq_len,h].
  // attrs.accumulate applies to out[0] (a tied head's weight gradient is already there),
  // attrs.accumulate_params to out[1].
  EmbeddingBwd,
  // out[0] = in[0] + the row of the positional table in[1] [1,seq_len,h] at each row's seq index.
  PositionAdd,
  // in[0] = logits shard [B,S,n]; out[0] [B,S,1] = the row's largest logit among this shard's real ids.
  LogitMax,
  // in[0] = logits shard, in[1] = target ids [B,S,1], in[2] = the row's max over every shard [B,S,1];
  // out[0] [B,S,2] = (sum over this shard's real ids of exp(logit - max), the target's logit when the
  // target lies in this shard, else 0).
  LogitSumExp,
  // in[0] = logits shard, in[1] = target ids, in[2] = max, in[3] = (sum of exp, target logit) summed over
  // every shard; out[0] (+)= mean over N tokens of log(sum) + max - target logit [1,1,1] (N = batch * seq of
  // the logits buffer), out[1] = dlogits of the shard = (exp(logit - max) / sum - onehot(target)) / N
  // (padding columns 0).
  CrossEntropy,
  // In place, contiguous over ranks: out[0] = attrs.reduce (sum or max) over the tensor-parallel group of
  // in[0] (same region).
  AllReduce,
  // in[0] = gradient; out[0] = parameter, out[1] = first moment / momentum, out[2] = second moment
  // (Adam only). Hyper-parameters come from the executor's options; the step count from the runtime.
  AdamStep,
  SgdStep,
  // out[0] = max(in[0], 0).
  ReluFwd,
  // out[0] = (in[0] > 0) * in[1]           (in[0] = forward input, in[1] = dy)
  ReluBwd,
  // As SwigluFwd with gelu (the tanh approximation of GeluFwd, Hugging Face's gelu_pytorch_tanh) for silu:
  // in[0] = [gate | up], 2f columns; out[0] = gelu(gate) * up, f columns.
  GegluFwd,
  // in[0] = forward input [gate | up], in[1] = dy (f columns); out[0] = [dgate | dup] (2f columns).
  GegluBwd,
  // Sequence parallelism (docs/plan-format.md, "Sequence parallelism"). A sequence-sharded buffer holds this
  // rank's rows of the sequence in the plan's group layout (SpLayout below): [B, S/tp, cols].
  // AllGather: in[0] = this rank's local rows of attrs.chunks whole groups for a batch range, a region of a
  // sharded buffer; out[0] = the full rows of those groups for the same batch range and columns, a region of
  // an unsharded buffer, rows in position order (group by group: rank 0's part, rank 1's, ...).
  AllGather,
  // ReduceScatter: in[0] = the full rows of attrs.chunks whole groups (partial sums over the group's ranks),
  // out[0] = this rank's local rows of those groups holding the sum over every rank ("(+)=" as above).
  ReduceScatter,
};

const char* to_string(Stream s);
const char* to_string(Phase p);
const char* to_string(Block b);
const char* to_string(OpKind k);
// Every OpKind by its to_string name (a trace event's "cat").
const std::map<std::string, OpKind>& kinds_by_name();
const char* to_string(OpCode c);
OpKind kind_of(OpCode c);
// The opcodes of an MLP activation, forward and backward.
struct ActivationCodes {
  OpCode fwd, bwd;
};
ActivationCodes activation_codes(Activation a);
// AllReduce, AllGather, ReduceScatter: run on the communication stream, costed by the profile's collectives.
// Inline: the builder, the cost lookups and the simulator ask it of every op.
inline bool collective(OpKind k) {
  return k == OpKind::AllReduce || k == OpKind::AllGather || k == OpKind::ReduceScatter;
}
// Costed by the bytes it moves (everything but GEMMs, attention and collectives).
inline bool memory_bound(OpKind k) { return k != OpKind::Gemm && k != OpKind::Attention && !collective(k); }

enum class BufferRole : uint8_t { Param, Grad, OptState, Activation, Workspace, Data };
const char* to_string(BufferRole r);

// Which parameter a Param/Grad/OptState buffer holds, so that every rank can initialise its shard
// from the same full (unsharded) tensor: see shard_of() below.
enum class ParamKind : uint8_t {
  None, QkvWeight, QkvBias, ProjWeight, ProjBias, Fc1Weight, Fc1Bias, Fc2Weight, Fc2Bias,
  AttnNormGamma, AttnNormBeta, MlpNormGamma, MlpNormBeta, FinalNormGamma, FinalNormBeta,
  TokenEmbedding, PositionEmbedding, HeadWeight,
  // QK-norm gains (replicated): per head [1, head_dim]; full (tp = 1 only) [1, heads*head_dim] for the
  // queries and [1, kv_heads*head_dim] for the keys.
  QNormGamma, KNormGamma,
  // Post / sandwich norms on a block's reduced output (appended: the values above seed parameter init).
  AttnPostNormGamma, AttnPostNormBeta, MlpPostNormGamma, MlpPostNormBeta,
};
const char* to_string(ParamKind k);

struct BufferDesc {
  std::string name;  // e.g. "L3.mlp.fc1.w", "L3.mlp.fc1.w.grad", "L3.x_mid", "ps.attn.p0.s1.c0"
  BufferRole role = BufferRole::Activation;
  ParamKind param = ParamKind::None;  // for Param, Grad and OptState buffers
  int layer = -1;                     // -1 for buffers that belong to no layer
  int64_t batch = 1, seq = 1, cols = 1;
  int64_t elements() const { return batch * seq * cols; }
};

struct Region {
  int32_t buffer = -1;
  int64_t b0 = 0, b1 = 0;  // batch range [b0, b1)
  int64_t s0 = 0, s1 = 0;  // seq range [s0, s1)
  int64_t c0 = 0, c1 = 0;  // column range [c0, c1)
  int64_t rows() const { return (b1 - b0) * (s1 - s0); }
  int64_t cols() const { return c1 - c0; }
  int64_t elements() const { return rows() * cols(); }
  bool valid() const { return buffer >= 0; }
  bool operator==(const Region&) const = default;
};

// Whether `r` is one contiguous run of buffer `b` (whole rows of one batch entry, or of every sequence
// position): a collective on it runs in place, on any other region through a staging array.
inline bool region_contiguous(const BufferDesc& b, const Region& r) {
  const bool full_rows = r.c0 == 0 && r.c1 == b.cols;
  return full_rows && (r.b1 - r.b0 <= 1 || (r.s0 == 0 && r.s1 == b.seq));
}

enum class ReduceOp : uint8_t { Sum, Max };
const char* to_string(ReduceOp r);

struct OpAttrs {
  bool accumulate = false;         // see "(+)=" above
  bool accumulate_params = false;  // norm backward: gamma/beta gradients
  int16_t heads = 0, kv_heads = 0, head_dim = 0;
  int16_t chunks = 1;
  float eps = 1e-5f;
  bool weight_decay = false;       // optimizer: this parameter decays (matrices; not biases or norm gains)
  ReduceOp reduce = ReduceOp::Sum; // AllReduce: how the group combines its elements
  int32_t vocab = 0;               // vocabulary-parallel ops: the full vocabulary; 0: unsharded
  // Attention features (see AttnFwd, AttnBwd, RopeFwd above); 0 keeps the plain behaviour.
  int32_t window = 0;              // attention: keys each query sees (sliding window); 0: all earlier keys
  int32_t overwrite_end = 0;       // AttnBwd with accumulate: dK/dV rows below this seq are written
  int16_t rotary_dims = 0;         // rope: leading columns of each head that are rotated; 0: all
  // PositionAdd on a sequence-sharded buffer: the plan's group count g (> 0), so that a local row's position
  // is sp_layout(...).position(rank, row); 0: the row's seq index.
  int16_t sp_groups = 0;
  // GEMMs: how many products the backends run it as. Rows that slice the sequence of several batch entries
  // are not evenly spaced, so each entry's block of rows is its own product (the CPU backend's Eigen runs,
  // CUDA's strided batch; a weight gradient sums one product per block). 1: one product. Set by the builder.
  int32_t row_blocks = 1;
};

// Where a rank's rows of a sequence-sharded buffer come from. The sequence [0, seq) is cut into `groups`
// groups of seq/groups positions; of each group, rank r holds the r-th of tp equal parts, and keeps its
// parts group after group: local row t lies in group t / part at offset t % part (part = seq/(groups tp)).
// groups == 1 is Megatron's layout (rank r holds [r seq/tp, (r+1) seq/tp)); a plan with sequence slices
// uses one group per slice, so that every slice's rows are spread evenly over the ranks.
struct SpLayout {
  int64_t seq = 1;
  int64_t groups = 1;
  int tp = 1;
  int64_t part() const { return seq / (groups * tp); }
  int64_t local_rows() const { return seq / tp; }
  // Position in the sequence of local row `row` (0 <= row < local_rows()) on `rank`.
  int64_t position(int rank, int64_t row) const {
    const int64_t p = part();
    return (row / p) * (seq / groups) + int64_t(rank) * p + row % p;
  }
  // The first local row of `group` (a group's local rows are contiguous).
  int64_t first_local_row(int64_t group) const { return group * part(); }
};


// The vocabulary ids a vocabulary-parallel op sees on `rank`: [first, first + width), of which those
// below `limit` are real. attrs.vocab == 0 means the op holds the whole vocabulary (first 0, limit width).
struct VocabShard {
  int64_t first = 0, width = 0, limit = 0;
  bool holds(int64_t id) const { return id >= first && id < first + width && id < limit; }
  // How many of the shard's columns are real ids (the rest of the last shard is padding; none may be real).
  int64_t real() const { return std::max<int64_t>(0, std::min(width, limit - first)); }
};
inline VocabShard vocab_shard(const OpAttrs& attrs, int rank, int64_t width) {
  if (attrs.vocab <= 0) return {0, width, width};
  return {int64_t(rank) * width, width, attrs.vocab};
}

constexpr int kMaxIn = 8;
constexpr int kMaxOut = 4;

struct Op {
  // Provided, not defaulted: value-initialising an Op (vector::emplace_back(), Op{}) then runs the member
  // initialisers below only, instead of first zeroing all of its bytes (the tuner's builds emit millions).
  // attrs() is value-initialised still: zeroed padding keeps two equal OpAttrs equal byte for byte.
  Op() noexcept : attrs() {}

  int32_t index = 0;  // position in Schedule::ops
  // Identity, rendered by op_id(): "L3.bwd.mlp.fc2.dgrad.s1" (layer, phase, block, name, slice[, chunk]).
  int16_t layer = -1;       // -1 for embedding/head/optimizer-global ops
  Phase phase = Phase::Forward;
  Block block = Block::None;
  const char* name = "";    // static string: "qkv", "fc2.dgrad", "ar", "norm.bwd", ...
  int8_t slice = -1;        // -1: not sliced
  int8_t chunk = -1;        // -1: not chunked (q == 1)
  OpKind kind = OpKind::Elementwise;
  OpCode code = OpCode::ResidualAdd;
  Stream stream = Stream::Compute;
  OpAttrs attrs;
  std::array<Region, kMaxIn> in{};
  std::array<Region, kMaxOut> out{};
  uint8_t n_in = 0, n_out = 0;
  // GEMM shape (C[m,n] = A[m,k] B[k,n]) for Gemm ops; for others m = rows, n = cols, k = 0.
  int64_t m = 0, n = 0, k = 0;
  double flops = 0;     // floating-point operations as executed (attention: masked blocks included)
  double bytes = 0;     // bytes read + written (AllReduce: the message size)
  // Of `bytes`, those in rows a collective copied out of its staging array right before this op on the same
  // core (schedule_fresh_rows.cpp), and that collective's output bytes: a CPU profile with a cache term reads
  // them from cache when they fit (MemoryProfile::cache_bytes). 0: none.
  double fresh_bytes = 0, fresh_from_bytes = 0;
  DType dtype = DType::BF16;
  std::vector<int32_t> deps;  // ops on *other* streams that must finish first (indices, ascending)
};

struct Schedule {
  ModelSpec model;
  Plan plan;
  std::vector<BufferDesc> buffers;
  std::vector<Op> ops;  // program order
};

std::string op_id(const Op& op);  // stable, readable, unique within a schedule

// Options that change the IR but are not part of the plan.
enum class OptimizerKind : uint8_t { Adam, SgdMomentum };
// The optimizer's name on command lines and in trace headers ("adam", "sgd"), and the kind a name stands for
// (nullopt: no optimizer of that name).
const char* to_string(OptimizerKind k);
std::optional<OptimizerKind> optimizer_kind_named(const std::string& name);
struct BuildOptions {
  OptimizerKind optimizer = OptimizerKind::Adam;
  bool include_optimizer = true;
  // false: buffers get no names (BufferDesc::name empty), for schedules that are timed, never shown (the
  // tuner's probes).
  bool buffer_names = true;
};

// Builds the IR for one training iteration (forward, backward, optimizer step) on one rank.
// Validates the plan against the model first (BadInput on mismatch).
Schedule build_schedule(const ModelSpec& model, const Plan& plan, const BuildOptions& options = {});

// Bytes one rank holds: every buffer in the model's dtype, optimizer states in fp32, and for 16-bit models
// the fp32 master copy each backend keeps beside every Param buffer; under ZeRO-1
// (s.model.training.zero == 1) the master copies and optimizer states divided by the data-parallel degree.
// Adam: 16 bytes per parameter (bf16: 2 + 2 + 4 + 8; fp32: 4 + 4 + 8), ZeRO-1 bf16: 4 + 12/dp.
int64_t schedule_memory_bytes(const Schedule& s);

// Global (unsharded) coordinates of a local parameter element, so every rank and the tp=1 reference
// initialise identical full tensors: given a Param buffer and a local (row, col), returns the full
// tensor's (row, col). The full tensor has shape full_shape(...).
struct ParamCoord { int64_t row, col; };
ParamCoord shard_of(const ModelSpec& model, const BufferDesc& buf, int rank, int64_t row, int64_t col);
std::array<int64_t, 2> full_shape(const ModelSpec& model, const BufferDesc& buf);
// True for the padding of a vocabulary shard: an element shard_of maps beyond the full tensor's vocabulary
// (the last rank's shard when tp does not divide the vocabulary). It holds zeros and is never compared.
bool vocab_padding(const ModelSpec& model, const BufferDesc& buf, const ParamCoord& at);

}  // namespace domino
