// enum_names.hpp: an enum value's name from a table indexed by the value, for enums numbered 0..N-1 in
// declaration order (each table sits next to a static_assert that it has one name per value).
#pragma once

#include <array>
#include <cstddef>

namespace domino {

template <class Enum, std::size_t N>
constexpr const char* enum_name(Enum value, const std::array<const char*, N>& names) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

}  // namespace domino
