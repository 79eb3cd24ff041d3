// report_html_test.cpp: the HTML report is one self-contained file (SVG inside, nothing fetched from
// anywhere) and, when Debian's chromium is installed, renders to a screenshot that is not blank.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/compare/compare.hpp"
#include "sim/compare/report_html.hpp"
#include "tests/compare/trace_builders.hpp"
#ifdef DOMINO_HAVE_ZLIB
#include "tests/compare/png_decode.hpp"
#endif

namespace domino {
namespace {

class Report : public ::testing::Test {
 protected:
  TraceFile predicted = read_trace(test::trace_data("predicted_small.json"));
  TraceFile measured = read_trace(test::trace_data("measured_small.json"));
  Comparison c = compare_traces(predicted, measured);
  std::string html = render_html_report(predicted, measured, c);
};

TEST_F(Report, HoldsTheFiguresAndTheSvgs) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg class=\"gantt\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"bars\""), std::string::npos);
  EXPECT_NE(html.find("+14.5%"), std::string::npos);            // iteration time error (measured: the mean)
  EXPECT_NE(html.find("20.0% / 35.0%"), std::string::npos);     // op error median / p90
  EXPECT_NE(html.find("fixture-2l"), std::string::npos);        // the model, from the domino meta object
  EXPECT_NE(html.find("plan custom"), std::string::npos);
  EXPECT_NE(html.find("head.fwd.xent"), std::string::npos);     // an op of the measurement only
  EXPECT_NE(html.find(kind_colour("allreduce")), std::string::npos);
  // Every op of every row is drawn with a tooltip: 18 predicted ops x 2 ranks + 36 measured.
  size_t tooltips = 0;
  for (size_t pos = html.find("<title>L"); pos != std::string::npos; pos = html.find("<title>L", pos + 1)) ++tooltips;
  size_t head_tooltips = 0;
  for (size_t pos = html.find("<title>head."); pos != std::string::npos; pos = html.find("<title>head.", pos + 1)) ++head_tooltips;
  EXPECT_EQ(tooltips + head_tooltips, 72u);
  EXPECT_NE(html.find("<title>L1.fwd.attn.ar (allreduce)\nstart 126.0 us, measured 12.00 us"), std::string::npos);
  // Critical-path strips: 17 ops on the predicted rows of rank 0 and of rank 1 (drawn from rank 0), 17 on
  // measured rank 1 (the rank that finished last).
  size_t strips = 0;
  for (size_t pos = html.find("class=\"cp\""); pos != std::string::npos; pos = html.find("class=\"cp\"", pos + 1)) ++strips;
  EXPECT_EQ(strips, 51u);
}

TEST_F(Report, IsSelfContained) {
  for (const char* needle : {"http", "src=", "href=", "url(", "@import", "<script", "<link", "<img"})
    EXPECT_EQ(html.find(needle), std::string::npos) << "report references something outside itself: " << needle;
}

TEST_F(Report, EscapesNamesFromTheTraces) {
  predicted.events[0].id = measured.events[0].id = "<b>&evil";
  measured.meta["model"] = "\"quoted\" <model>";
  Comparison c2 = compare_traces(predicted, measured);
  std::string h = render_html_report(predicted, measured, c2);
  EXPECT_EQ(h.find("<b>&evil"), std::string::npos);
  EXPECT_NE(h.find("&lt;b&gt;&amp;evil"), std::string::npos);
  EXPECT_EQ(h.find("<model>"), std::string::npos);
}

TEST_F(Report, WritesAtomically) {
  auto path = std::filesystem::temp_directory_path() / "domino_report_test.html";
  write_html_report(path.string(), predicted, measured, c);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), html);
  std::filesystem::remove(path);
}

#ifdef DOMINO_HAVE_ZLIB
TEST_F(Report, RendersInHeadlessChromium) {
  const char* chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << "no " << chromium << " (Debian package chromium): render test skipped";
  auto dir = std::filesystem::temp_directory_path() / ("domino_chromium_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "profile");
  const std::string report = (dir / "report.html").string(), png = (dir / "shot.png").string();
  write_html_report(report, predicted, measured, c);
  std::string cmd = std::string("timeout 120 ") + chromium +
                    " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
                    " --disable-component-update --disable-sync --user-data-dir=" + (dir / "profile").string() +
                    " --screenshot=" + png + " --window-size=1400,900 file://" + report + " > " +
                    (dir / "chromium.log").string() + " 2>&1";
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\nsee " << (dir / "chromium.log");
  test::Image img = test::decode_png(png);
  EXPECT_EQ(img.width, 1400u);
  EXPECT_EQ(img.height, 900u);

  std::set<uint32_t> colours;
  size_t non_white = 0;
  auto has_colour = [&](const char* hex) {
    unsigned r, g, b;
    std::sscanf(hex, "#%02x%02x%02x", &r, &g, &b);
    for (size_t i = 0; i + 2 < img.rgb.size(); i += 3)
      if (std::abs(int(img.rgb[i]) - int(r)) <= 3 && std::abs(int(img.rgb[i + 1]) - int(g)) <= 3 &&
          std::abs(int(img.rgb[i + 2]) - int(b)) <= 3)
        return true;
    return false;
  };
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    colours.insert(uint32_t(img.rgb[i]) << 16 | uint32_t(img.rgb[i + 1]) << 8 | img.rgb[i + 2]);
    non_white += !(img.rgb[i] > 245 && img.rgb[i + 1] > 245 && img.rgb[i + 2] > 245);
  }
  EXPECT_GT(colours.size(), 50u) << "screenshot looks blank";
  EXPECT_GT(non_white, size_t(img.width) * img.height / 50) << "screenshot is nearly all white";
  // The Gantt chart was drawn: GEMM and AllReduce bars are on screen.
  EXPECT_TRUE(has_colour(kind_colour("gemm")));
  EXPECT_TRUE(has_colour(kind_colour("allreduce")));
  std::filesystem::remove_all(dir);
}
#else
TEST(Report, RendersInHeadlessChromium) { GTEST_SKIP() << "built without zlib: cannot decode the screenshot"; }
#endif

}  // namespace
}  // namespace domino
