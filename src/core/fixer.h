// Applying the fixes that diagnostics carry: non-overlapping edits per file,
// re-parsed before anything is written, written atomically, repeated until
// nothing changes (so a second run changes nothing).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/diagnostic.h"
#include "core/engine.h"

namespace torchleak {

struct FixOptions {
  bool unsafe = false;  // also apply fixes marked unsafe
  bool write = true;    // false: compute the fixed text only (--diff)
  int max_passes = 4;
};

struct FixedFile {
  std::string path;
  std::string original;
  std::string fixed;
  int fixes_applied = 0;
  std::map<std::string, int> rules_fixed;  // fixes applied per rule
};

struct FixReport {
  std::vector<FixedFile> files;  // files whose text changed
  std::vector<FileError> dropped;  // fixes not applied, and why
  std::vector<FileError> write_errors;
  int fixes_applied = 0;
  RunResult first;      // the findings before any fix (the first pass)
  RunResult remaining;  // the findings left after fixing
  // The last pass found nothing more to fix in the fixed text: fixing it
  // again changes nothing. False when max_passes ran out first.
  bool converged = false;
};

// Applies `edits` (byte ranges of `text`, possibly overlapping; an overlapping
// later edit is skipped). Returns the new text and how many were applied.
std::string apply_edits(const std::string& text, std::vector<Edit> edits, int* applied);

// Runs the analysis, applies fixes, runs again, until a pass fixes nothing.
FixReport fix(const RunOptions& options, const FixOptions& fix_options);

struct NoqaReport {
  std::vector<FixedFile> files;    // files given directives (fixes_applied: how many lines)
  std::vector<FileError> skipped;  // findings given none, and why
  std::vector<FileError> write_errors;
  RunResult result;                // the findings directives were added for
};

// The edit that silences `rule_ids` on the line of `program` holding byte
// `at`: `  # noqa: A, B` (Python and notebooks' programs), extending a
// `# noqa: ...` list that ends the line, or `  // NOLINT(torchleak-<name>)`
// in C++ (the check names clang-tidy's module registers, so clang-tidy
// honours it too). Trailing blanks are replaced. Nullopt, with the reason in
// `why_not`, for a line continued with a backslash. --add-noqa and the
// language server's "Suppress" action both write it.
std::optional<Edit> suppression_edit(std::string_view program, size_t at, const std::set<std::string>& rule_ids,
                                     bool cpp, std::string* why_not = nullptr);

// --add-noqa: adds a suppression naming the rule to the line of every finding
// (`# noqa: TL001` in Python and notebooks, `// NOLINT(torchleak-accumulate-undetached)`
// in C++), extending a `# noqa: ...` list that ends the line; the text re-parsed
// before it is written, atomically when `write`. A second run finds nothing
// to add.
NoqaReport add_noqa(const RunOptions& options, bool write = true);

// A unified diff of two texts, labelled a/PATH and b/PATH.
std::string unified_diff(const std::string& path, const std::string& before, const std::string& after);

// Writes through a temporary file in the same directory and a rename,
// keeping the file's permission bits. Returns "" or the error.
std::string write_file_atomically(const std::string& path, const std::string& text);

}  // namespace torchleak
