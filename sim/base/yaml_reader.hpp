// yaml_reader.hpp: strict reading of YAML mappings for every input format (model, plan, profile).
// Unknown keys are rejected with the closest valid key suggested; every message names file:line:column.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/base/error.hpp"

namespace domino {

// Loads a YAML file; a syntax error becomes a BadInput with its location.
YAML::Node load_yaml_file(const std::string& path);
YAML::Node load_yaml_string(const std::string& text, const std::string& name);

SourceLoc loc_of(const std::string& file, const YAML::Node& node);

// The name a mapping key spells; BadInput at the key when it is a list or a mapping ("[a]: 1"), which
// yaml-cpp accepts but no input format has.
std::string key_name(const std::string& file, const std::string& context, const YAML::Node& key);

// Closest candidate by edit distance, or "" when none is close enough to be a likely misspelling.
std::string closest_key(const std::string& key, const std::vector<std::string>& candidates);

// A mapping being read: every key must be consumed by get/opt, finish() rejects the rest.
class YamlMap {
 public:
  YamlMap(const YAML::Node& node, std::string file, std::string context);

  // Whether the key is given. A key written without a value (`comm:` or `comm: null`) is a BadInput: it says
  // something was meant, and reading it as absent would silently take the default.
  bool has(const std::string& key) const;
  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  SourceLoc where() const { return loc_of(file_, node_); }
  SourceLoc where(const std::string& key) const;

  // Required value; missing key or wrong type is a BadInput naming the key. A number or a boolean written in
  // quotes ("2") is a string, not a number: refused.
  int64_t get_int(const std::string& key);
  double get_double(const std::string& key);
  bool get_bool(const std::string& key);
  std::string get_string(const std::string& key);
  // One of `allowed`, with the closest suggested when it is not.
  std::string get_enum(const std::string& key, const std::vector<std::string>& allowed);
  YAML::Node get_node(const std::string& key);

  std::optional<int64_t> opt_int(const std::string& key);
  std::optional<double> opt_double(const std::string& key);
  std::optional<bool> opt_bool(const std::string& key);
  std::optional<std::string> opt_string(const std::string& key);
  std::optional<std::string> opt_enum(const std::string& key, const std::vector<std::string>& allowed);
  std::optional<YAML::Node> opt_node(const std::string& key);

  // Declares keys that are valid but read elsewhere (so finish() does not reject them).
  void allow(const std::string& key);
  // Rejects any key that was not read or allowed, suggesting the closest valid one.
  void finish(const std::vector<std::string>& extra_valid_keys = {}) const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  YAML::Node value(const std::string& key) const;
  YAML::Node node_;
  std::string file_;
  std::string context_;
  std::set<std::string> seen_;
  std::vector<std::string> known_;
};

// The value v read from `key` as an int; BadInput at the key when it lies beyond int's range, which a cast
// would wrap into a valid-looking value.
int checked_int(const YamlMap& map, const std::string& key, int64_t v);

}  // namespace domino
