// training_options.hpp: the training-context options domino-sim and domino-tune share (--dp, --zero,
// --recompute) and their translation into a validated TrainingContext.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "sim/model/training_context.hpp"

namespace domino {

struct TrainingArgs {
  int dp = 1;
  int zero = 0;
  std::string recompute = "none";
};

inline void add_training_options(CLI::App& app, TrainingArgs& args) {
  app.add_option("--dp", args.dp,
                 "data-parallel degree: TP groups training replicas of the model (default 1; the iteration time "
                 "excludes their gradient reduction)");
  app.add_option("--zero", args.zero,
                 "1: shard the fp32 master weights and optimizer moments over the --dp ranks (Megatron-LM's "
                 "distributed optimizer, ZeRO-1); 0: every rank holds them (default)");
  app.add_option("--recompute", args.recompute,
                 "activation recomputation: none (default); selective and full are not modelled and refused");
}

// BadInput naming the flag when a value is out of range or not modelled.
inline TrainingContext training_context(const TrainingArgs& args) {
  TrainingContext t;
  t.dp = args.dp;
  t.zero = args.zero;
  t.recompute = parse_recompute(args.recompute);
  validate_training(t);
  return t;
}

}  // namespace domino
