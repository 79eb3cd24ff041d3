// hf_reader.cpp: the config.json reader: typed accessors over a JSON object, messages located at the key's
// line and column, and the record of which keys were read (the importer refuses the others unless they are
// on its list of harmless keys).
#include <cctype>
#include <climits>
#include <string>

#include "sim/model/hf_import_internal.hpp"

namespace domino::hf {

namespace {

using nlohmann::json;

// A JSON value for a message: scalars as written (long strings cut), containers by kind. Never dump() a
// container: a hostile file nests arrays deeply enough to exhaust the stack of a recursive printer.
std::string describe(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

SourceLoc loc_at_byte(const std::string& path, const std::string& text, size_t byte) {
  SourceLoc loc{path, 1, 1};
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.column = 1;
    } else {
      ++loc.column;
    }
  }
  return loc;
}

}  // namespace

std::string join(const std::vector<std::string>& v, size_t from) {
  std::string s;
  for (size_t i = from; i < v.size(); ++i) s += (s.empty() ? "" : ", ") + v[i];
  return s;
}

std::string Reader::present(const Spellings& keys) const {
  mark(keys);
  for (const auto& k : keys) {
    if (j_.contains(k) && !j_[k].is_null()) return k;
  }
  return "";
}

SourceLoc Reader::where(const std::string& key) const {
  const std::string quoted = "\"" + key + "\"";
  for (size_t pos = text_.find(quoted); pos != std::string::npos; pos = text_.find(quoted, pos + 1)) {
    size_t after = pos + quoted.size();
    while (after < text_.size() && std::isspace(static_cast<unsigned char>(text_[after]))) ++after;
    if (after < text_.size() && text_[after] == ':') return loc_at_byte(path_, text_, pos);
  }
  return SourceLoc{path_, 1, 1};
}

void Reader::fail(const std::string& key, const std::string& message) const {
  throw_bad_input(where(key), "config.json '" + key + "': " + message);
}

void Reader::fail_file(const std::string& message) const {
  throw_bad_input(SourceLoc{path_, 1, 1}, "config.json: " + message);
}

std::optional<int> Reader::opt_int(const Spellings& keys) const {
  const std::string k = present(keys);
  if (k.empty()) return std::nullopt;
  const json& v = j_[k];
  if (!v.is_number_integer()) fail(k, "expected an integer, got " + describe(v));
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(INT_MAX)
                             : (v.get<int64_t>() > INT_MAX || v.get<int64_t>() < INT_MIN)) {
    fail(k, "value " + describe(v) + " is out of range");
  }
  return static_cast<int>(v.get<int64_t>());
}

int Reader::get_int(const Spellings& keys) const {
  if (auto v = opt_int(keys)) return *v;
  fail_file("missing required key '" + keys.front() + "'" + (keys.size() > 1 ? " (or " + join(keys, 1) + ")" : ""));
}

std::optional<std::string> Reader::opt_string(const Spellings& keys) const {
  const std::string k = present(keys);
  if (k.empty()) return std::nullopt;
  if (!j_[k].is_string()) fail(k, "expected a string, got " + describe(j_[k]));
  return j_[k].get<std::string>();
}

std::optional<bool> Reader::opt_bool(const std::string& key) const {
  if (present({key}).empty()) return std::nullopt;
  if (!j_[key].is_boolean()) fail(key, "expected true or false, got " + describe(j_[key]));
  return j_[key].get<bool>();
}

std::optional<double> Reader::opt_number(const std::string& key) const {
  if (present({key}).empty()) return std::nullopt;
  if (!j_[key].is_number()) fail(key, "expected a number, got " + describe(j_[key]));
  return j_[key].get<double>();
}

bool Reader::has(const std::string& key) const {
  mark({key});
  return j_.contains(key);
}

const json* Reader::value(const std::string& key) const {
  if (present({key}).empty()) return nullptr;
  return &j_[key];
}

std::vector<std::string> Reader::unread_keys() const {
  std::vector<std::string> keys;
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!it.value().is_null() && read_.count(it.key()) == 0) keys.push_back(it.key());
  }
  return keys;
}

}  // namespace domino::hf
