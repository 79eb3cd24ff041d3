// verify_schedule.cpp: the structure of a whole schedule (buffers, op indices, streams, op ids and
// dependencies) before every op's contract (verify_op.cpp). The runtime indexes per-op flags by op index
// and dependency, so a wrong one would read out of bounds or wait forever instead of failing.
#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include "sim/base/error.hpp"
#include "sim/ir/verify.hpp"

namespace domino {
namespace {

void verify_buffers(const Schedule& s) {
  for (size_t i = 0; i < s.buffers.size(); ++i) {
    const BufferDesc& b = s.buffers[i];
    if (b.batch < 1 || b.seq < 1 || b.cols < 1) {
      throw_bad_input(fmt::format("buffer {} '{}' is [{},{},{}]: every extent must be positive", i, b.name,
                                  b.batch, b.seq, b.cols));
    }
  }
}

// What is wrong with op's place in the schedule (index, stream, dependencies); "" when nothing.
std::string structure_problem(const Schedule& s, const Op& op, size_t position) {
  if (size_t(op.index) != position || op.index < 0) {
    return fmt::format("stands at position {} but has index {}", position, op.index);
  }
  if (int(op.stream) >= kNumStreams) {
    return fmt::format("runs on stream {} of {}", int(op.stream), kNumStreams);
  }
  int32_t previous = -1;
  for (int32_t dep : op.deps) {
    if (dep < 0 || dep >= op.index) return fmt::format("depends on #{}, which is not an earlier op", dep);
    if (dep <= previous) return fmt::format("lists dependency #{} after #{} (not ascending)", dep, previous);
    const Op& on = s.ops[size_t(dep)];
    if (on.stream == op.stream) {
      return fmt::format("depends on {} (#{}) of its own {} stream, which program order already orders",
                         op_id(on), dep, to_string(op.stream));
    }
    previous = dep;
  }
  return "";
}

}  // namespace

void verify_schedule(const Schedule& s) {
  verify_buffers(s);
  std::unordered_map<std::string, int32_t> first_with_id;
  first_with_id.reserve(s.ops.size());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    std::string id = op_id(op);
    const std::string problem = structure_problem(s, op, i);
    if (!problem.empty()) throw_bad_input(fmt::format("op {} (#{}) {}", id, i, problem));
    const auto [it, fresh] = first_with_id.emplace(std::move(id), op.index);
    if (!fresh) throw_bad_input(fmt::format("op {} (#{}) has the id of op #{}", it->first, i, it->second));
    verify_op(s, op);
  }
}

}  // namespace domino
