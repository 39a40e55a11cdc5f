// Diagnostics are plain data: what a check found, where, and how to fix it.
// Reporters and the language server render them; they know nothing of rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/vocabulary.h"

namespace torchleak {

// A position in a source file. `line` is 1-based; `column` is the 0-based
// byte offset within the line (what tree-sitter and Clang give). Reporters
// convert it to the column unit their consumer expects.
struct Position {
  uint32_t line = 1;
  uint32_t column = 0;
  friend bool operator==(const Position&, const Position&) = default;
  friend auto operator<=>(const Position&, const Position&) = default;
};

// Replace bytes [start_byte, end_byte) of the file with `replacement`.
struct Edit {
  uint32_t start_byte = 0;
  uint32_t end_byte = 0;
  std::string replacement;
  friend bool operator==(const Edit&, const Edit&) = default;
};

struct Fix {
  std::string title;  // "Replace `loss` with `loss.item()`"
  FixSafety safety = FixSafety::Safe;
  std::vector<Edit> edits;
};

enum class Severity { Error, Warning, Note };

// Where a finding in a notebook is (core/notebook.h): `start` and `end` of a
// diagnostic are positions in the program its code cells make; this is the
// cell and the positions in the cell's source, and in the notebook file's own
// text (its JSON, what code scanning shows), with those lines' text.
struct CellLocation {
  uint32_t cell = 0;  // 1-based among all the notebook's cells; 0: not a notebook
  Position start, end;
  Position file_start, file_end;
  std::string file_start_line, file_end_line;
  std::vector<Edit> edits;  // the fix's edits as edits of the cell's source
};

struct Diagnostic {
  std::string rule_id;   // "TL001"
  std::string path;      // as discovered (relative to the working directory when given so)
  Position start;
  Position end;
  uint32_t start_byte = 0;  // byte offsets in the file, for fixes and fingerprints
  uint32_t end_byte = 0;
  std::string message;
  std::string help;         // a one-line hint of the fix, specific to this finding
  std::string source_line;  // the text of line `start.line`, without its terminator
  std::string end_source_line;  // the text of line `end.line` when it is another line (the engine fills it)
  std::string context;      // enclosing function or class, for fingerprints ("Trainer.fit")
  // The flagged statement's tokens joined by single spaces, comments left out:
  // what a baseline fingerprints, so that reformatting and moving keep identity.
  std::string snippet;
  std::optional<Fix> fix;
  CellLocation notebook;  // in a notebook: its cell (the engine fills it)
};

// Sort key: path, then position, then rule.
bool diagnostic_less(const Diagnostic& a, const Diagnostic& b);

}  // namespace torchleak
