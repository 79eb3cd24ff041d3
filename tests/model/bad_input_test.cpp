// bad_input_test.cpp: the corpus tests/data/models/bad/* pins one message per broken input. Each file has a
// NAME.expect sidecar: optional "override KEY=VALUE" lines (tp, seq_len, micro_batch), then message
// fragments that must all appear. Every message must be a BadInput located as file:line:column.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "sim/base/error.hpp"
#include "sim/model/model_spec.hpp"

namespace domino {
namespace {

namespace fs = std::filesystem;
const fs::path kBad = fs::path(DOMINO_TEST_DATA) / "data" / "models" / "bad";

std::vector<std::string> corpus() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kBad)) {
    if (e.path().extension() != ".expect") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// True when `msg` contains "NAME:<line>:<column>: " (std::regex avoided: GCC 12 warns inside it under ASan).
bool located(const std::string& msg, const std::string& name) {
  for (size_t at = msg.find(name + ":"); at != std::string::npos; at = msg.find(name + ":", at + 1)) {
    size_t i = at + name.size() + 1;
    int numbers = 0;
    while (numbers < 2 && i < msg.size() && std::isdigit(static_cast<unsigned char>(msg[i]))) {
      while (i < msg.size() && std::isdigit(static_cast<unsigned char>(msg[i]))) ++i;
      if (i < msg.size() && msg[i] == ':') ++numbers, ++i;
    }
    if (numbers == 2 && i < msg.size() && msg[i] == ' ') return true;
  }
  return false;
}

class BadInput : public ::testing::TestWithParam<std::string> {};

TEST(BadInputCorpus, IsLargeEnough) { EXPECT_GE(corpus().size(), 22u); }

TEST_P(BadInput, FailsWithItsPinnedMessage) {
  const fs::path input = kBad / GetParam();
  std::ifstream expect_file(fs::path(input).replace_extension(".expect"));
  ASSERT_TRUE(expect_file) << "no .expect sidecar for " << GetParam();
  ModelOverrides overrides;
  std::vector<std::string> fragments;
  for (std::string line; std::getline(expect_file, line);) {
    if (line.empty()) continue;
    if (line.rfind("override ", 0) == 0) {
      const std::string kv = line.substr(9);
      const int value = std::stoi(kv.substr(kv.find('=') + 1));
      const std::string key = kv.substr(0, kv.find('='));
      if (key == "tp")
        overrides.tp = value;
      else if (key == "seq_len")
        overrides.seq_len = value;
      else if (key == "micro_batch")
        overrides.micro_batch = value;
      else
        FAIL() << "unknown override " << key;
      continue;
    }
    fragments.push_back(line);
  }
  ASSERT_FALSE(fragments.empty()) << GetParam() << ".expect pins no message";

  try {
    load_model(input.string(), overrides);
    FAIL() << GetParam() << " loaded without error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_EQ(e.exit_code(), 2);
    const std::string msg = e.what();
    EXPECT_TRUE(located(msg, GetParam())) << "not located as file:line:column: " << msg;
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "want '" << f << "' in: " << msg;
  }
}

// Hostile nesting must end in a located error, not a stack overflow (generated: too big for the corpus).
TEST(BadInputNesting, DeeplyNestedValuesAreRejectedWithoutCrashing) {
  const int depth = 200000;
  const std::string nest = std::string(depth, '[') + std::string(depth, ']');
  const fs::path json = fs::path(::testing::TempDir()) / "domino-deep.json";
  std::ofstream(json) << R"({"model_type": "llama", "hidden_size": )" << nest << "}";
  const fs::path yaml = fs::path(::testing::TempDir()) / "domino-deep.yaml";
  std::ofstream(yaml) << "family: gpt\nlayers: " << nest << "\n";
  for (const fs::path& p : {json, yaml}) {
    try {
      load_model(p.string());
      FAIL() << p << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_NE(std::string(e.what()).find(p.filename().string() + ":"), std::string::npos) << e.what();
    }
    fs::remove(p);
  }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInput, ::testing::ValuesIn(corpus()), test_name);

}  // namespace
}  // namespace domino
