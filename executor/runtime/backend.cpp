// backend.cpp: the backend-independent helpers of backend.hpp.
#include "executor/runtime/backend.hpp"

#include <cmath>

namespace domino {

bool Backend::region_finite(const Region& region) {
  for (float v : read_region(region))
    if (!std::isfinite(v)) return false;
  return true;
}

std::vector<float> Backend::read_buffer(const Schedule& schedule, int32_t buffer) {
  return read_region(whole_buffer(schedule, buffer));
}

HostFootprint Backend::host_footprint(const Schedule& schedule, int, const HostRanks&) const {
  HostFootprint f;
  f.bytes_per_rank = schedule_memory_bytes(schedule);
  return f;
}

Region whole_buffer(const Schedule& schedule, int32_t buffer) {
  const BufferDesc& b = schedule.buffers.at(buffer);
  Region r;
  r.buffer = buffer;
  r.b1 = b.batch;
  r.s1 = b.seq;
  r.c1 = b.cols;
  return r;
}

}  // namespace domino
