// The HTML dashboard: one self-contained file (the chart libraries, the page's script and style
// and the data inlined), which opens offline. Tables are written here, as HTML, so they read
// without scripts; the charts are drawn in the browser by reports/dashboard/dashboard.js from the
// rows of chart_data (dashboard_data.h).
//
// Every string that comes from a file (op names, backend names, messages, provenance, paths) is
// other people's text: it goes into the page through html_escape or script_json only, and the
// page's Content-Security-Policy runs only the scripts that carry its nonce, so that a string that
// got through unescaped still could not run.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reports/dashboard_assets.h"
#include "reports/dashboard_data.h"

namespace bitparity::reports {

// Section ids, in page order; each section is present whatever the sources (saying what is
// missing when its source is), which the render test checks.
inline constexpr std::string_view kDashboardSections[] = {"bench", "latest", "findings", "ulp", "corpus", "coverage"};

// Text and attribute values: & < > " ' as character references.
std::string html_escape(std::string_view text);
// JSON that is safe inside <script type="application/json">: '<', '>' and '&' (which only appear
// inside strings) as \u003c, \u003e and \u0026, so "</script>" in a string cannot end the element;
// invalid UTF-8 is replaced.
std::string script_json(const nlohmann::json& value);
// A script's text made safe to inline: "</script" and "<!--" (which would end the element or
// change how it is parsed) written as "<\/script" and "<\!--", the same in strings and regexes.
std::string inline_script(std::string_view code);

struct DashboardPage {
  std::string title = "bitparity dashboard";
  std::string generated;  // the date the page was made, shown in its header
  std::string nonce;      // the CSP nonce of the page's scripts: random, base64 characters
};

std::string render_dashboard(const DashboardData& data, const ChartAssets& assets, const DashboardPage& page);

}  // namespace bitparity::reports
