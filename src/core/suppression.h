// Suppression comments: the directives a user writes to silence a finding.
//
//   Python (flake8 and ruff's convention, and torchleak's own):
//     x += loss  # noqa: TL001            this line, these rules
//     x += loss  # noqa                   this line, every rule
//     x += loss  # torchleak: ignore[TL001, accumulate-undetached]
//     x += loss  # torchleak: ignore      this line, every torchleak rule
//     # torchleak: skip-file              above the first statement: the whole file
//   C++ (clang-tidy's convention, checks named torchleak-<name>):
//     total += loss;  // NOLINT(torchleak-accumulate-undetached)
//     // NOLINTNEXTLINE(torchleak-*)
//     // NOLINTBEGIN(torchleak-accumulate-undetached) ... // NOLINTEND(torchleak-accumulate-undetached)
//
// Frontends report the comments they see (FileResult::comments) as plain
// data; this module parses them and the engine applies them once deferred
// findings are resolved. A directive that cannot be parsed is ignored with a
// note, never an error: a typo in a comment must not stop a run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis.h"
#include "core/catalogue.h"
#include "core/diagnostic.h"

namespace torchleak {

enum class DirectiveKind : uint8_t {
  Noqa,            // # noqa, # noqa: TL001, E501
  Ignore,          // # torchleak: ignore, # torchleak: ignore[TL001, name]
  SkipFile,        // # torchleak: skip-file
  FileNoqa,        // # torchleak: noqa, # torchleak: noqa: TL001 (the whole file, as ruff's `# ruff: noqa`)
  Nolint,          // NOLINT, NOLINT(torchleak-name, ...)
  NolintNextLine,  // NOLINTNEXTLINE(...)
  NolintBegin,     // NOLINTBEGIN(...)
  NolintEnd,       // NOLINTEND(...)
};

// How the directive is written in messages: "noqa", "torchleak: ignore", "NOLINTNEXTLINE".
std::string_view directive_name(DirectiveKind kind);

struct DirectiveCode {
  std::string text;  // as written: "TL001", "accumulate-undetached", "torchleak-*", "E501"
  uint32_t start = 0;  // byte offsets in the comment's text
  uint32_t end = 0;
};

struct Directive {
  DirectiveKind kind = DirectiveKind::Noqa;
  uint32_t start = 0;  // byte offsets in the comment's text: "# noqa: TL001", "NOLINT(...)"
  uint32_t end = 0;
  uint32_t line_offset = 0;  // lines between the comment's first line and the directive's
  std::vector<DirectiveCode> codes;  // empty: every rule
};

struct ParsedComment {
  std::vector<Directive> directives;
  // Directives that could not be parsed, and were ignored: "invalid `# noqa`
  // directive: expected a comma-separated list of codes (e.g. `# noqa: TL001, TL006`)".
  std::vector<std::string> problems;
};

// Whether a comment may hold a directive: a cheap filter for frontends, which
// report only these comments (a large file has thousands of comments).
bool may_hold_directive(std::string_view comment_text);

// The Comment for bytes [start, end) of `file_text`, which start at `line`
// (1-based) and byte `column`: its text, its line, and what deleting it removes.
Comment comment_at(std::string_view file_text, uint32_t start, uint32_t end, uint32_t line, uint32_t column);

// Parses the directives of one comment (its text with the comment marker:
// "# noqa: TL001", "// NOLINT(torchleak-*)").
ParsedComment parse_comment(std::string_view comment_text);

// Whether a code of a directive names `rule`: for noqa, the rule's code; for
// torchleak: ignore, its code or name; for NOLINT, a glob over
// torchleak-<name> (also torchleak-<code>).
bool code_names_rule(DirectiveKind kind, std::string_view code, const RuleInfo& rule);

// Whether a code belongs to torchleak rather than to another tool sharing the
// comment (E501 in `# noqa: E501, TL001`, bugprone-* in a NOLINT). Only
// torchleak's codes are checked against the catalogue and reported unused.
bool code_is_torchleaks(DirectiveKind kind, std::string_view code);

// The suppressions of one file, built from its comments, applied to its
// findings. Not thread-safe: one per file.
class FileSuppressions {
 public:
  // `first_statement_line`: a skip-file directive counts only on a line above
  // it (0: the file has no statement, so anywhere).
  FileSuppressions(std::vector<Comment> comments, uint32_t first_statement_line, const Catalogue& catalogue);
  FileSuppressions(const FileSuppressions&) = delete;
  FileSuppressions& operator=(const FileSuppressions&) = delete;

  // A `torchleak: skip-file` directive in the file's header.
  bool skip_file() const { return skip_file_; }

  // Whether a directive silences `d` (a finding of `rule`); every directive
  // that does is marked used. A finding of an engine rule (TL100) is silenced
  // only by a directive that names it.
  bool suppresses(const Diagnostic& d, const RuleInfo& rule);

  // Findings of `unused_rule` (TL100) for each torchleak directive, or each
  // torchleak code of a directive, that silenced nothing. Only codes of rules
  // for which `judged(rule)` holds (the rule ran on this file) are reported: a
  // suppression for a disabled rule may be needed when it is enabled. A bare
  // `# noqa` or `NOLINT` is shared with other tools and never reported.
  std::vector<Diagnostic> unused(const RuleInfo& unused_rule, const std::string& path,
                                 const std::function<bool(const RuleInfo&)>& judged) const;

  // Directives that were ignored, one sentence each, with their line:
  // "line 3: invalid `# noqa` directive: ...; ignored".
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Entry {
    Directive directive;
    size_t comment = 0;           // index in comments_
    uint32_t line = 0;            // the line the directive is written on
    uint32_t first_line = 0;      // the lines it covers; first_line 0: none
    uint32_t last_line = 0;
    int partner = -1;             // a NOLINTBEGIN's NOLINTEND (index in entries_)
    std::vector<bool> code_used;  // per code
    bool used = false;            // a bare directive
  };
  Diagnostic unused_diagnostic(const RuleInfo& unused_rule, const std::string& path, const Entry& e,
                               const std::vector<size_t>& unused_codes) const;

  const Catalogue& catalogue_;
  std::vector<Comment> comments_;
  std::vector<Entry> entries_;
  std::vector<std::string> notes_;
  bool skip_file_ = false;
};

}  // namespace torchleak
