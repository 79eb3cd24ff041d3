// profile_checks.hpp: the checks and YAML readers the profile loader's files share (profile.cpp reads the
// whole profile, profile_collectives.cpp a collective level). Internal to sim/cost.
#pragma once

#include <string>
#include <vector>

#include "sim/base/yaml_reader.hpp"
#include "sim/cost/profile.hpp"

namespace domino::profile_io {

std::string num(double v);  // shortest text of a number, as messages and the writer print it

void require_positive(const SourceLoc& at, const std::string& what, double v);
void require_non_negative(const SourceLoc& at, const std::string& what, double v);
// Bytes strictly increasing, every figure positive; a row's problem is located at its entry of `at`.
void check_bus_table(const std::vector<BusBandwidthPoint>& table, const std::string& what,
                     const std::vector<SourceLoc>& at);

// A list of fixed-length rows of numbers, e.g. [[1, 0.5], [128, 0.8]]; each row's location in `locs`.
std::vector<std::vector<double>> read_rows(const std::string& file, const YAML::Node& list, const std::string& what,
                                           size_t width, const char* row_form, std::vector<SourceLoc>& locs);
double positive(YamlMap& m, const std::string& key);
double non_negative(YamlMap& m, const std::string& key);

// A collective level (collectives.intra_node or inter_node) in either form (docs/profile-format.md).
CollectiveProfile read_collective(const std::string& file, const YAML::Node& node, const std::string& ctx,
                                  bool intra_node);
// The invariants read_collective enforces, for profiles built in code; BadInput naming the field.
void check_collective(const SourceLoc& at, const CollectiveProfile& c, const std::string& ctx, bool intra_node);

}  // namespace domino::profile_io
