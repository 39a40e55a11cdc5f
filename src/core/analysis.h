// What a language frontend returns for one file, and the registry of
// frontends the engine dispatches to. The engine knows nothing of rules or
// of any language: it reads files, hands them to the frontend that claims
// them, merges facts into the project index and resolves deferred findings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "core/project_index.h"

namespace torchleak {

struct SourceFile {
  std::string path;  // as it will be reported
  std::string text;  // the bytes of the file (an unsaved buffer in the editor)
};

// A comment that may hold a suppression directive, as the frontend saw it
// (build it with comment_at in core/suppression.h). Plain data.
struct Comment {
  std::string text;         // with its marker: "# noqa: TL001", "// NOLINT(...)"
  std::string line_text;    // the line it starts on, without its terminator
  uint32_t line = 1;        // 1-based line of its first byte
  uint32_t column = 0;      // byte column of its first byte
  uint32_t start_byte = 0;  // [start_byte, end_byte): the comment in the file
  uint32_t end_byte = 0;
  // What deleting the comment removes: a comment alone on its line with the
  // whole line, a trailing comment with the blanks before it.
  uint32_t remove_start = 0;
  uint32_t remove_end = 0;
};

// A finding that depends on facts from other files. `resolve` runs after the
// first phase; it may complete the message and returns false to drop it.
struct DeferredDiagnostic {
  Diagnostic diagnostic;
  std::function<bool(const ProjectIndex&, Diagnostic&)> resolve;
};

struct FileResult {
  std::string path;
  std::vector<Diagnostic> diagnostics;
  std::vector<DeferredDiagnostic> deferred;
  std::vector<Fact> facts;
  std::optional<std::string> error;  // the file could not be analyzed: why
  std::vector<std::string> notes;    // analyzed, but with a caveat (syntax errors)
  // Suppressions: the comments that may hold directives, the line of the first
  // statement (a skip-file directive counts above it; 0: no statement), and
  // the rules the frontend ran (only their suppressions can be judged unused).
  std::vector<Comment> comments;
  uint32_t first_statement_line = 0;
  std::vector<std::string> rules_run;
};

class LanguageFrontend {
 public:
  virtual ~LanguageFrontend() = default;
  virtual std::string_view language() const = 0;
  virtual bool handles(std::string_view path) const = 0;
  // Analyzes one file with the rules `config` enables.
  virtual void analyze(const SourceFile& file, const Config& config, FileResult& out) const = 0;
  // Whether `text` parses without syntax errors (fixes are checked with it).
  virtual bool parses(std::string_view text) const = 0;
};

// Frontends register themselves at static-initialisation time.
void register_frontend(std::unique_ptr<LanguageFrontend> frontend);
const std::vector<std::unique_ptr<LanguageFrontend>>& frontends();
// The frontend of a file; a notebook's (.ipynb) is the Python frontend, which
// the engine hands the notebook's program (core/notebook.h).
const LanguageFrontend* frontend_for(std::string_view path);
// Whether a path names a C++ source or header by its extension (.cpp, .cc,
// .cxx, .c++, .h, .hpp, .hh, .hxx): the C++ frontend's files, also known to a
// build without it, which then says so.
bool is_cpp_source_path(std::string_view path);

}  // namespace torchleak
