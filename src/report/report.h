// Reporters render a run's diagnostics. They read the catalogue for rule
// metadata and know nothing of frontends or checks.
#pragma once

#include <string>
#include <string_view>

#include "core/catalogue.h"
#include "core/engine.h"

namespace torchleak::report {

// Text is ruff's `full` (each finding with its source line); the line-per-
// finding formats (concise, grouped, pylint, azure, junit) are in lines.cpp.
enum class Format { Text, Json, Sarif, Github, Gitlab, Concise, Grouped, Pylint, Azure, Junit };

struct Options {
  bool color = false;       // text: ANSI colours
  bool statistics = false;  // text: counts per rule instead of the findings
  bool quiet = false;       // text: the findings only, no closing summary
  std::string srcroot;      // sarif, github, gitlab: the directory paths are made relative to
};

std::string render(Format format, const RunResult& result, const Options& options);

std::string render_text(const RunResult& result, const Options& options);
std::string render_json(const RunResult& result, const Options& options);
std::string render_sarif(const RunResult& result, const Options& options);
// One SARIF log of one run from the reports of a run's shards (each one run
// of torchleak, as render_sarif writes it): results and notifications put
// together, the run successful when every shard's was; with `category`, the
// run's automationDetails.id ("category/"). Throws std::runtime_error naming
// the file that is not such a report.
std::string merge_sarif_runs(const std::vector<std::string>& paths, const std::string& category);
std::string render_github(const RunResult& result, const Options& options);
std::string render_concise(const RunResult& result, const Options& options);
std::string render_grouped(const RunResult& result, const Options& options);
std::string render_pylint(const RunResult& result, const Options& options);
std::string render_azure(const RunResult& result, const Options& options);
std::string render_junit(const RunResult& result, const Options& options);

// The text report's closing summary: "Found 3 problems in 1 file (1 file
// analyzed in 0.01 s); 1 fixable with --fix; 2 more with --fix --unsafe-fixes".
std::string summary_line(const RunResult& result);

// Whether --fix (without --unsafe-fixes) fixes the finding.
bool fixable(const Diagnostic& d);
std::string render_gitlab(const RunResult& result, const Options& options);

// What a finding is, not where it is: the rule, the repository path, the
// enclosing function and the line's text without whitespace. SARIF's
// partialFingerprints and GitLab's fingerprint hash it (with the number of
// the occurrence, for identical findings in one function).
std::string fingerprint_basis(const Diagnostic& d, const std::string& path);

// Column conversions from a 0-based byte offset within `line`.
uint32_t utf16_column(std::string_view line, uint32_t byte_column);     // 0-based UTF-16 units
uint32_t codepoint_column(std::string_view line, uint32_t byte_column); // 0-based code points

// The text of the line a diagnostic ends on (its own line or `end_source_line`).
std::string_view end_line_text(const Diagnostic& d);

// Where a finding is in the file's own text: its positions and their lines'
// text. A notebook's findings are in its JSON (where code scanning and pull
// request annotations show them), other files' where the diagnostic says.
struct FileRange {
  Position start, end;
  std::string_view start_line, end_line;
};
FileRange file_range(const Diagnostic& d);

// "cell 3, line 12" for a finding in a notebook, else "".
std::string cell_label(const Diagnostic& d);

// `path` relative to `srcroot`, with '/' separators and no "./": what SARIF
// and GitHub annotations name a file by. Never absolute: a file outside
// `srcroot` is named with "../" segments. An empty `srcroot` keeps `path`
// as given, normalised.
std::string repository_path(const std::string& path, const std::string& srcroot);

// Problems per rule: (rule id, count), most frequent first, then by id.
std::vector<std::pair<std::string, size_t>> problems_per_rule(const RunResult& result);

}  // namespace torchleak::report
