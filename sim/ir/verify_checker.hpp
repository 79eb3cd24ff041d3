// verify_checker.hpp (internal to the verifier): collects the first problem of one op while the per-opcode
// checks of verify_op.cpp ask about arity, bounds and shapes. Messages go through fmt: GCC 12 warns
// falsely (-Wrestrict) on chains of std::string operator+.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "sim/ir/schedule.hpp"

namespace domino::verify {

// Operand names as literals: backends check every op before its kernel, so the happy path builds no string.
constexpr const char* kInName[kMaxIn] = {"in[0]", "in[1]", "in[2]", "in[3]",
                                         "in[4]", "in[5]", "in[6]", "in[7]"};
constexpr const char* kOutName[kMaxOut] = {"out[0]", "out[1]", "out[2]", "out[3]"};

class Checker {
 public:
  Checker(const Schedule& s, const Op& op) : s_(s), op_(op) {}
  const std::string& problem() const { return err_; }

  // Keeps the first problem only: later checks may be consequences of it.
  bool fail(const std::string& m) {
    if (err_.empty()) err_ = m;
    return false;
  }
  bool arity(int min_in, int max_in, int min_out, int max_out) {
    if (op_.n_in < min_in || op_.n_in > max_in || op_.n_out < min_out || op_.n_out > max_out) {
      return fail(fmt::format("has {} inputs and {} outputs, expected {} and {}", op_.n_in, op_.n_out,
                              range(min_in, max_in), range(min_out, max_out)));
    }
    return true;
  }
  bool bounds(const Region& r, const char* what) {
    if (r.buffer < 0 || size_t(r.buffer) >= s_.buffers.size()) {
      return fail(fmt::format("{} names buffer {} of {}", what, r.buffer, s_.buffers.size()));
    }
    const BufferDesc& b = s_.buffers[size_t(r.buffer)];
    if (r.b0 < 0 || r.b0 > r.b1 || r.b1 > b.batch || r.s0 < 0 || r.s0 > r.s1 || r.s1 > b.seq || r.c0 < 0 ||
        r.c0 > r.c1 || r.c1 > b.cols) {
      return fail(fmt::format("{} {} is outside buffer '{}' [{},{},{}]", what, box(r), b.name, b.batch, b.seq,
                              b.cols));
    }
    return true;
  }
  // rows/cols < 0 mean "any".
  bool shape(const Region& r, const char* what, int64_t rows, int64_t cols) {
    if ((rows >= 0 && r.rows() != rows) || (cols >= 0 && r.cols() != cols)) {
      return fail(fmt::format("{} {} is {}x{}, expected {}x{}", what, box(r), r.rows(), r.cols(), dim(rows),
                              dim(cols)));
    }
    return true;
  }
  // One uniformly strided block (weights, biases, whole-buffer operands): kernels map it as one matrix.
  bool uniform(const Region& r, const char* what) {
    const BufferDesc& b = s_.buffers[size_t(r.buffer)];
    if (r.b1 - r.b0 > 1 && !(r.s0 == 0 && r.s1 == b.seq)) {
      return fail(
          fmt::format("{} {} must be one strided block (full seq range or one batch entry)", what, box(r)));
    }
    return true;
  }
  // Same batch count and seq range length: the row-wise correspondence of per-batch kernels.
  bool same_rows(const Region& a, const Region& b, const char* what) {
    if (a.b1 - a.b0 != b.b1 - b.b0 || a.s1 - a.s0 != b.s1 - b.s0) {
      return fail(fmt::format("{} {} does not have the batch/seq extent of {}", what, box(b), box(a)));
    }
    return true;
  }

 private:
  static std::string range(int lo, int hi) {
    return lo == hi ? std::to_string(lo) : fmt::format("{}..{}", lo, hi);
  }
  static std::string dim(int64_t v) { return v < 0 ? std::string("*") : std::to_string(v); }
  static std::string box(const Region& r) {
    return fmt::format("[{}:{},{}:{},{}:{})", r.b0, r.b1, r.s0, r.s1, r.c0, r.c1);
  }
  const Schedule& s_;
  const Op& op_;
  std::string err_;
};

}  // namespace domino::verify
