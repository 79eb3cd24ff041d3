// report_html.hpp: the self-contained HTML report of domino-compare (inline CSS and SVG, no scripts,
// no external resources): Gantt of predicted over measured, error by op kind, summary, plan and model.
#pragma once

#include <string>

#include "sim/compare/compare.hpp"
#include "sim/trace/timeline.hpp"

namespace domino {

std::string render_html_report(const TraceFile& predicted, const TraceFile& measured, const Comparison& c);
// Renders and writes through write_file_atomic.
void write_html_report(const std::string& path, const TraceFile& predicted, const TraceFile& measured,
                       const Comparison& c);

// Pieces shared with the report's figures (compare_report_svg.cpp).
std::string html_escape(const std::string& s);
const char* kind_colour(const std::string& kind);  // fill colour of an op kind (case-insensitive)
std::string gantt_svg(const TraceFile& predicted, const TraceFile& measured, const Comparison& c);
std::string kind_error_svg(const Comparison& c);

}  // namespace domino
