// The baseline: findings a codebase already had when it adopted torchleak.
// `--write-baseline FILE` records the current findings; `--baseline FILE`
// reports only the findings not in it.
//
// A finding is identified by its rule, its file (relative to the baseline's
// directory), its enclosing function and a fingerprint of its statement's
// normalised text, never by its line: adding or removing unrelated lines
// above it keeps its identity. Each entry has a count, and matching consumes
// it, so a second identical finding in the same function is new.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/diagnostic.h"

namespace torchleak {

class BaselineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BaselineEntry {
  std::string rule;         // "TL001"
  std::string path;         // relative to the baseline file's directory, with '/'
  std::string context;      // the enclosing function: "Trainer.fit", "<module>"
  std::string fingerprint;  // 16 hex digits: XXH3 of the statement's text without whitespace
  uint32_t count = 1;
  friend bool operator==(const BaselineEntry&, const BaselineEntry&) = default;
};

// The fingerprint of a finding's statement (Diagnostic::snippet, or its first
// line when the frontend gave none), whitespace left out.
std::string finding_fingerprint(const Diagnostic& d);

class Baseline {
 public:
  // The findings of a run, recorded for a baseline file at `baseline_path`.
  static Baseline record(const std::vector<Diagnostic>& diagnostics, const std::string& baseline_path);
  // Reads a baseline file. Throws BaselineError naming the file.
  static Baseline load(const std::string& baseline_path);
  // Parses a baseline's text; `display_path` names it in errors.
  static Baseline parse(const std::string& text, const std::string& display_path, const std::string& baseline_path);

  // The file's text: JSON, entries sorted, one per line, newline-terminated.
  std::string serialize() const;

  // Removes from `diagnostics` the findings the baseline records, consuming
  // counts. Returns how many recorded findings were not seen (fixed since).
  size_t filter(std::vector<Diagnostic>& diagnostics) const;

  const std::vector<BaselineEntry>& entries() const { return entries_; }
  size_t findings() const;  // the sum of the counts

 private:
  std::string directory_;  // absolute: paths are relative to it
  std::vector<BaselineEntry> entries_;
};

}  // namespace torchleak
