// tensor_dump.cpp: .npy writer/reader and the binary snapshot format used between ranks and the --check
// comparison: "DOMSNAP1", i32 rank, f32 loss, u64 buffer count, then per buffer u64 n and n floats.
#include "executor/runtime/tensor_dump.hpp"
#include "sim/base/files.hpp"

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {
namespace {

template <typename T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// An empty vector's data() may be null, which memcpy and append must not be given.
void append_floats(std::string& out, const std::vector<float>& v) {
  if (!v.empty()) out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

template <typename T>
T take(const std::string& in, size_t& pos, const std::string& path) {
  if (pos + sizeof(T) > in.size()) throw_bad_input(path + ": truncated file");
  T v;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return v;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The header's shape tuple, "(2, 3)" or "(6,)": whole numbers, none negative.
std::vector<int64_t> parse_npy_shape(const std::string& header, const std::string& path) {
  const size_t open = header.find('(');
  const size_t close = open == std::string::npos ? std::string::npos : header.find(')', open);
  if (close == std::string::npos) throw_bad_input(path + ": no shape in header");
  std::vector<int64_t> dims;
  std::stringstream list(header.substr(open + 1, close - open - 1));
  for (std::string item; std::getline(list, item, ',');) {
    const size_t first = item.find_first_not_of(" \t"), last = item.find_last_not_of(" \t");
    if (first == std::string::npos) continue;  // "(6,)" ends with an empty entry
    const char* end = item.data() + last + 1;
    int64_t d = -1;
    const auto [stop, ec] = std::from_chars(item.data() + first, end, d);
    if (ec != std::errc() || stop != end || d < 0)
      throw_bad_input(path + ": shape entry '" + item + "' is not a dimension (a whole number, not negative)");
    dims.push_back(d);
  }
  return dims;
}

}  // namespace

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& data) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // "(n,)" keeps its comma
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic(6) + version(2) + length(2) + header + '\n' must be a multiple of 64.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put(out, uint16_t(header.size()));
  out += header;
  append_floats(out, data);
  write_file_atomic(path, out);
}

std::vector<float> read_npy(const std::string& path, std::vector<int64_t>* shape) {
  return read_npy_bytes(read_all(path), path, shape);
}

std::vector<float> read_npy_bytes(const std::string& in, const std::string& path, std::vector<int64_t>* shape) {
  if (in.size() < 10 || in.compare(0, 6, "\x93NUMPY") != 0) throw_bad_input(path + ": not a .npy file");
  size_t pos = 8;
  const uint16_t header_len = take<uint16_t>(in, pos, path);
  if (pos + header_len > in.size()) throw_bad_input(path + ": truncated .npy header");
  const std::string header = in.substr(pos, header_len);
  if (header.find("'<f4'") == std::string::npos) throw_bad_input(path + ": not float32");
  const std::vector<int64_t> dims = parse_npy_shape(header, path);
  int64_t count = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(count, d, &count)) throw_bad_input(path + ": the shape's element count overflows");
  pos += header_len;
  if (uint64_t(in.size() - pos) / sizeof(float) != uint64_t(count) || (in.size() - pos) % sizeof(float) != 0)
    throw_bad_input(path + ": data size does not match the shape");
  std::vector<float> data(static_cast<size_t>(count));
  if (!data.empty()) std::memcpy(data.data(), in.data() + pos, data.size() * sizeof(float));
  if (shape) *shape = dims;
  return data;
}

std::vector<int64_t> npy_shape(const Schedule& schedule, const Region& region) {
  const BufferDesc& b = schedule.buffers.at(region.buffer);
  const bool param_like = b.role == BufferRole::Param || b.role == BufferRole::Grad || b.role == BufferRole::OptState;
  if (param_like && b.batch == 1) return {region.s1 - region.s0, region.cols()};
  return {region.b1 - region.b0, region.s1 - region.s0, region.cols()};
}

void write_snapshot(const std::string& path, const RankSnapshot& snapshot) {
  std::string out = "DOMSNAP1";
  put(out, int32_t(snapshot.rank));
  put(out, snapshot.loss);
  put(out, uint64_t(snapshot.buffers.size()));
  for (const auto& b : snapshot.buffers) {
    put(out, uint64_t(b.size()));
    append_floats(out, b);
  }
  write_file_atomic(path, out);
}

RankSnapshot read_snapshot(const std::string& path) {
  const std::string in = read_all(path);
  if (in.compare(0, 8, "DOMSNAP1") != 0) throw_bad_input(path + ": not a rank snapshot");
  size_t pos = 8;
  RankSnapshot s;
  s.rank = take<int32_t>(in, pos, path);
  s.loss = take<float>(in, pos, path);
  const uint64_t count = take<uint64_t>(in, pos, path);
  if (count > in.size()) throw_bad_input(path + ": corrupt buffer count");
  s.buffers.resize(count);
  for (auto& b : s.buffers) {
    const uint64_t n = take<uint64_t>(in, pos, path);
    if (n * sizeof(float) > in.size() - pos) throw_bad_input(path + ": truncated buffer");
    b.resize(n);
    if (n > 0) std::memcpy(b.data(), in.data() + pos, n * sizeof(float));
    pos += n * sizeof(float);
  }
  return s;
}

}  // namespace domino
