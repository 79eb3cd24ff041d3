// profile_gemm_table.cpp: the GEMM table of a profile: its rows in any form ([m, n, k, time_us], one time
// for every transpose pair; [m, n, k, transpose_a, transpose_b, time_us]; [m, n, k, transpose_a,
// transpose_b, blocks, time_us], a whole op of `blocks` products of the shape), their order and checks, and
// which transpose pair each GEMM opcode runs.
#include <fmt/format.h>

#include <tuple>

#include "sim/base/whole_number.hpp"
#include "sim/cost/profile_checks.hpp"

namespace domino {

GemmTranspose gemm_transpose(OpCode code) {
  switch (code) {
    case OpCode::MatMulDgrad: return {false, true};
    case OpCode::MatMulWgrad: return {true, false};
    default: return {};
  }
}

bool gemm_row_less(const GemmTiming& x, const GemmTiming& y) {
  const auto key = [](const GemmTiming& r) {
    const GemmTranspose t = r.transpose.value_or(GemmTranspose{});
    return std::make_tuple(r.m, r.n, r.k, r.transpose.has_value(), t.a, t.b, r.blocks);
  };
  return key(x) < key(y);
}

namespace profile_io {

namespace {

std::string row_text(const GemmTiming& r) {
  if (!r.transpose) return fmt::format("[{}, {}, {}]", r.m, r.n, r.k);
  if (r.blocks > 1)
    return fmt::format("[{}, {}, {}, {}, {}, {}]", r.m, r.n, r.k, int(r.transpose->a), int(r.transpose->b),
                       r.blocks);
  return fmt::format("[{}, {}, {}, {}, {}]", r.m, r.n, r.k, int(r.transpose->a), int(r.transpose->b));
}

// A transpose flag: 0 (as stored) or 1 (transposed).
bool flag(double v, const SourceLoc& at, const std::string& what) {
  if (v != 0 && v != 1) throw_bad_input(at, what + ": transpose_a and transpose_b must be 0 or 1, got " + num(v));
  return v == 1;
}

}  // namespace

void check_gemm_table(const std::vector<GemmTiming>& table, const std::string& what, const std::vector<SourceLoc>& at) {
  for (size_t i = 0; i < table.size(); ++i) {
    const SourceLoc& where = at.size() > i ? at[i] : (at.empty() ? SourceLoc{} : at.back());
    const GemmTiming& r = table[i];
    if (r.m <= 0 || r.n <= 0 || r.k <= 0)
      throw_bad_input(where, what + ": row " + row_text(r) + ": m, n and k must be positive");
    require_positive(where, what + ": time_us", r.time_us);
    if (r.blocks < 1 || (r.blocks > 1 && !r.transpose))
      throw_bad_input(where, what + ": row " + row_text(r) +
                                 ": blocks must be at least 1, and a row of several "
                                 "blocks must name its transpose pair");
    if (i > 0 && !gemm_row_less(table[i - 1], r)) {
      throw_bad_input(where,
                      what + ": not sorted: row " + row_text(r) + " after " + row_text(table[i - 1]) +
                          " (rows must be in increasing (m, n, k) order, a shape's 4-column row before its "
                          "transposed rows, a pair's single product before its rows of increasing blocks, "
                          "without duplicates)");
    }
  }
}

std::vector<GemmTiming> read_gemm_table(const std::string& file, const YAML::Node& list, const std::string& what) {
  std::vector<SourceLoc> locs;
  std::vector<GemmTiming> table;
  const char* form =
      "[m, n, k, time_us], [m, n, k, transpose_a, transpose_b, time_us] or "
      "[m, n, k, transpose_a, transpose_b, blocks, time_us]";
  for (const auto& r : read_rows(file, list, what, 4, form, locs, {6, 7})) {
    for (int i = 0; i < 3; ++i) {
      if (!is_whole_in_range(r[i], -kMaxExactWholeDouble, kMaxExactWholeDouble))
        throw_bad_input(locs.back(), what + ": m, n and k must be integers, got " + num(r[i]));
    }
    GemmTiming row{static_cast<int64_t>(r[0]), static_cast<int64_t>(r[1]), static_cast<int64_t>(r[2]), r.back()};
    if (r.size() >= 6)
      row.transpose = GemmTranspose{flag(r[3], locs.back(), what), flag(r[4], locs.back(), what)};
    if (r.size() == 7) {
      if (!is_whole_in_range(r[5], 2, kMaxExactWholeDouble))
        throw_bad_input(locs.back(),
                        what +
                            ": blocks must be an integer of at least 2 (a single product takes the "
                            "6-column form), got " +
                            num(r[5]));
      row.blocks = static_cast<int64_t>(r[5]);
    }
    table.push_back(row);
  }
  check_gemm_table(table, what, locs);
  return table;
}

}  // namespace profile_io
}  // namespace domino
