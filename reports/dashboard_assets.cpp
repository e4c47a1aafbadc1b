#include "reports/dashboard_assets.h"

// Each BITPARITY_*_PATH is a string literal: the absolute path of the file. The bytes go into
// .rodata as they are, between a begin and an end symbol; nothing is read at run time.
#define BITPARITY_EMBED(symbol, path)                          \
  __asm__(".pushsection .rodata\n"                             \
          ".globl " #symbol "_begin\n" #symbol "_begin:\n"     \
          ".incbin \"" path "\"\n"                             \
          ".globl " #symbol "_end\n" #symbol "_end:\n"         \
          ".popsection\n");                                    \
  extern "C" const char symbol##_begin[];                      \
  extern "C" const char symbol##_end[];

BITPARITY_EMBED(bitparity_dashboard_js, BITPARITY_DASHBOARD_JS_PATH)
BITPARITY_EMBED(bitparity_dashboard_css, BITPARITY_DASHBOARD_CSS_PATH)
#ifdef BITPARITY_VEGA_PATH
BITPARITY_EMBED(bitparity_vega_js, BITPARITY_VEGA_PATH)
BITPARITY_EMBED(bitparity_vega_lite_js, BITPARITY_VEGA_LITE_PATH)
BITPARITY_EMBED(bitparity_vega_embed_js, BITPARITY_VEGA_EMBED_PATH)
#endif

namespace bitparity::reports {
namespace {

std::string_view between(const char* begin, const char* end) {
  return {begin, static_cast<size_t>(end - begin)};
}

}  // namespace

std::optional<ChartAssets> embedded_chart_assets() {
#ifdef BITPARITY_VEGA_PATH
  return ChartAssets{between(bitparity_vega_js_begin, bitparity_vega_js_end),
                     between(bitparity_vega_lite_js_begin, bitparity_vega_lite_js_end),
                     between(bitparity_vega_embed_js_begin, bitparity_vega_embed_js_end)};
#else
  return std::nullopt;
#endif
}

std::string_view missing_chart_assets_message() {
  return "this bitparity was built without the dashboard's chart libraries (Vega, Vega-Lite, vega-embed), so it "
         "cannot write an HTML report. Where the npm registry can be reached, run scripts/fetch_charts.sh (it runs "
         "`npm ci` in reports/dashboard; scripts/setup.sh calls it), then configure and build again; or use a "
         "bitparity binary built where they were installed: the libraries are compiled into the binary.";
}

std::string_view dashboard_script() { return between(bitparity_dashboard_js_begin, bitparity_dashboard_js_end); }
std::string_view dashboard_style() { return between(bitparity_dashboard_css_begin, bitparity_dashboard_css_end); }

}  // namespace bitparity::reports
