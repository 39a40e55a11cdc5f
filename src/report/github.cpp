// GitHub Actions workflow commands: one ::warning / ::error / ::notice line
// per finding, which the runner turns into an annotation on the file and line.
// Files that could not be analyzed become ::error lines, caveats ::notice.
#include <fmt/format.h>

#include "report/report.h"

namespace torchleak::report {

namespace {

// The runner's escaping (actions/toolkit, command.ts): the message escapes
// %, CR and LF; a property value also : and , which delimit properties.
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

std::string command(Severity s) {
  return s == Severity::Error ? "error" : s == Severity::Note ? "notice" : "warning";
}

}  // namespace

std::string render_github(const RunResult& result, const Options& options) {
  const Catalogue& catalogue = Catalogue::builtin();
  std::string out;
  for (const auto& d : result.diagnostics) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    // Columns count code points, 1-based; the end column is exclusive.
    FileRange r = file_range(d);
    std::string props = fmt::format("file={},line={},col={},endLine={}",
                                     escape_property(repository_path(d.path, options.srcroot)), r.start.line,
                                     codepoint_column(r.start_line, r.start.column) + 1, r.end.line);
    if (r.end.line == r.start.line)
      props += fmt::format(",endColumn={}", codepoint_column(r.start_line, r.end.column) + 1);
    props += ",title=" + escape_property(d.rule_id + " " + (rule ? rule->name : ""));
    out += fmt::format("::{} {}::{}\n", command(rule ? rule->severity : Severity::Warning), props,
                       escape_data(d.notebook.cell ? cell_label(d) + ": " + d.message : d.message));
  }
  auto file_message = [&](const FileError& e, std::string_view cmd, std::string_view what) {
    out += fmt::format("::{} file={},title={}::{}\n", cmd, escape_property(repository_path(e.path, options.srcroot)),
                       escape_property(what), escape_data(e.message));
  };
  for (const auto& e : result.errors) file_message(e, "error", "torchleak: could not analyze");
  for (const auto& n : result.notes) file_message(n, "notice", "torchleak: note");
  return out;
}

}  // namespace torchleak::report
