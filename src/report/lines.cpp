// The one-line-per-finding formats ruff users know: concise, grouped, pylint,
// azure (Azure Pipelines logging commands) and junit (JUnit XML for CI test
// reports). A notebook's findings are placed by cell where the format is read
// by people, in the notebook's own text where a CI service annotates the file.
#include <fmt/format.h>

#include <map>

#include "report/report.h"

namespace torchleak::report {

namespace {

// "train.py:14:13" or "train.ipynb:cell 3:8:9"; columns count code points.
std::string where(const Diagnostic& d, char sep = ':') {
  uint32_t col = codepoint_column(d.source_line, (d.notebook.cell ? d.notebook.start : d.start).column) + 1;
  if (d.notebook.cell) return fmt::format("cell {}:{}{}{}", d.notebook.cell, d.notebook.start.line, sep, col);
  return fmt::format("{}{}{}", d.start.line, sep, col);
}

uint32_t line_of(const Diagnostic& d) { return d.notebook.cell ? d.notebook.start.line : d.start.line; }

std::string marker(const Diagnostic& d) { return fixable(d) ? "[*] " : ""; }

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 has no place for other control characters.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') out += "\xEF\xBF\xBD";
        else out += c;
    }
  }
  return out;
}

// Azure Pipelines' escaping of logging command properties and messages.
std::string azure_escape(std::string_view s, bool property) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%AZP25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (property && c == ';') out += "%3B";
    else if (property && c == ']') out += "%5D";
    else out += c;
  }
  return out;
}

}  // namespace

bool fixable(const Diagnostic& d) { return d.fix && d.fix->safety == FixSafety::Safe && !d.fix->edits.empty(); }

std::string render_concise(const RunResult& result, const Options& options) {
  std::string out;
  for (const auto& d : result.diagnostics)
    out += fmt::format("{}:{}: {} {}{}\n", d.path, where(d), d.rule_id, marker(d), d.message);
  if (!options.quiet) out += summary_line(result);
  return out;
}

std::string render_grouped(const RunResult& result, const Options& options) {
  std::map<std::string, std::vector<const Diagnostic*>> by_file;
  std::vector<std::string> order;
  for (const auto& d : result.diagnostics) {
    if (!by_file.count(d.path)) order.push_back(d.path);
    by_file[d.path].push_back(&d);
  }
  std::string out;
  for (const auto& path : order) {
    const auto& list = by_file[path];
    size_t width = 0;
    for (const Diagnostic* d : list) width = std::max(width, where(*d).size());
    out += path + ":\n";
    for (const Diagnostic* d : list)
      out += fmt::format("  {:<{}} {} {}{}\n", where(*d), width, d->rule_id, marker(*d), d->message);
    out += "\n";
  }
  if (!options.quiet) out += summary_line(result);
  else if (!out.empty()) out.pop_back();
  return out;
}

std::string render_pylint(const RunResult& result, const Options&) {
  std::string out;
  for (const auto& d : result.diagnostics) {
    std::string at = d.notebook.cell ? fmt::format("{}:cell {}:{}", d.path, d.notebook.cell, line_of(d))
                                     : fmt::format("{}:{}", d.path, d.start.line);
    out += fmt::format("{}: [{}] {}\n", at, d.rule_id, d.message);
  }
  return out;
}

std::string render_azure(const RunResult& result, const Options& options) {
  const Catalogue& catalogue = Catalogue::builtin();
  std::string out;
  for (const auto& d : result.diagnostics) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    Severity sev = rule ? rule->severity : Severity::Warning;
    FileRange r = file_range(d);
    std::string message = d.notebook.cell ? cell_label(d) + ": " + d.message : d.message;
    out += fmt::format("##vso[task.logissue type={};sourcepath={};linenumber={};columnnumber={};code={};]{}\n",
                       sev == Severity::Error ? "error" : "warning",
                       azure_escape(repository_path(d.path, options.srcroot), true), r.start.line,
                       codepoint_column(r.start_line, r.start.column) + 1, d.rule_id, azure_escape(message, false));
  }
  for (const auto& e : result.errors)
    out += fmt::format("##vso[task.logissue type=error;sourcepath={};]{}\n",
                       azure_escape(repository_path(e.path, options.srcroot), true), azure_escape(e.message, false));
  return out;
}

std::string render_junit(const RunResult& result, const Options&) {
  std::map<std::string, std::vector<const Diagnostic*>> by_file;
  for (const auto& d : result.diagnostics) by_file[d.path].push_back(&d);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  size_t n = result.diagnostics.size();
  out += fmt::format("<testsuites name=\"torchleak\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n", n, n,
                     result.errors.size());
  for (const auto& [path, list] : by_file) {
    out += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" disabled=\"0\" errors=\"0\" failures=\"{}\" package=\"torchleak\">\n",
        xml_escape(path), list.size(), list.size());
    for (const Diagnostic* d : list) {
      uint32_t col = codepoint_column(d->source_line, (d->notebook.cell ? d->notebook.start : d->start).column) + 1;
      std::string at = d->notebook.cell ? fmt::format("cell {}, line {}, col {}", d->notebook.cell, line_of(*d), col)
                                        : fmt::format("line {}, col {}", line_of(*d), col);
      out += fmt::format("    <testcase name=\"torchleak.{}\" classname=\"{}\" line=\"{}\" column=\"{}\">\n",
                         d->rule_id, xml_escape(path), line_of(*d), col);
      out += fmt::format("      <failure message=\"{}\">{}, {}</failure>\n", xml_escape(d->message), at,
                         xml_escape(d->message));
      out += "    </testcase>\n";
    }
    out += "  </testsuite>\n";
  }
  for (const auto& e : result.errors) {
    out += fmt::format(
        "  <testsuite name=\"{}\" tests=\"1\" disabled=\"0\" errors=\"1\" failures=\"0\" package=\"torchleak\">\n",
        xml_escape(e.path));
    out += fmt::format("    <testcase name=\"torchleak.analysis\" classname=\"{}\">\n", xml_escape(e.path));
    out += fmt::format("      <error message=\"{}\"/>\n", xml_escape(e.message));
    out += "    </testcase>\n  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

}  // namespace torchleak::report
