// multi_plan.hpp: domino-exec --plans: several plans of one model in ONE launch. Every rank prepares a backend
// per plan (each plan's buffers allocated once) and a runner per plan (each schedule verified once), then runs
// warm-up rounds and timed rounds, each round one iteration of every plan in the order given, each iteration
// after a barrier across the ranks: A B C A B C ..., so that a machine whose speed drifts from minute to minute
// slows every plan alike. Rank 0 writes one trace and one summary per plan and the combined summary
// (interleave_summary.hpp).
#pragma once

#include "executor/job/exec_options.hpp"
#include "executor/job/plan_set.hpp"
#include "executor/runtime/gloo_comm.hpp"

namespace domino {

// One rank of an interleaved launch, in group `comm` (forked by run_exec, or env mode).
void run_several_plans_rank(const ExecOptions& options, const PlanSet& set, const CommConfig& comm);

}  // namespace domino
