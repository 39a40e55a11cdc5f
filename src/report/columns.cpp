// Columns, paths and counts shared by the reporters.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "report/report.h"

namespace torchleak::report {

namespace {
template <typename Count>
uint32_t count_until(std::string_view line, uint32_t byte_column, Count units_of_lead) {
  uint32_t end = std::min<uint32_t>(byte_column, static_cast<uint32_t>(line.size()));
  uint32_t units = 0;
  for (uint32_t i = 0; i < end; ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if ((c & 0xC0) != 0x80) units += units_of_lead(c);  // count lead bytes only
  }
  return units + (byte_column > end ? byte_column - end : 0);
}

// The directory part resolved through symbolic links, the name kept: a file
// reached through a link is named where the user sees it.
std::filesystem::path resolved(const std::filesystem::path& p) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec).lexically_normal();
  if (ec) return p;
  fs::path parent = fs::weakly_canonical(abs.parent_path(), ec);
  return ec ? abs : parent / abs.filename();
}
}  // namespace

uint32_t utf16_column(std::string_view line, uint32_t byte_column) {
  // A 4-byte sequence (lead byte 11110xxx) is a surrogate pair in UTF-16.
  return count_until(line, byte_column, [](unsigned char c) { return (c >> 3) == 0x1E ? 2u : 1u; });
}

uint32_t codepoint_column(std::string_view line, uint32_t byte_column) {
  return count_until(line, byte_column, [](unsigned char) { return 1u; });
}

std::string_view end_line_text(const Diagnostic& d) {
  return d.end.line == d.start.line ? std::string_view(d.source_line) : std::string_view(d.end_source_line);
}

FileRange file_range(const Diagnostic& d) {
  if (d.notebook.cell)
    return {d.notebook.file_start, d.notebook.file_end, d.notebook.file_start_line,
            d.notebook.file_start.line == d.notebook.file_end.line ? std::string_view(d.notebook.file_start_line)
                                                                   : std::string_view(d.notebook.file_end_line)};
  return {d.start, d.end, d.source_line, end_line_text(d)};
}

std::string cell_label(const Diagnostic& d) {
  if (!d.notebook.cell) return {};
  return fmt::format("cell {}, line {}", d.notebook.cell, d.notebook.start.line);
}

std::string repository_path(const std::string& path, const std::string& srcroot) {
  namespace fs = std::filesystem;
  std::string given = fs::path(path).lexically_normal().generic_string();
  if (given.rfind("./", 0) == 0) given.erase(0, 2);
  if (srcroot.empty()) return given;
  std::error_code ec;
  fs::path root = fs::weakly_canonical(fs::absolute(srcroot, ec), ec);
  if (ec) return given;
  std::string rel = resolved(path).lexically_relative(root).generic_string();
  return rel.empty() || rel == "." ? fs::path(path).filename().generic_string() : rel;
}

std::vector<std::pair<std::string, size_t>> problems_per_rule(const RunResult& result) {
  std::map<std::string, size_t> counts;
  for (const auto& d : result.diagnostics) ++counts[d.rule_id];
  std::vector<std::pair<std::string, size_t>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace torchleak::report
