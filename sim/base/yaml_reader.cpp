// yaml_reader.cpp: strict YAML mapping reader with located, suggestive error messages.
#include "sim/base/yaml_reader.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <type_traits>

namespace domino {

namespace {

// The start of a file's second document, if it has one: the parse stops there. Not YAML::LoadAll, which
// parses every document and, on fuzzed model files, ran out of memory within seconds (this ran 659k inputs
// clean).
class SecondDocument final : public YAML::EventHandler {
 public:
  struct Found {
    YAML::Mark mark;
  };
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) throw Found{mark};
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
  }
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
};

}  // namespace

// One document per file: a second one ("---") would be ignored, and whatever it says with it.
YAML::Node load_yaml_string(const std::string& text, const std::string& name) {
  try {
    YAML::Node first = YAML::Load(text);
    std::istringstream in(text);
    YAML::Parser parser(in);
    SecondDocument probe;
    try {
      if (parser.HandleNextDocument(probe)) parser.HandleNextDocument(probe);
    } catch (const SecondDocument::Found& second) {
      throw_bad_input(SourceLoc{name, second.mark.line + 1, second.mark.column + 1},
                      "a second YAML document ('---'): a file holds one document");
    }
    return first;
  } catch (const YAML::Exception& e) {
    SourceLoc loc{name, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.mark.column >= 0 ? e.mark.column + 1 : 0};
    throw_bad_input(loc, "YAML syntax error: " + e.msg);
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_bad_input(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_yaml_string(ss.str(), path);
}

SourceLoc loc_of(const std::string& file, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return SourceLoc{file, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0};
}

std::string key_name(const std::string& file, const std::string& context, const YAML::Node& key) {
  if (!key.IsScalar() && !key.IsNull()) throw_bad_input(loc_of(file, key), context + ": keys must be plain names");
  return key.as<std::string>();
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_key(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(key, c);
    if (d < best_d) best_d = d, best = c;
  }
  // A suggestion is only useful for a plausible typo: at most a third of the key's letters changed.
  if (best.empty() || best_d > std::max<size_t>(2, key.size() / 3)) return "";
  return best;
}

// yaml-cpp keeps a key given twice silently (the first wins): every mapping read here must not be ambiguous.
YamlMap::YamlMap(const YAML::Node& node, std::string file, std::string context)
    : node_(node), file_(std::move(file)), context_(std::move(context)) {
  if (!node_.IsMap()) {
    throw_bad_input(where(), context_ + " must be a mapping of keys to values");
  }
  std::map<std::string, int> first_line;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const SourceLoc at = loc_of(file_, it->first);
    const auto [prev, inserted] = first_line.emplace(key_name(file_, context_, it->first), at.line);
    if (!inserted)
      throw_bad_input(at, context_ + ": duplicate key '" + prev->first + "' (first given at line " +
                              std::to_string(prev->second) + ")");
  }
}

bool YamlMap::has(const std::string& key) const {
  const YAML::Node v = node_[key];
  if (!v.IsDefined()) return false;
  if (v.IsNull()) fail(key, "has no value: give one, or leave the key out for its default");
  return true;
}

SourceLoc YamlMap::where(const std::string& key) const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (key_name(file_, context_, it->first) == key) return loc_of(file_, it->first);
  }
  return where();
}

void YamlMap::fail(const std::string& key, const std::string& message) const {
  throw_bad_input(where(key), context_ + ": '" + key + "': " + message);
}

YAML::Node YamlMap::value(const std::string& key) const {
  const YAML::Node v = node_[key];
  if (!v.IsDefined()) throw_bad_input(where(), context_ + ": missing required key '" + key + "'");
  if (v.IsNull()) fail(key, "has no value");
  return v;
}

void YamlMap::allow(const std::string& key) {
  seen_.insert(key);
  known_.push_back(key);
}

template <typename T>
static T convert(const YamlMap& m, const std::string& key, const YAML::Node& v, const char* what) {
  if (!v.IsScalar()) m.fail(key, std::string("expected ") + what + ", got a " + (v.IsMap() ? "mapping" : "list"));
  // yaml-cpp converts a quoted "2" to a number as readily as 2: the quotes made it a string.
  if constexpr (!std::is_same_v<T, std::string>)
    if (v.Tag() == "!")
      m.fail(key, std::string("expected ") + what + ", got the quoted string \"" + v.Scalar() + "\"");
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    m.fail(key, std::string("expected ") + what + ", got '" + v.Scalar() + "'");
  }
}

int64_t YamlMap::get_int(const std::string& key) {
  allow(key);
  return convert<int64_t>(*this, key, value(key), "an integer");
}
// Every number a file gives is finite: an infinite bandwidth or latency would only surface later, as an
// op's infinite time, far from the line that said it.
double YamlMap::get_double(const std::string& key) {
  allow(key);
  const double v = convert<double>(*this, key, value(key), "a number");
  if (!std::isfinite(v)) throw_bad_input(where(key), context_ + ": '" + key + "' must be a finite number");
  return v;
}
bool YamlMap::get_bool(const std::string& key) {
  allow(key);
  return convert<bool>(*this, key, value(key), "true or false");
}
std::string YamlMap::get_string(const std::string& key) {
  allow(key);
  return convert<std::string>(*this, key, value(key), "a string");
}
std::string YamlMap::get_enum(const std::string& key, const std::vector<std::string>& allowed) {
  const std::string v = get_string(key);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  const std::string near = closest_key(v, allowed);
  fail(key, "'" + v + "' is not one of: " + list + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
}
YAML::Node YamlMap::get_node(const std::string& key) {
  allow(key);
  return value(key);
}

std::optional<int64_t> YamlMap::opt_int(const std::string& key) {
  allow(key);
  if (!has(key)) return std::nullopt;
  return get_int(key);
}
std::optional<double> YamlMap::opt_double(const std::string& key) {
  allow(key);
  if (!has(key)) return std::nullopt;
  return get_double(key);
}
std::optional<bool> YamlMap::opt_bool(const std::string& key) {
  allow(key);
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}
std::optional<std::string> YamlMap::opt_string(const std::string& key) {
  allow(key);
  if (!has(key)) return std::nullopt;
  return get_string(key);
}
std::optional<std::string> YamlMap::opt_enum(const std::string& key, const std::vector<std::string>& allowed) {
  allow(key);
  if (!has(key)) return std::nullopt;
  return get_enum(key, allowed);
}
std::optional<YAML::Node> YamlMap::opt_node(const std::string& key) {
  allow(key);
  if (!has(key)) return std::nullopt;
  return node_[key];
}

void YamlMap::finish(const std::vector<std::string>& extra_valid_keys) const {
  std::vector<std::string> valid = known_;
  valid.insert(valid.end(), extra_valid_keys.begin(), extra_valid_keys.end());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string k = key_name(file_, context_, it->first);
    if (seen_.count(k) || std::find(valid.begin(), valid.end(), k) != valid.end()) continue;
    const std::string near = closest_key(k, valid);
    throw_bad_input(loc_of(file_, it->first),
                    context_ + ": unknown key '" + k + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)"));
  }
}

int checked_int(const YamlMap& map, const std::string& key, int64_t v) {
  if (v < INT_MIN || v > INT_MAX) map.fail(key, "value " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

}  // namespace domino
