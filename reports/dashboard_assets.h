// The files that `bitparity report --html` inlines into its page, compiled into the binary with
// the assembler's .incbin (reports/dashboard/dashboard.cmake names them), so that the page opens
// offline and the binary needs no file beside it: the page's own script and style, always; the
// chart libraries (Vega, Vega-Lite, vega-embed from the npm registry, pinned in
// reports/dashboard/package-lock.json) where scripts/fetch_charts.sh had installed them when the
// build was configured.
#pragma once

#include <optional>
#include <string_view>

namespace bitparity::reports {

struct ChartAssets {
  std::string_view vega, vega_lite, vega_embed;  // minified UMD builds
};

// nullopt in a build configured without reports/dashboard/node_modules.
std::optional<ChartAssets> embedded_chart_assets();
// The message a command prints when embedded_chart_assets() is nullopt: how to get them.
std::string_view missing_chart_assets_message();

std::string_view dashboard_script();  // reports/dashboard/dashboard.js
std::string_view dashboard_style();   // reports/dashboard/dashboard.css

}  // namespace bitparity::reports
