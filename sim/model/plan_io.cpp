// plan_io.cpp: plan files (docs/plan-format.md). Reading is strict (unknown keys rejected, every error
// located at file:line:column); writing is deterministic, byte-identical for identical plans, with runs
// of identical layers folded into ranges.
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/model/plan_internal.hpp"
#include "sim/base/yaml_reader.hpp"
#include "sim/base/files.hpp"

namespace domino {
namespace {

std::string layer_range_str(int a, int b) {
  return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
}

// Declares every key a mapping may hold and rejects the others before reading any: a misspelled key is
// reported as such (with a suggestion), not as the required key it was meant to be.
void expect_keys(YamlMap& y, std::initializer_list<const char*> keys) {
  for (const char* k : keys) y.allow(k);
  y.finish();
}

int parse_layer_index(const YAML::Node& n, const std::string& file, const std::string& ctx,
                      const std::string& text, int layers) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) {
    throw_bad_input(
        loc_of(file, n),
        ctx + ": 'layers': expected a layer number, a range like 0-79, or a list, got '" + text + "'");
  }
  if (v < 0 || v >= layers) {
    throw_bad_input(loc_of(file, n), ctx + ": 'layers': layer " + text + " is out of range: the model has " +
                                         std::to_string(layers) + " layers (0-" + std::to_string(layers - 1) +
                                         ")");
  }
  return int(v);
}

// "layers: 3", "layers: 0-79" or "layers: [0, 1, 2]".
std::vector<int> parse_layer_selection(const YAML::Node& n, const std::string& file, const std::string& ctx,
                                       int layers) {
  std::vector<int> out;
  if (n.IsSequence()) {
    for (const auto& e : n) {
      if (!e.IsScalar())
        throw_bad_input(loc_of(file, e), ctx + ": 'layers': list entries must be layer numbers");
      out.push_back(parse_layer_index(e, file, ctx, e.Scalar(), layers));
    }
    if (out.empty()) throw_bad_input(loc_of(file, n), ctx + ": 'layers': the list is empty");
    return out;
  }
  if (!n.IsScalar()) {
    throw_bad_input(loc_of(file, n),
                    ctx + ": 'layers': expected a layer number, a range like 0-79, or a list");
  }
  const std::string t = n.Scalar();
  const size_t dash = t.find('-', 1);
  if (dash == std::string::npos) return {parse_layer_index(n, file, ctx, t, layers)};
  const int a = parse_layer_index(n, file, ctx, t.substr(0, dash), layers);
  const int b = parse_layer_index(n, file, ctx, t.substr(dash + 1), layers);
  if (b < a) throw_bad_input(loc_of(file, n), ctx + ": 'layers': range '" + t + "' ends before it starts");
  for (int l = a; l <= b; ++l) out.push_back(l);
  return out;
}

BlockPlan parse_block(const YAML::Node& n, const std::string& file, const std::string& context,
                      const ModelSpec& m) {
  YamlMap y(n, file, context);
  expect_keys(y, {"split", "p", "q", "overlap", "bwd_overlap", "order", "pipeline"});
  BlockPlan b;
  b.dim = y.opt_enum("split", {"batch", "sequence"}).value_or("batch") == "batch" ? SplitDim::Batch
                                                                                  : SplitDim::Sequence;
  b.p = checked_int(y, "p", y.get_int("p"));
  b.q = checked_int(y, "q", y.opt_int("q").value_or(1));
  const std::string ov = y.opt_enum("overlap", {"none", "intra", "inter"}).value_or("none");
  b.overlap = ov == "none" ? OverlapMode::None : ov == "intra" ? OverlapMode::Intra : OverlapMode::Inter;
  b.bwd_overlap = y.opt_bool("bwd_overlap").value_or(false);
  const std::string order = y.opt_enum("order", {"deep", "deepspeed"}).value_or("deep");
  b.order = order == "deep" ? SliceOrder::Deep : SliceOrder::DeepSpeed;
  b.pipeline = checked_int(y, "pipeline", y.opt_int("pipeline").value_or(1));
  std::string key;
  const std::string why = detail::block_problem(b, m, &key);
  if (!why.empty()) y.fail(key, why);
  return b;
}

// Strings are always double-quoted: a fingerprint like "1e5" or a name like "no" must stay a string.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\x", out += hex[(c >> 4) & 0xf], out += hex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string block_yaml(const BlockPlan& b) {
  return std::string("{split: ") + to_string(b.dim) + ", p: " + std::to_string(b.p) +
         ", q: " + std::to_string(b.q) + ", overlap: " + to_string(b.overlap) +
         ", bwd_overlap: " + (b.bwd_overlap ? "true" : "false") +
         // Written only when not the default, so that plans in the deep order keep their bytes.
         (b.order == SliceOrder::Deep ? std::string() : std::string(", order: ") + to_string(b.order)) +
         (b.pipeline == 1 ? std::string() : ", pipeline: " + std::to_string(b.pipeline)) + "}";
}

// The plan's layer entries: every model layer covered by exactly one (a layer covered twice names both
// entries' lines, uncovered layers are listed as ranges).
void read_layer_entries(YamlMap& top, const std::string& path, const ModelSpec& model, Plan* plan) {
  Plan& p = *plan;
  const YAML::Node layers = top.get_node("layers");
  if (!layers.IsSequence()) top.fail("layers", "expected a list of layer entries");
  std::vector<int> owner_line(size_t(std::max(model.layers, 0)), 0);
  p.layers.assign(owner_line.size(), LayerPlan{});
  size_t index = 0;
  for (const auto& entry : layers) {
    const std::string ctx = "plan layers[" + std::to_string(index++) + "]";
    YamlMap e(entry, path, ctx);
    expect_keys(e, {"layers", "attn", "mlp"});
    const YAML::Node sel = e.get_node("layers");
    const std::vector<int> which = parse_layer_selection(sel, path, ctx, model.layers);
    LayerPlan lp;
    lp.attn = parse_block(e.get_node("attn"), path, ctx + ".attn", model);
    lp.mlp = parse_block(e.get_node("mlp"), path, ctx + ".mlp", model);
    const int line = loc_of(path, sel).line;
    for (const int l : which) {
      if (owner_line[size_t(l)] != 0) {
        throw_bad_input(loc_of(path, sel), ctx + ": 'layers': layer " + std::to_string(l) +
                                               " is already covered by the entry at line " +
                                               std::to_string(owner_line[size_t(l)]));
      }
      owner_line[size_t(l)] = line;
      p.layers[size_t(l)] = lp;
    }
  }
  std::string missing;
  for (size_t l = 0; l < owner_line.size(); ++l) {
    if (owner_line[l] != 0) continue;
    size_t e = l;
    while (e + 1 < owner_line.size() && owner_line[e + 1] == 0) ++e;
    missing += (missing.empty() ? "" : ", ") + layer_range_str(int(l), int(e));
    l = e;
  }
  if (!missing.empty())
    top.fail("layers", "no entry covers layer(s) " + missing + " (every layer needs exactly one)");
}

Plan read_plan(const YAML::Node& root, const std::string& path, const ModelSpec& model, bool force) {
  YamlMap top(root, path, "plan");
  expect_keys(top, {"format_version", "model", "tp", "profile", "strategy", "comm", "sequence_parallel", "recompute",
                    "layers", "provenance"});
  Plan p;
  p.format_version = checked_int(top, "format_version", top.get_int("format_version"));
  if (p.format_version != 1) {
    top.fail("format_version",
             "version " + std::to_string(p.format_version) + " is not supported (this build reads 1)");
  }
  {
    YamlMap mm(top.get_node("model"), path, "plan model");
    expect_keys(mm, {"name", "fingerprint"});
    p.model_name = mm.get_string("name");
    p.model_fingerprint = mm.get_string("fingerprint");
  }
  p.tp = checked_int(top, "tp", top.get_int("tp"));
  if (p.tp < 1) top.fail("tp", "must be at least 1");
  // Before the layers: a plan for another model or TP degree is named as such, not by a layer that model
  // lacks (a model of this name with another shape is told once the whole plan is read).
  if (!force && (p.model_name != model.name || p.tp != model.tp))
    top.fail(p.model_name == model.name ? "tp" : "model", detail::model_mismatch(p, model));
  p.profile = top.opt_string("profile").value_or("");
  p.strategy = top.opt_string("strategy").value_or("custom");
  p.comm_enabled = top.opt_bool("comm").value_or(true);
  p.sequence_parallel = top.opt_bool("sequence_parallel").value_or(false);
  if (const auto rc = top.opt_string("recompute")) {
    const auto mode = recompute_from_name(*rc);
    if (!mode) top.fail("recompute", "'" + *rc + "' is not one of none, selective, full");
    p.recompute = *mode;
  }

  read_layer_entries(top, path, model, &p);

  if (const auto prov = top.opt_node("provenance")) {
    if (!prov->IsMap()) top.fail("provenance", "expected a mapping of names to text");
    for (auto it = prov->begin(); it != prov->end(); ++it) {
      const std::string key = key_name(path, "plan provenance", it->first);
      if (!it->second.IsScalar()) {
        throw_bad_input(loc_of(path, it->second), "plan provenance: '" + key + "': values must be text");
      }
      p.provenance[key] = it->second.Scalar();
    }
  }
  if (!force) {
    const std::string why = detail::model_mismatch(p, model);
    if (!why.empty()) top.fail(p.model_name == model.name && p.tp != model.tp ? "tp" : "model", why);
  }
  if (const std::string why = detail::recompute_problem(p, model); !why.empty())
    top.fail("recompute", why);
  if (const std::string why = detail::sp_problem(p, model); !why.empty())
    top.fail(top.has("sequence_parallel") ? "sequence_parallel" : "layers", why);
  validate_plan(p, model, force);
  return p;
}

}  // namespace

Plan load_plan(const std::string& path, const ModelSpec& model, bool force) {
  return read_plan(load_yaml_file(path), path, model, force);
}

Plan load_plan_string(const std::string& yaml, const std::string& name, const ModelSpec& model, bool force) {
  return read_plan(load_yaml_string(yaml, name), name, model, force);
}

std::string plan_to_yaml(const Plan& plan) {
  std::string y = "# Domino plan (docs/plan-format.md)\n";
  y += "format_version: " + std::to_string(plan.format_version) + "\n";
  y += "model:\n  name: " + quoted(plan.model_name) + "\n  fingerprint: " + quoted(plan.model_fingerprint) +
       "\n";
  y += "tp: " + std::to_string(plan.tp) + "\n";
  y += "profile: " + quoted(plan.profile) + "\n";
  y += "strategy: " + quoted(plan.strategy) + "\n";
  y += std::string("comm: ") + (plan.comm_enabled ? "true" : "false") + "\n";
  // Written only when on, so that plans without it stay byte-identical.
  if (plan.sequence_parallel) y += "sequence_parallel: true\n";
  if (plan.recompute != Recompute::None) y += std::string("recompute: ") + to_string(plan.recompute) + "\n";
  y += "layers:\n";
  for (size_t l = 0; l < plan.layers.size();) {
    size_t e = l;
    while (e + 1 < plan.layers.size() && plan.layers[e + 1] == plan.layers[l]) ++e;
    y += "  - layers: " + layer_range_str(int(l), int(e)) + "\n";
    y += "    attn: " + block_yaml(plan.layers[l].attn) + "\n";
    y += "    mlp: " + block_yaml(plan.layers[l].mlp) + "\n";
    l = e + 1;
  }
  if (plan.layers.empty()) y.replace(y.size() - 1, 1, " []\n");
  if (plan.provenance.empty()) {
    y += "provenance: {}\n";
  } else {
    y += "provenance:\n";
    for (const auto& [k, v] : plan.provenance) y += "  " + quoted(k) + ": " + quoted(v) + "\n";
  }
  return y;
}

void save_plan(const Plan& plan, const std::string& path) { write_file_atomic(path, plan_to_yaml(plan)); }

}  // namespace domino
