// GitHub Actions workflow commands: one ::warning / ::error line per finding.
#include <fmt/format.h>

#include "report/report.h"

namespace torchleak::report {

namespace {
// Workflow command escaping: data escapes %, CR, LF; properties also : and ,.
std::string escape_data(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}
std::string escape_property(std::string_view s) {
  std::string out;
  for (char c : escape_data(s)) {
    if (c == ':') out += "%3A";
    else if (c == ',') out += "%2C";
    else out += c;
  }
  return out;
}
}  // namespace

std::string render_github(const RunResult& result, const Options&) {
  const Catalogue& catalogue = Catalogue::builtin();
  std::string out;
  for (const auto& d : result.diagnostics) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    std::string level = rule && rule->severity == Severity::Error ? "error"
                        : rule && rule->severity == Severity::Note ? "notice"
                                                                   : "warning";
    uint32_t col = codepoint_column(d.source_line, d.start.column) + 1;
    std::string props = fmt::format("file={},line={},col={}", escape_property(d.path), d.start.line, col);
    if (d.end.line == d.start.line)
      props += fmt::format(",endLine={},endColumn={}", d.end.line,
                           codepoint_column(d.source_line, d.end.column) + 1);
    props += ",title=" + escape_property(d.rule_id + " " + (rule ? rule->name : ""));
    out += fmt::format("::{} {}::{}\n", level, props, escape_data(d.message));
  }
  return out;
}

}  // namespace torchleak::report
