// One C++ translation unit through Clang: parse (with a precompiled header
// when given), then run the enabled checks' matchers over the main file's own
// top-level declarations only (the headers' declarations are not walked).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpp/check.h"
#include "cpp/driver.h"

namespace torchleak::cpp {

struct TuRequest {
  std::string path;               // absolute
  std::string text;               // served as the file's contents
  std::string directory;          // the compile command's working directory
  std::vector<std::string> args;  // driver arguments, syntax-only
  std::vector<const RegisteredCheck*> checks;
  Options options;
};

struct TuEdit {
  uint32_t start_byte = 0;
  uint32_t end_byte = 0;
  std::string replacement;
};

struct TuFinding {
  std::string rule_id;
  uint32_t start_byte = 0;
  uint32_t end_byte = 0;
  std::string message;
  std::string help;
  std::string fix_title;
  std::vector<TuEdit> edits;  // empty: no fix
  FixSafety fix_safety = FixSafety::Unsafe;
  std::string context;        // the enclosing function, "Net::forward"
};

struct TuComment {
  uint32_t start_byte = 0;
  uint32_t end_byte = 0;
};

struct TuResult {
  bool parsed = false;                // the compiler ran to the end without errors
  std::vector<CompileError> errors;   // compile errors: no finding is reported then
  std::vector<TuFinding> findings;
  std::vector<TuComment> comments;    // the main file's comments
  uint32_t first_declaration_line = 0;
};

TuResult analyze_translation_unit(const TuRequest& request);

}  // namespace torchleak::cpp
