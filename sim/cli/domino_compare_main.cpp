// domino_compare_main.cpp: domino-compare, predicted vs measured trace: prints the comparison table and
// optionally writes the HTML report, the merged Chrome trace and the figures as JSON.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "sim/compare/compare.hpp"
#include "sim/base/cli_parse.hpp"
#include "sim/base/error.hpp"
#include "sim/compare/report_html.hpp"
#include "sim/trace/timeline.hpp"
#include "sim/base/files.hpp"

int main(int argc, char** argv) {
  return domino::run_main("domino-compare", [&]() -> int {
    CLI::App app{"Compare a predicted trace (domino-sim/domino-tune) with a measured one (domino-exec)."};
    std::string predicted_path, measured_path, html_path, merged_path, json_path;
    int rank = -1;
    std::string op_time = "median";
    app.add_option("PREDICTED", predicted_path, "predicted Chrome trace (JSON)")->required();
    app.add_option("MEASURED", measured_path, "measured Chrome trace (JSON)")->required();
    app.add_option("-o,--output", html_path, "write the self-contained HTML report here");
    app.add_option("--merged", merged_path, "write one Chrome trace holding both timelines (open in Perfetto)");
    app.add_option("--json", json_path, "write the figures as JSON (stable keys, see docs/compare.md)");
    app.add_option("--rank", rank,
                   "compare this rank only (default: per op, the median over ranks; a rank-0-only "
                   "prediction stands for every rank)")
        ->check(domino::non_negative_number());
    app.add_option("--op-time", op_time,
                   "a measured op's duration: median (over every timed iteration, as domino-exec records it; "
                   "the default) or iteration (the trace's one iteration, what older traces hold)")
        ->check(CLI::IsMember({"median", "iteration"}));
    app.set_version_flag("--version", std::string("domino-compare ") + DOMINO_VERSION);
    if (auto rc = domino::parse_command_line(app, argc, argv, "domino-compare")) return *rc;

    domino::TraceFile predicted = domino::read_trace(predicted_path);
    domino::TraceFile measured = domino::read_trace(measured_path);
    domino::CompareOptions options;
    options.rank = rank;
    options.one_iteration = op_time == "iteration";
    domino::Comparison c = domino::compare_traces(predicted, measured, options);

    std::fputs(domino::comparison_table(c).c_str(), stdout);
    if (!json_path.empty()) domino::write_file_atomic(json_path, domino::comparison_json(c).dump(2) + "\n");
    if (!merged_path.empty())
      domino::write_file_atomic(merged_path, domino::merged_trace_json(predicted, measured).dump() + "\n");
    if (!html_path.empty()) domino::write_html_report(html_path, predicted, measured, c);
    for (const auto& [what, path] : {std::pair{"report", html_path}, {"merged trace", merged_path}, {"figures", json_path}})
      if (!path.empty()) std::printf("%s: %s\n", what, path.c_str());
    return 0;
  });
}
