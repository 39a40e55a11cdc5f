// Reporters render a run's diagnostics. They read the catalogue for rule
// metadata and know nothing of frontends or checks.
#pragma once

#include <string>
#include <string_view>

#include "core/catalogue.h"
#include "core/engine.h"

namespace torchleak::report {

enum class Format { Text, Json, Sarif, Github };

struct Options {
  bool color = false;
  bool statistics = false;  // text: counts per rule
  bool quiet = false;       // text: findings only, no summary
  std::string srcroot;      // absolute directory that %SRCROOT% stands for
};

std::string render(Format format, const RunResult& result, const Options& options);

std::string render_text(const RunResult& result, const Options& options);
std::string render_json(const RunResult& result, const Options& options);
std::string render_sarif(const RunResult& result, const Options& options);
std::string render_github(const RunResult& result, const Options& options);

// Column conversions from a 0-based byte offset within `line`.
uint32_t utf16_column(std::string_view line, uint32_t byte_column);     // 0-based UTF-16 units
uint32_t codepoint_column(std::string_view line, uint32_t byte_column); // 0-based code points

}  // namespace torchleak::report
