// profile_test.cpp: shipped profiles load, profiles round-trip through save_profile, and every malformed
// profile in tests/data/profiles/bad fails with the message pinned on its last line ("# expect: :L:C: ...").
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sim/base/error.hpp"
#include "sim/cost/profile.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;
const fs::path kShipped = fs::path(DOMINO_SOURCE_DIR) / "profiles";
const fs::path kBad = fs::path(DOMINO_TEST_DATA) / "data" / "profiles" / "bad";

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ShippedProfiles, AllLoadAndValidate) {
  const auto names = files_in(kShipped);
  for (const char* must : {"dgx-h100.yaml", "dgx-a100.yaml", "h100-multinode.yaml", "cpu-dev.yaml",
                           "cpu-dev-2gbps.yaml"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), must), names.end()) << must;
  }
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const Profile p = load_profile((kShipped / name).string());
    EXPECT_EQ(p.name + ".yaml", name);  // a profile is named after its file
    EXPECT_NO_THROW(validate_profile(p));
  }
}

TEST(ShippedProfiles, MultiNodeProfilesCarryInterNodeFigures) {
  const Profile multi = load_profile((kShipped / "h100-multinode.yaml").string());
  ASSERT_TRUE(multi.inter_node.has_value());
  EXPECT_EQ(multi.devices_per_node, 8);
  EXPECT_EQ(multi.nodes, 4);
  EXPECT_LT(multi.inter_node->bus_bandwidth_gbps, multi.intra_node.bus_bandwidth_gbps);
  const Profile single = load_profile((kShipped / "dgx-h100.yaml").string());
  EXPECT_FALSE(single.inter_node.has_value());
  // The CPU profiles describe fp32 only (the CPU backend's dtype).
  const Profile cpu = load_profile((kShipped / "cpu-dev.yaml").string());
  EXPECT_TRUE(cpu.gemm[static_cast<int>(DType::FP32)].has_value());
  EXPECT_FALSE(cpu.gemm[static_cast<int>(DType::BF16)].has_value());
  // GPU profiles model interference (SMs and HBM shared with collectives); the CPU ones keep the flat factors.
  EXPECT_TRUE(single.gpu.has_value());
  EXPECT_TRUE(multi.gpu.has_value());
  EXPECT_FALSE(cpu.gpu.has_value());
}

TEST(ProfileIo, RoundTripsThroughSaveProfile) {
  for (const auto& name : files_in(kShipped)) {
    SCOPED_TRACE(name);
    Profile p = load_profile((kShipped / name).string());
    p.metadata.machine = "test \"box\"";
    p.metadata.date = "2025-01-01";
    p.metadata.build_flags = "-O3 -march=native";
    p.metadata.library_versions = {{"eigen", "3.4.0"}, {"gloo", "0.5.0"}};
    p.metadata.spread = {{"gemm", 0.05}, {"allreduce", 0.12}};
    const fs::path out = fs::temp_directory_path() / ("domino_profile_rt_" + name);
    save_profile(p, out.string());
    const Profile back = load_profile(out.string());
    EXPECT_EQ(profile_to_yaml(back), profile_to_yaml(p));
    EXPECT_EQ(back.metadata.machine, "test \"box\"");
    EXPECT_EQ(back.metadata.library_versions.at("gloo"), "0.5.0");
    EXPECT_DOUBLE_EQ(back.metadata.spread.at("allreduce"), 0.12);
    EXPECT_EQ(back.intra_node.table.size(), p.intra_node.table.size());
    ASSERT_EQ(back.gpu.has_value(), p.gpu.has_value());
    if (p.gpu) {
      EXPECT_EQ(back.gpu->mainloop_efficiency, p.gpu->mainloop_efficiency);
    }
    for (int d = 0; d < kNumDTypes; ++d) {
      ASSERT_EQ(back.gemm[d].has_value(), p.gemm[d].has_value());
      if (!p.gemm[d]) continue;
      EXPECT_EQ(back.gemm[d]->peak_tflops, p.gemm[d]->peak_tflops);  // exact: numbers round-trip
      ASSERT_EQ(back.gemm[d]->efficiency.size(), p.gemm[d]->efficiency.size());
      for (size_t i = 0; i < p.gemm[d]->efficiency.size(); ++i) {
        EXPECT_EQ(back.gemm[d]->efficiency[i].efficiency, p.gemm[d]->efficiency[i].efficiency);
      }
    }
    fs::remove(out);
  }
}

// The collectives' delay beside compute is optional (absent: none, and not written) and round-trips.
// The CPU-only interference terms: absent (0) in the shipped profile, not written when 0, read back exactly.
TEST(ProfileIo, OptionalInterferenceTermsAreOmittedAtZeroAndRoundTrip) {
  const std::pair<const char*, double InterferenceProfile::*> terms[] = {
      {"comm_delay_during_compute_us", &InterferenceProfile::comm_delay_during_compute_us},
      {"compute_stall_share", &InterferenceProfile::compute_stall_share},
      {"comm_start_wait_us", &InterferenceProfile::comm_start_wait_us},
      {"comm_start_wait_decay_us", &InterferenceProfile::comm_start_wait_decay_us},
      {"comm_resume_wait_us", &InterferenceProfile::comm_resume_wait_us},
      {"compute_slowdown_with_comm", &InterferenceProfile::compute_slowdown_with_comm}};
  for (const auto& [key, field] : terms) {
    Profile p = load_profile((kShipped / "cpu-dev.yaml").string());
    EXPECT_EQ(p.interference.*field, 0) << key;
    EXPECT_EQ(profile_to_yaml(p).find(key), std::string::npos) << key;
    p.interference.*field = 0.1234567;
    const fs::path out = fs::temp_directory_path() / (std::string("domino_profile_") + key + ".yaml");
    save_profile(p, out.string());
    EXPECT_EQ(load_profile(out.string()).interference.*field, 0.1234567) << key;
    fs::remove(out);
  }
}

// A memory-bound figure's per-row term of column chunks: not written at 0, read back exactly.
TEST(ProfileIo, AColumnChunksPerRowTermIsOmittedAtZeroAndRoundTrips) {
  Profile p = load_profile((kShipped / "cpu-dev.yaml").string());
  for (auto* figures : {&p.memory.per_code, &p.memory.per_kind})
    for (auto& [name, figure] : *figures) figure.chunk_row_us = 0;
  EXPECT_EQ(profile_to_yaml(p).find("chunk_row_us"), std::string::npos);
  p.memory.per_code["ResidualAdd"] = {12.5, 0.25, 0.0425};
  p.memory.per_kind["elementwise"] = {14, 0, 0.03125};
  const fs::path out = fs::temp_directory_path() / "domino_profile_chunk_row.yaml";
  save_profile(p, out.string());
  const Profile back = load_profile(out.string());
  EXPECT_EQ(back.memory.per_code.at("ResidualAdd").chunk_row_us, 0.0425);
  EXPECT_EQ(back.memory.per_code.at("ResidualAdd").bandwidth_gbps, 12.5);
  EXPECT_EQ(back.memory.per_kind.at("elementwise").chunk_row_us, 0.03125);
  EXPECT_EQ(profile_to_yaml(back), profile_to_yaml(p));
  fs::remove(out);
}

TEST(ProfileIo, TheCacheAndLaterChunkTermsAreOmittedAtZeroAndRoundTrip) {
  Profile p = load_profile((kShipped / "cpu-dev.yaml").string());
  p.memory.cache_bytes = 0;
  for (auto* figures : {&p.memory.per_code, &p.memory.per_kind})
    for (auto& [name, figure] : *figures)
      figure.cached_bandwidth_gbps = figure.later_chunk_bandwidth_gbps = 0;
  const std::string cold = profile_to_yaml(p);
  EXPECT_EQ(cold.find("cache_bytes"), std::string::npos);
  EXPECT_EQ(cold.find("cached_bandwidth_gbps"), std::string::npos);
  EXPECT_EQ(cold.find("later_chunk_bandwidth_gbps"), std::string::npos);
  p.memory.cache_bytes = 1048576;
  p.memory.per_code["ResidualAdd"] = {12.5, 0.25, 0, 96.5, 30.5};
  const fs::path out = fs::temp_directory_path() / "domino_profile_cache.yaml";
  save_profile(p, out.string());
  const Profile back = load_profile(out.string());
  EXPECT_EQ(back.memory.cache_bytes, 1048576);
  EXPECT_EQ(back.memory.per_code.at("ResidualAdd").cached_bandwidth_gbps, 96.5);
  EXPECT_EQ(back.memory.per_code.at("ResidualAdd").later_chunk_bandwidth_gbps, 30.5);
  EXPECT_EQ(profile_to_yaml(back), profile_to_yaml(p));
  p.memory.cache_bytes = -1;
  EXPECT_THROW(save_profile(p, out.string()), Error);
  fs::remove(out);
}

TEST(ProfileIo, AStallShareBeyondItsBoundOrWithAGpuSectionIsRefused) {
  Profile flat = load_profile((kShipped / "cpu-dev.yaml").string());
  flat.interference.compute_stall_share = kMaxComputeStallShare * 1.5;
  EXPECT_THROW(validate_profile(flat), Error);
  flat.interference.compute_stall_share = 0;
  flat.interference.compute_slowdown_with_comm = kMaxCommComputeSlowdown * 1.5;
  EXPECT_THROW(validate_profile(flat), Error);
  Profile gpu = load_profile((kShipped / "dgx-h100.yaml").string());
  ASSERT_TRUE(gpu.gpu.has_value());
  gpu.interference.compute_stall_share = 0.1;
  EXPECT_THROW(validate_profile(gpu), Error);
  // The collectives' start waits are a CPU core's: a GPU profile models its interference otherwise.
  for (double InterferenceProfile::*field :
       {&InterferenceProfile::comm_start_wait_us, &InterferenceProfile::comm_start_wait_decay_us,
        &InterferenceProfile::comm_resume_wait_us}) {
    Profile g = load_profile((kShipped / "dgx-h100.yaml").string());
    g.interference.*field = 100;
    EXPECT_THROW(validate_profile(g), Error);
    flat = load_profile((kShipped / "cpu-dev.yaml").string());
    flat.interference.*field = -1;
    EXPECT_THROW(validate_profile(flat), Error);
  }
}

// attention.per_code: read back exactly (a rate of 0 included), refused with a gpu section, which times
// attention by its tiles, and without any rate.
TEST(ProfileIo, AttentionPerCodeRoundTripsAndIsRefusedWhereItCannotApply) {
  Profile p = load_profile((kShipped / "cpu-dev.yaml").string());
  p.attention.per_code.clear();
  EXPECT_EQ(profile_to_yaml(p).find("per_code:\n    Attn"), std::string::npos);
  p.attention.per_code["AttnFwd"] = {12.25, 48.5, 3.125};
  p.attention.per_code["AttnBwd"] = {0, 31.75, 0};
  const Profile back = load_profile_string(profile_to_yaml(p), "<roundtrip>");
  EXPECT_EQ(back.attention.per_code, p.attention.per_code);
  Profile no_rate = p;
  no_rate.attention.per_code["AttnBwd"].gflops = 0;
  EXPECT_THROW(validate_profile(no_rate), Error);
  Profile unknown = p;
  unknown.attention.per_code["GeluFwd"] = {1, 1, 1};
  EXPECT_THROW(validate_profile(unknown), Error);
  Profile gpu = load_profile((kShipped / "dgx-h100.yaml").string());
  gpu.attention.per_code = p.attention.per_code;
  EXPECT_THROW(validate_profile(gpu), Error);
  EXPECT_THROW(load_profile_string(profile_to_yaml(gpu), "<gpu>"), Error);
}

TEST(ProfileIo, GemmTableRoundTrips) {
  Profile p = load_profile((kShipped / "cpu-dev.yaml").string());
  p.gemm[static_cast<int>(DType::FP32)]->table = {{64, 64, 64, 12.5}, {512, 512, 512, 3300.25}};
  const std::string yaml = profile_to_yaml(p);
  const Profile back = load_profile_string(yaml, "<roundtrip>");
  const auto& t = back.gemm[static_cast<int>(DType::FP32)]->table;
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].m, 512);
  EXPECT_EQ(t[1].time_us, 3300.25);
}

TEST(ProfileIo, SaveRefusesAnInvalidProfile) {
  Profile p = load_profile((kShipped / "dgx-h100.yaml").string());
  p.memory.bandwidth_gbps = 0;
  const fs::path out = fs::temp_directory_path() / "domino_profile_invalid.yaml";
  try {
    save_profile(p, out.string());
    FAIL() << "expected BadInput";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("memory.bandwidth_gbps must be positive"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(ProfileIo, ValidateRejectsUnsortedTablesBuiltInCode) {
  Profile p = load_profile((kShipped / "dgx-h100.yaml").string());
  std::swap(p.intra_node.table[0], p.intra_node.table[1]);
  EXPECT_THROW(validate_profile(p), Error);
}

TEST(ProfileIo, MissingFileIsBadInput) {
  try {
    load_profile("/nonexistent/profile.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }
}

class BadProfile : public ::testing::TestWithParam<std::string> {};

TEST(BadProfileCorpus, IsLargeEnough) { EXPECT_GE(files_in(kBad).size(), 20u); }

TEST_P(BadProfile, FailsWithItsPinnedMessage) {
  const std::string path = (kBad / GetParam()).string();
  std::ifstream in(path);
  std::string line, expect;
  while (std::getline(in, line)) {
    if (line.rfind("# expect: ", 0) == 0) expect = line.substr(10);
  }
  ASSERT_FALSE(expect.empty()) << "no '# expect: ' line in " << path;
  try {
    load_profile(path);
    FAIL() << path << " loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_EQ(std::string(e.what()), path + expect);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadProfile, ::testing::ValuesIn(files_in(kBad)),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace domino
