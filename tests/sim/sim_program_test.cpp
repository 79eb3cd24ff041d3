// sim_program_test.cpp: a simulation program with deps added (what the tuner runs per probe class member)
// times a schedule exactly as that schedule with the deps in its ops would be timed, and reset() undoes them;
// the program's waits stand for every dep, and the deps it cannot honour are errors as in the schedule.
#include "sim/engine/sim_program.hpp"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/engine/simulator.hpp"
#include "tests/sim/toy_schedule.hpp"

namespace domino {
namespace {

using Toy = test::ToySchedule;

Profile slowdown_profile() {
  Profile p = test::unit_bytes_profile();
  p.interference = {0.25, 0.5};  // both streams slowed while both run: the rates matter
  return p;
}

// Compute a(100) b(30) c(40) d(10), AllReduces x(60, after a) y(50, after b): c and d free of y unless a dep
// says otherwise.
Toy two_streams() {
  Toy t;
  const int32_t a = t.compute(100);
  t.comm(60, {a});
  const int32_t b = t.compute(30);
  t.comm(50, {b});
  t.compute(40);
  t.compute(10);
  return t;
}

// Each span's (op, start, end), in order.
std::vector<std::tuple<int32_t, double, double>> spans_of(const SimResult& r) {
  std::vector<std::tuple<int32_t, double, double>> out;
  for (const OpSpan& span : r.timeline.spans) out.emplace_back(span.op, span.start_us, span.end_us);
  return out;
}

void expect_same_figures(const SimResult& a, const SimResult& b) {
  EXPECT_EQ(std::tie(a.iteration_us, a.compute_us, a.comm_us, a.exposed_comm_us),
            std::tie(b.iteration_us, b.compute_us, b.comm_us, b.exposed_comm_us));
  EXPECT_EQ(spans_of(a), spans_of(b));
  EXPECT_FALSE(a.timeline.spans.empty());
}

TEST(SimProgram, AddedDepsTimeLikeTheScheduleWithThem) {
  const CostModel cost(slowdown_profile());
  Toy base = two_streams();
  const OpCosts costs = op_costs(base.s, cost);
  SimProgram program(base.s);
  const SimResult before = simulate(program, costs, SimOptions{});
  expect_same_figures(before, simulate(base.s, cost));

  // c (op 4) waits for y (op 3), d (op 5) for x (op 1): a member with two policy deps.
  Toy member = two_streams();
  member.s.ops[4].deps.push_back(3);
  member.s.ops[5].deps.push_back(1);
  program.add_dep(4, 3);
  program.add_dep(5, 1);
  program.add_dep(5, 1);  // named twice: no different from once
  const SimResult with_deps = simulate(program, costs, SimOptions{});
  expect_same_figures(with_deps, simulate(member.s, cost));
  EXPECT_GT(with_deps.iteration_us, before.iteration_us);  // c now waits for y: the deps were honoured

  program.reset();
  EXPECT_FALSE(program.has_added_deps());
  expect_same_figures(simulate(program, costs, SimOptions{}), before);
}

TEST(SimProgram, WaitsCountTheOtherStreamsOpsOnly) {
  Toy t = two_streams();
  t.s.ops[5].deps = {4, 3, 0};  // d: c and a on its own stream (earlier), y on the other
  const SimProgram program(t.s);
  EXPECT_EQ(program.waits()[5], 2);  // both AllReduces (y is the second of its stream)
  EXPECT_EQ(program.waits()[1], 1);  // x waits for a, the first compute op
  EXPECT_EQ(program.waits()[0], 0);
}

TEST(SimProgram, DepsItCannotHonourAreErrors) {
  const CostModel cost(slowdown_profile());
  Toy t = two_streams();
  const OpCosts costs = op_costs(t.s, cost);
  SimProgram program(t.s);
  EXPECT_THROW(program.add_dep(2, 2), Error);   // on itself
  EXPECT_THROW(program.add_dep(2, 17), Error);  // no such op
  EXPECT_THROW(program.add_dep(9, 0), Error);
  program.reset();
  program.add_dep(0, 5);  // a waits for d, later on its own stream: never runs
  EXPECT_EQ(program.waits()[0], SimProgram::kNever);
  EXPECT_THROW(simulate(program, costs, SimOptions{}), Error);
  program.reset();
  EXPECT_NO_THROW(simulate(program, costs, SimOptions{}));
  // Arrival skew reads the schedule's deps: a program with deps of its own is refused under a skew rate.
  OpCosts skewed = costs;
  skewed.sync_per_compute = 0.01;
  EXPECT_NO_THROW(simulate(program, skewed, SimOptions{}));
  program.add_dep(4, 3);
  EXPECT_THROW(simulate(program, skewed, SimOptions{}), Error);
}

}  // namespace
}  // namespace domino
