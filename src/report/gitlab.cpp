// GitLab's code quality report (the Code Climate subset GitLab reads): a JSON
// array with one issue per finding, shown in merge requests. Files that could
// not be analyzed are not issues: they stay on stderr, and in the exit code.
#include <fmt/format.h>
#include <xxhash.h>

#include <map>
#include <nlohmann/json.hpp>

#include "report/report.h"

namespace torchleak::report {

namespace {

// GitLab's severities: info, minor, major, critical, blocker.
const char* severity_of(Severity s) {
  switch (s) {
    case Severity::Error: return "critical";
    case Severity::Warning: return "major";
    case Severity::Note: return "info";
  }
  return "major";
}

}  // namespace

std::string render_gitlab(const RunResult& result, const Options& options) {
  const Catalogue& catalogue = Catalogue::builtin();
  nlohmann::ordered_json issues = nlohmann::ordered_json::array();
  std::map<std::string, int> occurrences;  // identical findings are numbered in order
  for (const auto& d : result.diagnostics) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    std::string path = repository_path(d.path, options.srcroot);
    std::string basis = fingerprint_basis(d, path);
    int nth = ++occurrences[basis];
    FileRange r = file_range(d);
    nlohmann::ordered_json issue = {
        {"type", "issue"},
        {"check_name", d.rule_id + (rule ? " " + rule->name : "")},
        {"description", d.notebook.cell ? cell_label(d) + ": " + d.message : d.message},
        {"categories", {"Performance"}},
        {"severity", severity_of(rule ? rule->severity : Severity::Warning)},
        {"fingerprint", fmt::format("{:016x}{:08x}", XXH3_64bits(basis.data(), basis.size()), nth)},
        {"location",
         {{"path", path},
          {"positions",
           {{"begin", {{"line", r.start.line}, {"column", codepoint_column(r.start_line, r.start.column) + 1}}},
            {"end", {{"line", r.end.line}, {"column", codepoint_column(r.end_line, r.end.column) + 1}}}}}}},
    };
    issues.push_back(std::move(issue));
  }
  return issues.dump(2) + "\n";
}

}  // namespace torchleak::report
