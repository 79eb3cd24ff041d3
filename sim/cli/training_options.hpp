// training_options.hpp: the training-context options domino-sim and domino-tune share (--dp, --zero,
// --recompute) and their translation into a validated TrainingContext.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "sim/base/error.hpp"
#include "sim/model/plan.hpp"
#include "sim/model/training_context.hpp"

namespace domino {

struct TrainingArgs {
  int dp = 1;
  int zero = 0;
  std::string recompute = "none";
  CLI::Option* recompute_option = nullptr;  // set by add_training_options: whether --recompute was given
};

inline void add_training_options(CLI::App& app, TrainingArgs& args) {
  app.add_option("--dp", args.dp,
                 "data-parallel degree: TP groups training replicas of the model (default 1; the iteration time "
                 "excludes their gradient reduction)");
  app.add_option("--zero", args.zero,
                 "1: shard the fp32 master weights and optimizer moments over the --dp ranks (Megatron-LM's "
                 "distributed optimizer, ZeRO-1); 0: every rank holds them (default)");
  args.recompute_option = app.add_option(
      "--recompute", args.recompute,
      "activation recomputation: none (default), selective (attention cores re-run in backward) or full (each "
      "layer's forward re-run at the start of its backward); plans made here carry it, and it replaces a "
      "loaded plan's recompute. domino-tune also takes auto: the cheapest mode whose best plan fits --mem-gb");
}

// --recompute auto (domino-tune only): the tool picks the mode; the context starts without recomputation.
inline bool recompute_auto(const TrainingArgs& args) { return args.recompute == "auto"; }

// BadInput naming the flag when a value is out of range or not modelled; `auto` only where allow_auto.
inline TrainingContext training_context(const TrainingArgs& args, bool allow_auto = false) {
  TrainingContext t;
  t.dp = args.dp;
  t.zero = args.zero;
  if (recompute_auto(args) && !allow_auto)
    throw_bad_input("--recompute auto: only domino-tune chooses the mode; give none, selective or full");
  t.recompute = recompute_auto(args) ? Recompute::None : parse_recompute(args.recompute);
  validate_training(t);
  return t;
}

// A loaded plan against --recompute: the flag, when given, wins (the plan runs in its mode); otherwise the
// plan's own mode holds and becomes the context's, so that the figures and reports name it.
inline void reconcile_recompute(const TrainingArgs& args, Plan& plan, TrainingContext& t) {
  if (args.recompute_option != nullptr && args.recompute_option->count() > 0) {
    plan.recompute = t.recompute;
  } else {
    t.recompute = plan.recompute;
  }
}

}  // namespace domino
