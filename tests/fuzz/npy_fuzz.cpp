// npy_fuzz.cpp: fuzz target "npy": a .npy tensor dump (domino-exec --dump-tensors) read back.
#include "executor/runtime/tensor_dump.hpp"
#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {

void feed_npy(const std::string& input) {
  std::vector<int64_t> shape;
  read_npy_bytes(input, "fuzz-tensor.npy", &shape);
}

}  // namespace domino::fuzz

DOMINO_FUZZ_TARGET(feed_npy)
