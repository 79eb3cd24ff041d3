// whole_number.hpp: the check a whole number read as a double (profile tables, trace arguments) passes
// before it is cast to an integer.
#pragma once

#include <cmath>

namespace domino {

// 2^53: every whole number up to it is exact in a double, and it lies well inside int64's range.
inline constexpr double kMaxExactWholeDouble = 9007199254740992.0;

// True when d is a whole number in [lowest, highest]; false for NaN and infinities. Casting a double beyond
// the integer's range is undefined, so the range is checked first.
inline bool is_whole_in_range(double d, double lowest, double highest) {
  return d >= lowest && d <= highest && d == std::floor(d);
}

}  // namespace domino
