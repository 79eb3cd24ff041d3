// fuzz_regression_test.cpp: every input a fuzzer once crashed a loader with (tests/data/fuzz/<target>/)
// goes through that target's feed again and must be refused with a BadInput error, the answer bad input
// gets, instead of a crash, a sanitizer report or another exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/fuzz_targets.hpp"

namespace domino::fuzz {
namespace {

namespace fs = std::filesystem;
const fs::path kRegressions = fs::path(DOMINO_TEST_DATA) / "data" / "fuzz";

struct Target {
  const char* name;
  void (*feed)(const std::string&);
};
const Target kTargets[] = {{"model", feed_model},         {"hf", feed_hf},         {"plan", feed_plan},
                           {"profile", feed_profile},     {"trace", feed_trace},   {"calibrate", feed_calibrate},
                           {"npy", feed_npy}};

// Test names and failure messages show the target's name, not the struct's bytes.
void PrintTo(const Target& target, std::ostream* os) { *os << target.name; }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FuzzRegression : public testing::TestWithParam<Target> {};

TEST_P(FuzzRegression, EveryCrashingInputIsNowBadInput) {
  const Target& target = GetParam();
  const fs::path dir = kRegressions / target.name;
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no regression inputs for " << target.name;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    try {
      target.feed(read_bytes(file));
      ADD_FAILURE() << "accepted: a regression input must stay bad input";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegression, testing::ValuesIn(kTargets),
                         [](const testing::TestParamInfo<Target>& info) { return std::string(info.param.name); });

// A folder under tests/data/fuzz that names no target would be silently skipped above.
TEST(FuzzRegressionData, EveryFolderNamesATarget) {
  ASSERT_TRUE(fs::is_directory(kRegressions));
  for (const auto& e : fs::directory_iterator(kRegressions)) {
    const std::string name = e.path().filename().string();
    const bool known = std::any_of(std::begin(kTargets), std::end(kTargets),
                                   [&](const Target& t) { return name == t.name; });
    EXPECT_TRUE(known) << "tests/data/fuzz/" << name << " is not a fuzz target";
  }
}

}  // namespace
}  // namespace domino::fuzz
