// search_space.cpp: enumerates, folds and orders the per-block choices the tuner searches.
#include "tuner/search_space.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "sim/base/error.hpp"

namespace domino {
namespace {

auto order_key(const BlockPlan& b) {
  return std::make_tuple(b.p, b.q, b.pipeline, static_cast<int>(b.dim), static_cast<int>(b.overlap), b.bwd_overlap,
                         static_cast<int>(b.order));
}

bool fits(const ModelSpec& model, const BlockPlan& b, Block block, bool sequence_parallel) {
  const int64_t rows = b.dim == SplitDim::Batch ? model.micro_batch : model.seq_len;
  if (b.p < 1 || rows % b.p != 0) return false;
  if (b.q < 1 || model.hidden % b.q != 0) return false;
  // The plan validator is the authority (it knows constraints beyond divisibility).
  try {
    const BlockPlan plain;
    Plan plan = block == Block::Attn ? make_uniform_plan(model, b, plain, "probe")
                                     : make_uniform_plan(model, plain, b, "probe");
    plan.sequence_parallel = sequence_parallel;
    validate_plan(plan, model);
  } catch (const Error&) {
    return false;
  }
  return true;
}

void add_unique(std::vector<BlockPlan>& list, const BlockPlan& b) {
  if (std::find(list.begin(), list.end(), b) == list.end()) list.push_back(b);
}

// The values of a comma-separated list, each word read by parse_word (which throws on an unknown one),
// sorted and without repeats. An empty word (also an empty text) reaches parse_word as "".
template <typename T, typename ParseWord>
std::vector<T> parse_comma_list(const std::string& text, ParseWord parse_word) {
  std::vector<T> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t length = comma == std::string::npos ? std::string::npos : comma - start;
    out.push_back(parse_word(text.substr(start, length)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The plan validator refuses these choices (fits() drops them); say so, since the user asked for them.
void skip_structural_choices(const ModelSpec& model, const SearchOptions& o, SearchSpace* space) {
  const bool wants_q =
      std::any_of(o.q_values.begin(), o.q_values.end(), [&](int q) { return q > 1 && q <= o.max_q; });
  if (wants_q && model.norm_placement != NormPlacement::Pre) {
    space->skipped.push_back(
        fmt::format("column splits q>1 skipped: {}-norm blocks normalise whole rows of the "
                    "reduced block output",
                    to_string(model.norm_placement)));
  }
  const bool wants_ds = std::find(o.orders.begin(), o.orders.end(), SliceOrder::DeepSpeed) != o.orders.end();
  if (wants_ds && space->sequence_parallel) {
    space->skipped.push_back("order deepspeed skipped under sequence parallelism: not built in that order");
  } else if (wants_ds && model.residual == Residual::Parallel) {
    space->skipped.push_back(
        "order deepspeed skipped: DeepSpeed's Domino has no parallel attention/MLP blocks");
  }
}

}  // namespace

double SearchSpace::plans(int layers) const {
  return std::pow(double(attn.size()) * double(mlp.size()), layers);
}

BlockPlan canonical(const BlockPlan& b) {
  BlockPlan c = b;
  if (c.p == 1) c.dim = SplitDim::Batch, c.order = SliceOrder::Deep;
  if (c.p == 1 && c.q == 1 && c.overlap == OverlapMode::Intra) c.overlap = OverlapMode::None;
  return c;
}

bool simpler(const BlockPlan& a, const BlockPlan& b) { return order_key(a) < order_key(b); }

// Under sequence parallelism: unsliced blocks whose AllGather and ReduceScatter are pipelined with the GEMMs
// in c chunks (megatron-sp-overlap's choice, c = 4), for every c up to max_p.
void add_pipelined_choices(const ModelSpec& model, const SearchOptions& o, SearchSpace* space) {
  for (Block block : {Block::Attn, Block::Mlp}) {
    std::vector<BlockPlan>& list = block == Block::Attn ? space->attn : space->mlp;
    for (int c : {2, 4, 8}) {
      if (c > o.max_p) continue;
      for (bool bwd : o.bwd_overlaps) {
        BlockPlan b;
        b.bwd_overlap = bwd;
        b.pipeline = c;
        if (fits(model, b, block, true)) add_unique(list, b);
      }
    }
  }
}

SearchSpace make_search_space(const ModelSpec& model, const SearchOptions& o, bool sequence_parallel) {
  if (o.splits.empty()) throw_bad_input("search space: no split dimension allowed (--splits batch,sequence)");
  if (o.max_p < 1 || o.max_q < 1) throw_bad_input(fmt::format("search space: --max-p {} / --max-q {} must be at least 1", o.max_p, o.max_q));
  if (o.p_values.empty() || o.q_values.empty() || o.overlaps.empty() || o.bwd_overlaps.empty() || o.orders.empty())
    throw_bad_input("search space: an empty list of choices (p, q, overlap, backward overlap or order)");

  SearchSpace space;
  space.sequence_parallel = sequence_parallel;
  skip_structural_choices(model, o, &space);
  bool any_slicing = false;
  for (Block block : {Block::Attn, Block::Mlp}) {
    std::vector<BlockPlan>& list = block == Block::Attn ? space.attn : space.mlp;
    for (int p : o.p_values) {
      if (p > o.max_p) continue;
      for (SplitDim dim : o.splits) {
        for (int q : o.q_values) {
          if (q > o.max_q) continue;
          for (OverlapMode ov : o.overlaps) {
            for (bool bwd : o.bwd_overlaps) {
              for (SliceOrder order : o.orders) {
                const BlockPlan b = canonical(BlockPlan{dim, p, q, ov, bwd, order});
                if (!fits(model, b, block, sequence_parallel)) continue;
                if (b.p > 1) any_slicing = true;
                add_unique(list, b);
              }
            }
          }
        }
      }
    }
  }
  const bool wants_rows = std::any_of(o.p_values.begin(), o.p_values.end(), [&](int p) { return p > 1 && p <= o.max_p; });
  if (wants_rows && !any_slicing) {
    std::string dims;
    for (SplitDim d : o.splits) dims += fmt::format("{}{}", dims.empty() ? "" : ",", to_string(d));
    throw_bad_input(fmt::format(
        "empty search space: no row-slice count p in 2..{} divides the allowed split dimension ({}) of {} "
        "(micro_batch {}, seq_len {}); allow sequence splits with --splits batch,sequence",
        o.max_p, dims, model.name, model.micro_batch, model.seq_len));
  }
  if (sequence_parallel) add_pipelined_choices(model, o, &space);
  if (o.include_baselines) {
    const std::vector<const char*> baselines =
        sequence_parallel
            ? std::vector<const char*>{"megatron-sp-sync", "megatron-sp", "megatron-sp-overlap"}
            : std::vector<const char*>{"megatron-sync", "megatron-async", "domino-ds", "domino-deep"};
    for (const char* name : baselines) {
      try {
        const Plan plan = make_strategy_plan(name, model);
        for (const LayerPlan& l : plan.layers) {
          if (std::find(space.pinned.begin(), space.pinned.end(), l) == space.pinned.end()) space.pinned.push_back(l);
          const size_t before = space.attn.size() + space.mlp.size();
          add_unique(space.attn, l.attn);
          add_unique(space.mlp, l.mlp);
          if (space.attn.size() + space.mlp.size() != before)
            space.notes.push_back(fmt::format("added {}'s choice {}", name, layer_label(l)));
        }
      } catch (const Error&) {
        // A baseline the model cannot run (domino-ds: an odd micro-batch, or a model DeepSpeed's Domino does
        // not support) adds nothing.
      }
    }
  }
  if (space.attn.empty() || space.mlp.empty())
    throw_bad_input(fmt::format("empty search space for {} at tp {}: no choice fits the model", model.name, model.tp));
  auto by_order = [](const BlockPlan& a, const BlockPlan& b) { return simpler(a, b); };
  std::stable_sort(space.attn.begin(), space.attn.end(), by_order);
  std::stable_sort(space.mlp.begin(), space.mlp.end(), by_order);
  return space;
}

std::string describe(const SearchSpace& space, const SearchOptions& o) {
  std::string dims, ps, qs, orders;
  for (SplitDim d : o.splits) dims += fmt::format("{}{}", dims.empty() ? "" : ",", to_string(d));
  for (SliceOrder r : o.orders) orders += fmt::format("{}{}", orders.empty() ? "" : ",", to_string(r));
  for (int p : o.p_values)
    if (p <= o.max_p) ps += fmt::format("{}{}", ps.empty() ? "" : ",", p);
  for (int q : o.q_values)
    if (q <= o.max_q) qs += fmt::format("{}{}", qs.empty() ? "" : ",", q);
  std::string skipped;
  for (const std::string& why : space.skipped) skipped += "; " + why;
  return fmt::format(
      "{}attn {} x mlp {} choices per layer (splits {}; p {}; q {}; {}overlap {}; bwd overlap {}; orders {}{}{})",
      space.sequence_parallel ? "sequence parallel: " : "", space.attn.size(), space.mlp.size(), dims, ps, qs,
      space.sequence_parallel ? "GEMM pipelining 1,2,4,8; " : "", o.overlaps.size(), o.bwd_overlaps.size(), orders,
      o.include_baselines ? "; baselines' choices included" : "", skipped);
}

std::string block_label(const BlockPlan& b) {
  std::string s = b.p == 1 ? std::string("p1") : fmt::format("{} p{}", b.dim == SplitDim::Batch ? "bat" : "seq", b.p);
  s += fmt::format(" q{} {}", b.q, to_string(b.overlap));
  if (b.bwd_overlap) s += "+bwd";
  if (b.order == SliceOrder::DeepSpeed) s += " ds";
  if (b.pipeline > 1) s += fmt::format(" pipe{}", b.pipeline);
  return s;
}

std::string layer_label(const LayerPlan& l) { return fmt::format("attn[{}] mlp[{}]", block_label(l.attn), block_label(l.mlp)); }

std::vector<SplitDim> parse_splits(const std::string& text) {
  return parse_comma_list<SplitDim>(text, [](const std::string& word) -> SplitDim {
    if (word == "batch") return SplitDim::Batch;
    if (word == "sequence" || word == "seq") return SplitDim::Sequence;
    throw_bad_input(fmt::format("--splits: unknown split dimension '{}' (expected batch, sequence)", word));
  });
}

std::vector<SliceOrder> parse_orders(const std::string& text) {
  return parse_comma_list<SliceOrder>(text, [](const std::string& word) -> SliceOrder {
    if (word == "deep") return SliceOrder::Deep;
    if (word == "deepspeed") return SliceOrder::DeepSpeed;
    throw_bad_input(fmt::format("--orders: unknown slice order '{}' (expected deep, deepspeed)", word));
  });
}

}  // namespace domino
