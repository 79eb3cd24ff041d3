// profile_checks.hpp: the checks and YAML readers the profile loader's files share (profile.cpp reads the
// whole profile, profile_collectives.cpp a collective level, profile_gpu.cpp the gpu section). Internal to
// sim/cost.
#pragma once

#include <string>
#include <vector>

#include "sim/base/yaml_reader.hpp"
#include "sim/cost/profile.hpp"

namespace domino::profile_io {

std::string num(double v);  // shortest text of a number, as messages and the writer print it

void require_positive(const SourceLoc& at, const std::string& what, double v);
void require_non_negative(const SourceLoc& at, const std::string& what, double v);
void require_fraction(const SourceLoc& at, const std::string& what, double v);  // (0, 1]
// Bytes strictly increasing, every figure positive; a row's problem is located at its entry of `at`.
void check_bus_table(const std::vector<BusBandwidthPoint>& table, const std::string& what,
                     const std::vector<SourceLoc>& at);

// A list of fixed-length rows of numbers, e.g. [[1, 0.5], [128, 0.8]]; each row's location in `locs`. Rows of
// any of other_widths' lengths are accepted too.
std::vector<std::vector<double>> read_rows(const std::string& file, const YAML::Node& list,
                                           const std::string& what, size_t width, const char* row_form,
                                           std::vector<SourceLoc>& locs,
                                           std::vector<size_t> other_widths = {});
// A GEMM table in any of its row forms (profile_gemm_table.cpp), checked; and the checks alone.
std::vector<GemmTiming> read_gemm_table(const std::string& file, const YAML::Node& list, const std::string& what);
void check_gemm_table(const std::vector<GemmTiming>& table, const std::string& what, const std::vector<SourceLoc>& at);
double positive(YamlMap& m, const std::string& key);
double non_negative(YamlMap& m, const std::string& key);
int count_in(YamlMap& m, const std::string& key, int lo, int hi);  // a whole count in [lo, hi]

// A collective level (collectives.intra_node or inter_node) in either form (docs/profile-format.md).
CollectiveProfile read_collective(const std::string& file, const YAML::Node& node, const std::string& ctx,
                                  bool intra_node);
// The invariants read_collective enforces, for profiles built in code; BadInput naming the field.
void check_collective(const SourceLoc& at, const CollectiveProfile& c, const std::string& ctx, bool intra_node);

// The gpu section, or else the flat interference factors, of the profile's root map into p (collectives
// read already: the section's SMs are checked against theirs).
void read_gpu_or_interference(YamlMap& root, const std::string& file, Profile& p);
// The invariants of p.gpu (present) that read_gpu_or_interference enforces; BadInput naming the field.
void check_gpu(const Profile& p, const SourceLoc& at);

}  // namespace domino::profile_io
