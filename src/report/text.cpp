// The text report, in the compiler style editors and terminals already parse:
//   path:line:col: warning: message [TL001 accumulate-undetached]
// then the source line with a caret under the finding and a one-line hint of
// the fix, and a closing summary.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "report/report.h"

namespace torchleak::report {

namespace {

struct Style {
  bool on;
  std::string bold(std::string_view s) const { return wrap("\033[1m", s); }
  std::string red(std::string_view s) const { return wrap("\033[1;31m", s); }
  std::string yellow(std::string_view s) const { return wrap("\033[1;33m", s); }
  std::string cyan(std::string_view s) const { return wrap("\033[1;36m", s); }
  std::string blue(std::string_view s) const { return wrap("\033[1;34m", s); }
  std::string severity(Severity sev, std::string_view s) const {
    return sev == Severity::Error ? red(s) : sev == Severity::Note ? cyan(s) : yellow(s);
  }
  std::string wrap(std::string_view code, std::string_view s) const {
    return on ? fmt::format("{}{}\033[0m", code, s) : std::string(s);
  }
};

std::string plural(size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// The source line with a caret line under the finding (to the end of the
// line when the finding spans several). Tabs before the finding are copied,
// every other character becomes one blank, so the caret lines up wherever
// the terminal puts its tab stops.
std::string snippet(const Diagnostic& d, Severity sev, const Style& st) {
  std::string_view line = d.source_line;
  std::string number = std::to_string(d.notebook.cell ? d.notebook.start.line : d.start.line);
  std::string blank_gutter(std::max<size_t>(number.size(), 5), ' ');
  std::string gutter = fmt::format("{:>{}}", number, blank_gutter.size());
  std::string out = st.blue(gutter + " |") + " " + std::string(line) + "\n";
  uint32_t start = std::min<uint32_t>(d.start.column, static_cast<uint32_t>(line.size()));
  std::string pad;
  for (uint32_t i = 0; i < start; ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if ((c & 0xC0) == 0x80) continue;
    pad += c == '\t' ? '\t' : ' ';
  }
  uint32_t end = d.end.line == d.start.line ? std::min<uint32_t>(d.end.column, static_cast<uint32_t>(line.size()))
                                            : static_cast<uint32_t>(line.size());
  uint32_t width = end > start ? codepoint_column(line, end) - codepoint_column(line, start) : 0;
  out += st.blue(blank_gutter + " |") + " " + pad + st.severity(sev, std::string(std::max(width, 1u), '^')) + "\n";
  if (!d.help.empty()) out += fmt::format("{} = {} {}\n", blank_gutter, st.cyan("help:"), d.help);
  return out;
}

std::string finding(const Diagnostic& d, const Catalogue& catalogue, const Style& st) {
  const RuleInfo* rule = catalogue.find(d.rule_id);
  Severity sev = rule ? rule->severity : Severity::Warning;
  uint32_t col = codepoint_column(d.source_line, d.start.column) + 1;
  // A notebook's findings by cell, as ruff prints them: train.ipynb:cell 3:12:5
  std::string where = d.notebook.cell ? fmt::format("{}:cell {}:{}:{}", d.path, d.notebook.cell,
                                                     d.notebook.start.line, col)
                                      : fmt::format("{}:{}:{}", d.path, d.start.line, col);
  std::string out = fmt::format("{}: {} {} [{} {}]\n", st.bold(where),
                                st.severity(sev, fmt::format("{}:", severity_name(sev))), d.message, d.rule_id,
                                rule ? rule->name : "");
  return out + snippet(d, sev, st) + "\n";
}

// Problems per rule, most frequent first:   3  TL001  accumulate-undetached
// A rule with a finding that --fix fixes is marked [*], as ruff marks them.
std::string statistics(const RunResult& result, const Catalogue& catalogue) {
  auto counts = problems_per_rule(result);
  std::set<std::string> fixable_rules;
  for (const auto& d : result.diagnostics)
    if (fixable(d)) fixable_rules.insert(d.rule_id);
  size_t count_width = 1, id_width = 1;
  for (const auto& [id, n] : counts) {
    count_width = std::max(count_width, std::to_string(n).size());
    id_width = std::max(id_width, id.size());
  }
  std::string out;
  for (const auto& [id, n] : counts) {
    const RuleInfo* rule = catalogue.find(id);
    out += fmt::format("{:>{}}  {:<{}}  {} {}\n", n, count_width, id, id_width,
                       fixable_rules.count(id) ? "[*]" : "[ ]", rule ? rule->name : "");
  }
  return out;
}

}  // namespace

std::string summary_line(const RunResult& result) {
  std::set<std::string> files;
  for (const auto& d : result.diagnostics) files.insert(d.path);
  std::string context = result.context_files
                            ? fmt::format(" with {} of the project", plural(result.context_files, "other file"))
                            : std::string();
  std::string tail = fmt::format("({} analyzed{} in {:.2f} s)", plural(result.files_analyzed, "file"), context,
                                 result.seconds);
  std::string out = result.diagnostics.empty()
                        ? fmt::format("No problems found {}", tail)
                        : fmt::format("Found {} in {} {}", plural(result.diagnostics.size(), "problem"),
                                      plural(files.size(), "file"), tail);
  size_t fixes = static_cast<size_t>(std::count_if(result.diagnostics.begin(), result.diagnostics.end(), fixable));
  if (fixes) out += fmt::format("; {} fixable with --fix", fixes);
  // Fixes marked unsafe are hidden from --fix: say they exist, as ruff does.
  size_t hidden = static_cast<size_t>(std::count_if(result.diagnostics.begin(), result.diagnostics.end(),
                                                    [](const Diagnostic& d) { return d.fix && !d.fix->edits.empty() && !fixable(d); }));
  if (hidden) out += fmt::format("; {} {} with --fix --unsafe-fixes", hidden, fixes ? "more" : "fixable");
  if (!result.errors.empty())
    out += fmt::format("; {} could not be analyzed", plural(result.errors.size(), "path"));
  return out + "\n";
}

std::string render_text(const RunResult& result, const Options& options) {
  Style st{options.color};
  const Catalogue& catalogue = Catalogue::builtin();
  std::string out;
  if (options.statistics) {
    out += statistics(result, catalogue);
    if (!options.quiet && !result.diagnostics.empty()) out += "\n";
  } else {
    for (const auto& d : result.diagnostics) out += finding(d, catalogue, st);
    // Findings are separated by a blank line; none is left dangling at the end.
    if (options.quiet && !out.empty()) out.pop_back();
  }
  if (!options.quiet) out += summary_line(result);
  return out;
}

std::string render(Format format, const RunResult& result, const Options& options) {
  switch (format) {
    case Format::Text: return render_text(result, options);
    case Format::Json: return render_json(result, options);
    case Format::Sarif: return render_sarif(result, options);
    case Format::Github: return render_github(result, options);
    case Format::Gitlab: return render_gitlab(result, options);
    case Format::Concise: return render_concise(result, options);
    case Format::Grouped: return render_grouped(result, options);
    case Format::Pylint: return render_pylint(result, options);
    case Format::Azure: return render_azure(result, options);
    case Format::Junit: return render_junit(result, options);
  }
  return {};
}

}  // namespace torchleak::report
