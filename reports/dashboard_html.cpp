#include "reports/dashboard_html.h"

#include <cctype>
#include <cstdio>
#include <set>

namespace bitparity::reports {
namespace {

using nlohmann::json;

std::string esc(std::string_view text) { return html_escape(text); }

std::string number(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string optional_number(const std::optional<double>& value, int decimals) {
  return value ? number(*value, decimals) : "–";
}

// A scalar of another person's JSON as text: strings as they are, numbers and booleans as JSON
// writes them, anything else (missing, null, objects) as a dash.
std::string scalar(const json& object, const std::string& key) {
  if (!object.is_object()) return "–";
  auto it = object.find(key);
  if (it == object.end() || it->is_null() || it->is_object() || it->is_array()) return "–";
  if (it->is_string()) return it->get<std::string>();
  return it->dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string chart(const std::string& id, const std::string& name) {
  return "<div class=\"chart\" id=\"" + id + "\" data-chart=\"" + name + "\"></div>\n";
}

std::string missing(const std::string& text) { return "<p class=\"missing\">" + text + "</p>\n"; }

std::string section(std::string_view id, const std::string& title, const std::string& body) {
  return "<section id=\"" + std::string(id) + "\">\n<h2>" + title + "</h2>\n" + body + "</section>\n";
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  const std::string& css_class = "") {
  std::string s = "<table" + (css_class.empty() ? "" : " class=\"" + css_class + "\"") + ">\n<thead><tr>";
  for (const std::string& h : header) s += "<th>" + esc(h) + "</th>";
  s += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    s += "<tr>";
    for (const std::string& cell : row) s += "<td>" + cell + "</td>";  // cells arrive escaped
    s += "</tr>\n";
  }
  return s + "</tbody>\n</table>\n";
}

const char* kNoReport =
    "No campaign report was given: pass <code>--report R.json</code> (written by <code>bitparity campaign "
    "--report</code> or <code>bitparity merge --report</code>).";

// --- bench --------------------------------------------------------------------------------------

std::string bench_section(const DashboardData& data) {
  std::string body;
  if (!data.bench) {
    body = missing("No bench history was given: pass <code>--bench-history DIR</code> (the folder that "
                   "<code>bitparity bench run</code> and <code>bitparity bench record</code> write).");
  } else if (bench_points(*data.bench).empty()) {
    body = missing("The bench history in <code>" + esc(data.bench_dir) + "</code> has " +
                   std::to_string(data.bench->size()) +
                   " run(s) and no kernel with a copy bandwidth measured beside it: nothing to draw.");
  } else {
    body = "<p>Each kernel's bandwidth as a percentage of a device-to-device copy of the same bytes timed in the "
           "same run: 100 % is the copy roofline. History: <code>" +
           esc(data.bench_dir) + "</code>, " + std::to_string(data.bench->size()) + " run(s).</p>\n" +
           chart("chart-bench", "bench");
  }
  return section("bench", "Kernels against the copy roofline", body);
}

std::string context_text(const BenchContext& c) {
  std::string s = esc(c.date) + ", commit <code>" + esc(c.commit.substr(0, 12)) + "</code>, host " + esc(c.host);
  if (c.gpu) s += ", " + esc(*c.gpu);
  if (c.driver) s += ", driver " + esc(*c.driver);
  if (c.sm_clock_mhz) s += ", SM clock " + number(*c.sm_clock_mhz, 0) + " MHz";
  if (c.mem_clock_mhz) s += ", memory clock " + number(*c.mem_clock_mhz, 0) + " MHz";
  return s;
}

// The kernel's % of copy against the same kernel in the previous run, in points.
std::string change_text(const BenchKernel& kernel, const BenchRun* previous) {
  if (!previous || !kernel.pct_of_copy) return "–";
  for (const BenchKernel& before : previous->kernels)
    if (before.name == kernel.name && before.pct_of_copy) {
      const double delta = *kernel.pct_of_copy - *before.pct_of_copy;
      return (delta > 0 ? "+" : "") + number(delta, 1);
    }
  return "new";
}

std::string latest_section(const DashboardData& data) {
  std::string body;
  if (!data.bench) {
    body = missing("No bench history was given, so there is no latest run to show.");
  } else if (data.bench->empty()) {
    body = missing("The bench history in <code>" + esc(data.bench_dir) + "</code> holds no run file.");
  } else {
    const BenchRun& run = data.bench->back();
    const BenchRun* previous = data.bench->size() > 1 ? &(*data.bench)[data.bench->size() - 2] : nullptr;
    body = "<p>" + context_text(run.context) + "; copy bandwidth " + optional_number(run.copy_gb_per_s, 1) +
           " GB/s. The change is against the previous run's median (points of % of copy); whether it is real is "
           "what <code>bitparity bench compare</code> decides.</p>\n";
    std::vector<std::vector<std::string>> rows;
    for (const BenchKernel& k : run.kernels)
      rows.push_back({"<code>" + esc(k.name) + "</code>", number(k.bytes, 0), std::to_string(k.times_ns.size()),
                      number(k.time_ns / 1000.0, 3), optional_number(k.gb_per_s, 1), optional_number(k.tflop_per_s, 3),
                      optional_number(k.copy_gb_per_s, 1), optional_number(k.pct_of_copy, 1),
                      change_text(k, previous)});
    body += table({"kernel", "bytes", "reps", "median µs", "GB/s", "TFLOP/s", "copy GB/s", "% of copy", "change"},
                  rows, "numbers");
  }
  return section("latest", "Latest bench run", body);
}

// --- report -------------------------------------------------------------------------------------

std::string run_text(const DashboardData& data) {
  const Report& r = *data.report;
  std::string files;
  for (const std::string& f : data.report_files) files += (files.empty() ? "" : ", ") + ("<code>" + esc(f) + "</code>");
  std::string s = "<p>Report " + files + ": seed " + std::to_string(r.run.seed) + ", shard(s) ";
  std::string shards;
  for (const std::string& shard : r.run.shards) shards += (shards.empty() ? "" : " ") + esc(shard);
  s += shards + ", " + number(r.run.elapsed_seconds, 1) + " s, commit <code>" + esc(r.run.commit.substr(0, 12)) +
       "</code>, " + esc(r.run.date) + ", " + esc(r.run.device) + ".</p>\n";
  if (r.run.interrupted) s += "<p class=\"warning\">The run was interrupted; the counts cover the cases before.</p>\n";
  if (r.run.error) s += "<p class=\"warning\">The run stopped early: " + esc(*r.run.error) + "</p>\n";
  return s;
}

std::string findings_section(const DashboardData& data) {
  if (!data.report) return section("findings", "Findings by op, contract pair and kind", missing(kNoReport));
  const Report& r = *data.report;
  std::string body = run_text(data);
  const std::vector<FindingGroup> groups = finding_groups(r);
  if (groups.empty()) {
    int64_t cases = 0;
    for (const PairCounts& c : r.counts) cases += c.cases;
    body += missing("No findings: the " + std::to_string(cases) + " case(s) of this report agreed or were skipped.");
  } else {
    body += "<p>Cases that showed each kind of finding (before deduplication), by op and contract pair.</p>\n" +
            chart("chart-findings", "findings");
    std::vector<std::vector<std::string>> rows;
    for (const FindingGroup& g : groups)
      rows.push_back({esc(g.op), esc(g.pair), esc(g.kind), std::to_string(g.cases), std::to_string(g.entries),
                      std::to_string(g.failures)});
    body += table({"op", "pair", "kind", "cases", "new entries", "of which bugs"}, rows);
  }
  if (!r.findings.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const FindingRecord& f : r.findings)
      rows.push_back({esc(f.op) + " " + esc(f.direction), esc(f.a) + " vs " + esc(f.b), esc(f.kind), esc(f.output),
                      "<span class=\"pin-" + (is_failure(f) ? std::string("bug") : std::string("divergence")) + "\">" +
                          esc(f.pins) + "</span>",
                      "<pre>" + esc(f.message) + "</pre>",
                      f.file.empty() ? "–" : "<code>" + esc(replay_command(f.file)) + "</code>"});
    body += "<h3>New findings of this report</h3>\n" +
            table({"op", "pair", "kind", "output", "pins", "message", "replay"}, rows, "findings");
  }
  return section("findings", "Findings by op, contract pair and kind", body);
}

std::string ulp_section(const DashboardData& data) {
  std::string body;
  if (!data.report) {
    body = missing(kNoReport);
  } else if (ulp_bars(*data.report).empty()) {
    bool any_histogram = false;
    for (const PairCounts& c : data.report->counts) any_histogram = any_histogram || !c.ulp_histogram.empty();
    body = missing(any_histogram || !data.report->coverage.empty()
                       ? "No bit differences: no pair of this report differed in bits."
                       : "This report has no ulp histograms (it was written before campaigns recorded them).");
  } else {
    body = "<p>Mismatching elements by ulp distance (\"0\": a signed zero or a NaN payload; \"nan\": one side NaN), "
           "per op, direction and pair.</p>\n" +
           chart("chart-ulp", "ulp");
  }
  return section("ulp", "ulp histograms", body);
}

std::string coverage_section(const DashboardData& data) {
  std::string body;
  if (!data.report) {
    body = missing(kNoReport);
  } else if (data.report->coverage.empty()) {
    body = missing("This report has no coverage (it was written before campaigns recorded it).");
  } else {
    body = "<p>Share of each op's generated cases in each edge class (the generator's classify/tag labels); an "
           "outlined cell is a class the op requires.</p>\n" +
           chart("chart-coverage", "coverage");
    std::vector<std::vector<std::string>> rows;
    for (const Coverage& c : data.report->coverage) {
      std::string gaps;
      for (const std::string& tag : c.required)
        if (!c.tags.count(tag) || c.tags.at(tag) == 0) gaps += (gaps.empty() ? "" : ", ") + esc(tag);
      rows.push_back({esc(c.op) + " " + esc(c.direction), std::to_string(c.cases), std::to_string(c.tags.size()),
                      gaps.empty() ? "none" : "<span class=\"warning\">" + gaps + "</span>"});
    }
    body += table({"op", "cases", "classes seen", "required classes not reached"}, rows);
  }
  return section("coverage", "Coverage by edge class", body);
}

// --- corpus -------------------------------------------------------------------------------------

std::string first_text(const json& first) {
  if (!first.is_object()) return "–";
  std::string position = "–";
  if (auto it = first.find("position"); it != first.end() && it->is_array())
    position = it->dump(-1, ' ', false, json::error_handler_t::replace);
  return "at " + esc(position) + ": a = <code>" + esc(scalar(first, "a_bits")) + "</code>, b = <code>" +
         esc(scalar(first, "b_bits")) + "</code>, " + esc(scalar(first, "ulps")) + " ulp";
}

std::string arbitration_text(const CorpusRow& row) {
  if (!row.arbitration.is_object()) return "no oracle for this output";
  const std::string closer = scalar(row.arbitration, "closer");
  return "truth " + esc(scalar(row.arbitration, "truth")) + "; a off by " + esc(scalar(row.arbitration, "a_ulps")) +
         " ulp, b off by " + esc(scalar(row.arbitration, "b_ulps")) + " ulp; closer: <strong>" + esc(closer) +
         "</strong>";
}

std::string inputs_text(const CorpusRow& row) {
  std::string s;
  for (const TensorBits& t : row.inputs)
    s += "<div><code>" + esc(t.name) + "</code> " + esc(t.dtype) + " " + esc(t.shape) + ": <code class=\"bits\">" +
         esc(t.hex) + (t.cut ? "…" : "") + "</code></div>";
  return s;
}

std::string corpus_entry(const CorpusRow& row) {
  std::string s = "<article class=\"entry\">\n<h3>" + esc(row.op) + " " + esc(row.direction) + ": " + esc(row.a) +
                  " vs " + esc(row.b) + " — " + esc(row.kind) + (row.output.empty() ? "" : " in " + esc(row.output)) +
                  " <span class=\"pin-" + (row.pins == "divergence" ? "divergence" : "bug") + "\">" + esc(row.pins) +
                  "</span></h3>\n<dl>\n";
  auto item = [&s](const std::string& term, const std::string& value) {
    s += "<dt>" + term + "</dt><dd>" + value + "</dd>\n";
  };
  item("replay", "<code class=\"replay\">" + esc(row.replay) + "</code>");
  item("first mismatch", first_text(row.first));
  item("arbitration", arbitration_text(row));
  item("inputs", inputs_text(row));
  item("attrs", "<code>" + esc(row.attrs) + "</code>");
  if (!row.provenance.empty()) item("provenance", esc(row.provenance));
  item("signature", "<code>" + esc(row.signature) + "</code>");
  if (!row.message.empty()) item("message", "<pre>" + esc(row.message) + "</pre>");
  return s + "</dl>\n</article>\n";
}

std::string corpus_section(const DashboardData& data) {
  std::string body;
  if (!data.corpus) {
    body = missing("No corpus was given: pass <code>--corpus DIR</code> (a folder of minimized entries, such as "
                   "the campaign's <code>--corpus</code>).");
  } else if (data.corpus->empty()) {
    body = missing("The corpus <code>" + esc(data.corpus_dir) + "</code> holds no entry.");
  } else {
    body = "<p>" + std::to_string(data.corpus->size()) + " entr" + (data.corpus->size() == 1 ? "y" : "ies") +
           " in <code>" + esc(data.corpus_dir) + "</code>. Bits are each element's pattern in hex, row-major.</p>\n";
    for (const CorpusRow& row : *data.corpus) body += corpus_entry(row);
  }
  return section("corpus", "Corpus", body);
}

std::string navigation() {
  return "<nav><a href=\"#bench\">bench history</a> <a href=\"#latest\">latest run</a> <a href=\"#findings\">"
         "findings</a> <a href=\"#ulp\">ulp histograms</a> <a href=\"#corpus\">corpus</a> <a href=\"#coverage\">"
         "coverage</a></nav>\n";
}

// Runs before everything else: any script error or failed promise is listed at the top of the
// page (a reader sees it; the render test fails on it).
constexpr std::string_view kErrorCatcher = R"js(
window.bitparityErrors = [];
window.bitparityReportError = function (what) {
  var text = String(what);
  window.bitparityErrors.push(text);
  var list = document.getElementById('script-errors');
  if (!list) return;
  var item = document.createElement('li');
  item.textContent = text;
  list.appendChild(item);
  list.hidden = false;
};
window.addEventListener('error', function (e) { window.bitparityReportError('script error: ' + e.message); });
window.addEventListener('unhandledrejection', function (e) {
  window.bitparityReportError('unhandled rejection: ' + (e.reason && e.reason.message ? e.reason.message : e.reason));
});
)js";

std::string script(const std::string& nonce, std::string_view code) {
  return "<script nonce=\"" + nonce + "\">" + inline_script(code) + "</script>\n";
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  return out;
}

std::string script_json(const json& value) {
  const std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) switch (ch) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += ch;
    }
  return out;
}

std::string inline_script(std::string_view code) {
  std::string out;
  out.reserve(code.size());
  auto at = [&code](size_t i, std::string_view word) {
    if (code.size() - i < word.size()) return false;
    for (size_t k = 0; k < word.size(); ++k)
      if (std::tolower(static_cast<unsigned char>(code[i + k])) != word[k]) return false;
    return true;
  };
  for (size_t i = 0; i < code.size(); ++i) {
    if (at(i, "</script")) out += "<\\/";
    else if (at(i, "<!--")) out += "<\\!";
    else {
      out += code[i];
      continue;
    }
    i += 1;  // past '<' and the '/' or '!' that was rewritten
  }
  return out;
}

std::string render_dashboard(const DashboardData& data, const ChartAssets& assets, const DashboardPage& page) {
  const std::string& n = page.nonce;
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Only the page's own scripts run (those with the nonce); Vega compiles its expressions with
  // Function, hence 'unsafe-eval'; nothing is fetched from anywhere.
  s += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'nonce-" + n +
       "' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<title>" + esc(page.title) + "</title>\n<style>" + std::string(dashboard_style()) + "</style>\n";
  s += script(n, kErrorCatcher);
  s += "</head>\n<body>\n<header>\n<h1>" + esc(page.title) + "</h1>\n";
  if (!page.generated.empty()) s += "<p class=\"generated\">Written " + esc(page.generated) + ".</p>\n";
  s += navigation();
  s += "<ul id=\"script-errors\" hidden></ul>\n</header>\n<main>\n";
  s += bench_section(data) + latest_section(data) + findings_section(data) + ulp_section(data) +
       corpus_section(data) + coverage_section(data);
  s += "</main>\n";
  s += "<script type=\"application/json\" id=\"bitparity-data\">" + script_json(chart_data(data)) + "</script>\n";
  s += script(n, assets.vega) + script(n, assets.vega_lite) + script(n, assets.vega_embed);
  s += script(n, dashboard_script());
  return s + "</body>\n</html>\n";
}

}  // namespace bitparity::reports
