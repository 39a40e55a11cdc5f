#include <fmt/format.h>

#include <map>
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
  std::string wrap(std::string_view code, std::string_view s) const {
    return on ? fmt::format("{}{}\033[0m", code, s) : std::string(s);
  }
};

std::string plural(size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// The source line with a caret line under the finding. Tabs and other
// characters before the finding are copied as blanks of the same kind, so
// the caret lines up in any terminal.
std::string snippet(const Diagnostic& d, const Style& st) {
  std::string_view line = d.source_line;
  std::string gutter = fmt::format("{:>5} | ", d.start.line);
  std::string empty_gutter = "      | ";
  std::string out = st.blue(gutter) + std::string(line) + "\n";
  std::string pad;
  uint32_t start = std::min<uint32_t>(d.start.column, static_cast<uint32_t>(line.size()));
  for (uint32_t i = 0; i < start; ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if ((c & 0xC0) == 0x80) continue;
    pad += c == '\t' ? '\t' : ' ';
  }
  uint32_t end = d.end.line == d.start.line ? std::min<uint32_t>(d.end.column, static_cast<uint32_t>(line.size()))
                                            : static_cast<uint32_t>(line.size());
  uint32_t width = codepoint_column(line, end) - codepoint_column(line, start);
  if (width == 0) width = 1;
  out += st.blue(empty_gutter) + pad + st.red(std::string(width, '^')) + "\n";
  return out;
}

}  // namespace

std::string render_text(const RunResult& result, const Options& options) {
  Style st{options.color};
  const Catalogue& catalogue = Catalogue::builtin();
  std::string out;
  std::set<std::string> files;
  std::map<std::string, size_t> per_rule;
  for (const auto& d : result.diagnostics) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    std::string sev(rule ? severity_name(rule->severity) : "warning");
    std::string sev_styled = sev == "error" ? st.red(sev + ":") : st.yellow(sev + ":");
    uint32_t col = codepoint_column(d.source_line, d.start.column) + 1;
    out += fmt::format("{}: {} {} [{} {}]\n", st.bold(fmt::format("{}:{}:{}", d.path, d.start.line, col)),
                       sev_styled, d.message, d.rule_id, rule ? rule->name : "");
    if (!options.quiet) {
      out += snippet(d, st);
      if (!d.help.empty()) out += fmt::format("      = {} {}\n", st.cyan("help:"), d.help);
      out += "\n";
    }
    files.insert(d.path);
    ++per_rule[d.rule_id];
  }
  if (options.statistics && !per_rule.empty()) {
    for (const auto& [id, n] : per_rule) {
      const RuleInfo* rule = catalogue.find(id);
      out += fmt::format("{:>5}  {}  {}\n", n, id, rule ? rule->name : "");
    }
    if (!options.quiet) out += "\n";
  }
  if (options.quiet) return out;
  std::string tail = fmt::format("({} analyzed in {:.2f} s)", plural(result.files_analyzed, "file"), result.seconds);
  if (result.diagnostics.empty()) {
    out += fmt::format("No problems found {}\n", tail);
  } else {
    out += fmt::format("Found {} in {} {}\n", plural(result.diagnostics.size(), "problem"),
                       plural(files.size(), "file"), tail);
  }
  return out;
}

std::string render(Format format, const RunResult& result, const Options& options) {
  switch (format) {
    case Format::Text: return render_text(result, options);
    case Format::Json: return render_json(result, options);
    case Format::Sarif: return render_sarif(result, options);
    case Format::Github: return render_github(result, options);
  }
  return {};
}

}  // namespace torchleak::report
