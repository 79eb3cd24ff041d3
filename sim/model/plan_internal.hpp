// plan_internal.hpp: plan checks shared by validate_plan (plan.cpp) and the located checks of the plan
// file reader (plan_io.cpp).
#pragma once

#include <string>

#include "sim/model/plan.hpp"

namespace domino::detail {

// Why a block's slicing does not fit the model ("" when it does); *key is the offending key ("p" or "q").
std::string block_problem(const BlockPlan& bp, const ModelSpec& m, std::string* key);

// Why a sequence-parallel plan cannot be built for the model ("" when it can, or without sequence
// parallelism), naming the feature (plan_sp.cpp).
std::string sp_problem(const Plan& plan, const ModelSpec& m);

// Why the plan's recomputation mode cannot be built with its other settings ("" when it can), naming the
// combination.
std::string recompute_problem(const Plan& plan, const ModelSpec& m);

// Why a plan belongs to another model or TP degree ("" when it matches), naming what differs.
std::string model_mismatch(const Plan& plan, const ModelSpec& m);

}  // namespace domino::detail
