// training_context.cpp: parsing, validation and the one-line description of the training context.
#include "sim/model/training_context.hpp"

#include <fmt/format.h>

#include "sim/base/error.hpp"

namespace domino {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

std::optional<Recompute> recompute_from_name(const std::string& text) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (text == to_string(r)) return r;
  return std::nullopt;
}

Recompute parse_recompute(const std::string& text) {
  if (const auto r = recompute_from_name(text)) return *r;
  throw_bad_input(fmt::format("--recompute {}: expected none, selective or full", text));
}

void validate_training(const TrainingContext& t) {
  if (t.dp < 1) throw_bad_input(fmt::format("--dp {}: the data-parallel degree must be at least 1", t.dp));
  if (t.zero != 0 && t.zero != 1) {
    throw_bad_input(fmt::format(
        "--zero {}: only 0 (no sharding) and 1 (optimizer state and fp32 master weights sharded over the "
        "data-parallel group) are modelled; sharding gradients (2) or parameters (3) is not",
        t.zero));
  }
}

std::string training_summary(const TrainingContext& t) {
  return fmt::format("dp {}, zero {}, recompute {}", t.dp, t.zero, to_string(t.recompute));
}

}  // namespace domino
