// cpu_check_test.cpp: malformed ops are refused with the op id (BadInput from verify_ops, Runtime
// from run_cpu_op) before any memory is touched.
#include <gtest/gtest.h>

#include <string>

#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"
#include "tests/executor/cpu_test_util.hpp"

namespace domino::cputest {
namespace {

void expect_error(const std::function<void()>& f, ErrorKind kind, const Op& op, const std::string& detail) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << detail;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    const std::string msg = e.what();
    EXPECT_NE(msg.find(op_id(op)), std::string::npos) << msg;
    EXPECT_NE(msg.find(detail), std::string::npos) << msg;
  }
}

struct CheckBed : Bed {
  int32_t x = buffer("x", 2, 4, 6), w = buffer("w", 1, 6, 5), y = buffer("y", 2, 4, 5);
  CheckBed() {
    Op ok = make(OpCode::MatMul, {whole(x), whole(w)}, {whole(y)});
    (void)ok;
  }
  void expect_both(const Op& op, const std::string& detail) {
    expect_error([&] { verify_ops(s); }, ErrorKind::BadInput, op, detail);
    expect_error([&] { run(op); }, ErrorKind::Runtime, op, detail);
  }
};

TEST(CpuCheck, WellFormedScheduleIsAccepted) {
  CheckBed t;
  EXPECT_NO_THROW(verify_ops(t.s));
  EXPECT_NO_THROW(t.run(t.s.ops[0]));
}

TEST(CpuCheck, RegionOutsideItsBuffer) {
  CheckBed t;
  Op op = t.make(OpCode::MatMul, {box(t.x, 0, 2, 0, 5, 0, 6), t.whole(t.w)}, {t.whole(t.y)});
  t.expect_both(op, "outside buffer 'x'");
}

TEST(CpuCheck, UnknownBuffer) {
  CheckBed t;
  Op op = t.make(OpCode::GeluFwd, {box(9, 0, 1, 0, 1, 0, 1)}, {t.whole(t.y)});
  t.expect_both(op, "names buffer 9");
}

TEST(CpuCheck, WrongArityAndShapes) {
  {
    CheckBed t;
    Op op = t.make(OpCode::MatMul, {t.whole(t.x)}, {t.whole(t.y)});
    t.expect_both(op, "expected 2..3");
  }
  {
    CheckBed t;
    Op op = t.make(OpCode::MatMul, {t.whole(t.x), box(t.w, 0, 1, 0, 5, 0, 5)}, {t.whole(t.y)});
    t.expect_both(op, "expected 6x*");
  }
  {
    CheckBed t;
    OpAttrs a;
    a.heads = 3, a.kv_heads = 2, a.head_dim = 2;
    Op op = t.make(OpCode::AttnFwd, {t.whole(t.x), t.whole(t.x), t.whole(t.x)}, {t.whole(t.x), t.whole(t.y)}, a);
    t.expect_both(op, "multiple of kv_heads");
  }
}

TEST(CpuCheck, AllReduceIsNotAComputeOp) {
  CheckBed t;
  Op op = t.make(OpCode::AllReduce, {t.whole(t.y)}, {t.whole(t.y)});
  EXPECT_NO_THROW(verify_ops(t.s));
  expect_error([&] { t.run(op); }, ErrorKind::Runtime, op, "AllReduce");
}

}  // namespace
}  // namespace domino::cputest
