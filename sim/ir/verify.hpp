// verify.hpp: the one verifier of the schedule IR's contract (sim/ir/schedule.hpp), run on every schedule
// before a backend executes it and on every schedule the tests build. Not run by the builder or the
// simulator: the tuner builds and times millions of schedules, and the builder's output is what the tests
// verify. Every problem is a BadInput naming the op id ("op L0.fwd.attn.qkv (#3) ...").
#pragma once

#include <string>

#include "sim/ir/schedule.hpp"

namespace domino {

// What is wrong with one op against its opcode's contract: arity, every region inside its buffer, operand
// shapes and their agreement (including that weight-like operands are one strided block). "" when
// nothing. Builds no string on the happy path, so backends may call it before every kernel.
std::string op_contract_problem(const Schedule& s, const Op& op);

// Throws BadInput "op <id> (#<index>) <problem>" when op_contract_problem finds something.
void verify_op(const Schedule& s, const Op& op);

// verify_op on every op: the contract alone, for hand-made schedules (kernel tests, profiler probes) whose
// op ids and dependencies are not the builder's.
void verify_ops(const Schedule& s);

// The whole schedule: every buffer's extents positive; every op at its own index, on a valid stream, with
// a unique op id, dependencies ascending and pointing to earlier ops of other streams; and every op's
// contract (verify_op). Throws BadInput naming the buffer or op.
void verify_schedule(const Schedule& s);

}  // namespace domino
