// multi_plan.hpp: domino-exec --plans: several plans of one model in ONE launch. Every rank prepares a
// backend per plan (each plan's buffers allocated once) and a runner per plan (each schedule verified once),
// then runs warm-up rounds and timed rounds, each round one iteration of every plan, each iteration after a
// barrier across the ranks, the order rotating from round to round: A B C, B C A, C A B, ..., so that a
// machine whose speed drifts from minute to minute slows every plan alike and no plan always runs in the same
// place (with one fixed order, three copies of one plan measured 3.8-8.5 % apart by place). Rank 0 writes one
// trace and one summary per plan and the combined summary (interleave_summary.hpp).
#pragma once

#include "executor/job/exec_options.hpp"
#include "executor/job/plan_set.hpp"
#include "executor/runtime/gloo_comm.hpp"

namespace domino {

// One rank of an interleaved launch, in group `comm` (forked by run_exec, or env mode).
void run_several_plans_rank(const ExecOptions& options, const PlanSet& set, const CommConfig& comm);

}  // namespace domino
