// enum_names.hpp: an enum value's name from a table indexed by the value, and back, for enums numbered 0..N-1
// in declaration order (each table sits next to a static_assert that it has one name per value).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace domino {

template <class Enum, std::size_t N>
constexpr const char* enum_name(Enum value, const std::array<const char*, N>& names) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

// The value whose name in the same table is `name`; nullopt when none is.
template <class Enum, std::size_t N>
constexpr std::optional<Enum> enum_named(std::string_view name, const std::array<const char*, N>& names) {
  for (std::size_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace domino
