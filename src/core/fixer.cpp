#include "core/fixer.h"

#include <fmt/format.h>

#include <dtl/dtl.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "core/analysis.h"
#include "core/notebook.h"

namespace torchleak {

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

bool read_all(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = std::move(ss).str();
  return true;
}

// Replacement text in the file's own line ending.
std::string with_line_endings(const std::string& text, bool crlf) {
  if (!crlf) return text;
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' && (i == 0 || text[i - 1] != '\r')) out += '\r';
    out += text[i];
  }
  return out;
}

// The text of `path` as the run saw it: a buffer's, else the file's. False
// when it cannot be read.
bool current_text(const RunOptions& options, const std::string& path, std::string& out) {
  if (auto ov = options.overlays.find(path); ov != options.overlays.end()) {
    out = ov->second;  // a buffer (the standard input's)
    return true;
  }
  return read_all(path, out);
}

// A notebook's cells, when `path` is one: its fixes and directives are edits
// of its program, written back into its cells. False for a notebook that
// cannot be read (the run reported it).
bool notebook_of(const std::string& path, const std::string& text, std::optional<Notebook>& out) {
  if (!is_notebook_path(path)) return true;
  std::string error, language;
  out = read_notebook(text, error, language);
  return out.has_value();
}

}  // namespace

std::string apply_edits(const std::string& text, std::vector<Edit> edits, int* applied) {
  std::stable_sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) {
    return a.start_byte != b.start_byte ? a.start_byte < b.start_byte : a.end_byte < b.end_byte;
  });
  std::string out;
  size_t pos = 0;
  int n = 0;
  for (const auto& e : edits) {
    if (e.start_byte < pos || e.end_byte < e.start_byte || e.end_byte > text.size()) continue;
    out.append(text, pos, e.start_byte - pos);
    out += e.replacement;
    pos = e.end_byte;
    ++n;
  }
  out.append(text, pos, std::string::npos);
  if (applied) *applied = n;
  return out;
}

std::string write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  struct stat st {};
  bool have_mode = ::stat(path.c_str(), &st) == 0;
  fs::path target(path);
  fs::path tmp = target.parent_path() / ("." + target.filename().string() + ".torchleak-" + std::to_string(::getpid()));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::string("cannot create a temporary file: ") + std::strerror(errno);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return "write failed: " + err;
    }
    off += static_cast<size_t>(w);
  }
  if (have_mode) ::fchmod(fd, st.st_mode & 07777);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return std::string("write failed: ") + std::strerror(errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return "rename failed: " + err;
  }
  return {};
}

FixReport fix(const RunOptions& options, const FixOptions& fix_options) {
  FixReport report;
  std::map<std::string, FixedFile> files;  // by path, the text as fixed so far
  RunOptions opts = options;
  std::set<std::pair<std::string, std::string>> dropped_seen;
  for (int pass = 0; pass < fix_options.max_passes; ++pass) {
    for (const auto& [path, f] : files) opts.overlays[path] = f.fixed;
    RunResult result = run(opts);
    std::map<std::string, std::vector<const Diagnostic*>> by_file;
    for (const auto& d : result.diagnostics) {
      if (!d.fix || d.fix->edits.empty()) continue;
      if (d.fix->safety == FixSafety::Unsafe && !fix_options.unsafe) continue;
      by_file[d.path].push_back(&d);
    }
    int applied_this_pass = 0;
    for (const auto& [path, diags] : by_file) {
      auto it = files.find(path);
      std::string current;
      if (it != files.end()) {
        current = it->second.fixed;
      } else if (!current_text(options, path, current)) {
        continue;
      }
      std::optional<Notebook> notebook;
      if (!notebook_of(path, current, notebook)) continue;
      const std::string& program = notebook ? notebook->program : current;
      bool crlf = program.find("\r\n") != std::string::npos;
      // Whole fixes only: a fix whose edits overlap an earlier fix waits for the next pass.
      std::vector<Edit> edits;
      std::vector<std::pair<uint32_t, uint32_t>> taken;
      int fixes = 0;
      std::map<std::string, int> by_rule;
      for (const Diagnostic* d : diags) {
        bool overlaps = false;
        for (const auto& e : d->fix->edits)
          for (const auto& [s, t] : taken)
            if (e.start_byte < t && s < e.end_byte + (e.start_byte == e.end_byte ? 1 : 0)) overlaps = true;
        if (overlaps) continue;
        for (auto e : d->fix->edits) {
          taken.emplace_back(e.start_byte, e.end_byte);
          e.replacement = with_line_endings(e.replacement, crlf);
          edits.push_back(std::move(e));
        }
        ++fixes;
        ++by_rule[d->rule_id];
      }
      int applied = 0;
      std::string next = apply_edits(program, edits, &applied);
      const LanguageFrontend* frontend = frontend_for(path);
      if (frontend && !frontend->parses(next)) {
        if (dropped_seen.insert({path, "syntax"}).second)
          report.dropped.push_back({path, "a fix would have broken the syntax; no fix applied to this file"});
        continue;
      }
      if (notebook) {
        std::string error;
        next = apply_to_notebook(*notebook, current, edits, error);
        if (!error.empty()) {
          if (dropped_seen.insert({path, "cells"}).second)
            report.dropped.push_back({path, error + "; no fix applied to this notebook"});
          continue;
        }
      }
      if (next == current) continue;
      if (it == files.end()) it = files.emplace(path, FixedFile{path, current, current, 0, {}}).first;
      it->second.fixed = std::move(next);
      it->second.fixes_applied += fixes;
      for (const auto& [rule, n] : by_rule) it->second.rules_fixed[rule] += n;
      applied_this_pass += fixes;
    }
    report.fixes_applied += applied_this_pass;
    if (pass == 0) report.first = result;
    if (applied_this_pass == 0) {
      report.converged = true;
      report.remaining = std::move(result);
      break;
    }
    if (pass + 1 == fix_options.max_passes) {
      for (const auto& [path, f] : files) opts.overlays[path] = f.fixed;
      report.remaining = run(opts);
    }
  }
  for (auto& [path, f] : files) {
    if (f.fixed == f.original) continue;
    if (fix_options.write) {
      std::string err = write_file_atomically(path, f.fixed);
      if (!err.empty()) {
        report.write_errors.push_back({path, err});
        continue;
      }
    }
    report.files.push_back(std::move(f));
  }
  return report;
}

std::optional<Edit> suppression_edit(std::string_view program, size_t at, const std::set<std::string>& rule_ids,
                                     bool cpp, std::string* why_not) {
  // The line, without its terminator and trailing blanks.
  std::string_view whole = line_containing(program, at);
  size_t begin = static_cast<size_t>(whole.data() - program.data());
  size_t end = begin + whole.size();
  size_t text_end = end;
  while (text_end > begin && (program[text_end - 1] == ' ' || program[text_end - 1] == '\t')) --text_end;
  std::string_view text(program.data() + begin, text_end - begin);
  if (!text.empty() && text.back() == '\\') {
    if (why_not) *why_not = "continued with a backslash";
    return std::nullopt;
  }
  // C++: the names clang-tidy's module registers, which clang-tidy honours too.
  std::string list;
  for (const auto& id : rule_ids) {
    const RuleInfo* rule = cpp ? Catalogue::builtin().find(id) : nullptr;
    list += (list.empty() ? "" : cpp ? "," : ", ") + (cpp ? "torchleak-" + (rule ? rule->name : id) : id);
  }
  // A `# noqa: A, B` that ends the line, after every quote: extend it.
  size_t hash = cpp ? std::string_view::npos : text.rfind('#');
  std::string_view tail = hash == std::string_view::npos ? std::string_view() : text.substr(hash);
  size_t last_quote = text.find_last_of("\"'");
  if (!tail.empty() && (last_quote == std::string_view::npos || last_quote < hash)) {
    std::string_view t = tail.substr(1);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    if (t.size() > 5 && (t.substr(0, 5) == "noqa:" || t.substr(0, 5) == "NOQA:")) {
      std::string_view codes_text = t.substr(5);
      if (std::all_of(codes_text.begin(), codes_text.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == ',' || c == ' ';
          }))
        return Edit{static_cast<uint32_t>(text_end), static_cast<uint32_t>(text_end), ", " + list};
    }
  }
  return Edit{static_cast<uint32_t>(text_end), static_cast<uint32_t>(end),
              cpp ? "  // NOLINT(" + list + ")" : "  # noqa: " + list};
}

NoqaReport add_noqa(const RunOptions& options, bool write) {
  NoqaReport report;
  report.result = run(options);
  std::map<std::string, std::map<uint32_t, std::vector<const Diagnostic*>>> by_line;
  for (const auto& d : report.result.diagnostics) by_line[d.path][d.start.line].push_back(&d);
  for (const auto& [path, lines] : by_line) {
    std::string current;
    std::optional<Notebook> notebook;
    if (!current_text(options, path, current) || !notebook_of(path, current, notebook)) continue;
    const std::string& program = notebook ? notebook->program : current;
    bool cpp = is_cpp_source_path(path);
    std::vector<Edit> edits;
    for (const auto& [line, diags] : lines) {
      std::set<std::string> codes;
      for (const Diagnostic* d : diags) codes.insert(d->rule_id);
      std::string why_not;
      std::optional<Edit> e = suppression_edit(program, diags.front()->start_byte, codes, cpp, &why_not);
      if (e) edits.push_back(std::move(*e));
      else report.skipped.push_back({path, fmt::format("line {}: {}; no noqa added", line, why_not)});
    }
    if (edits.empty()) continue;
    std::string next = apply_edits(program, edits, nullptr);
    const LanguageFrontend* frontend = frontend_for(path);
    if (!cpp && frontend && !frontend->parses(next)) {
      report.skipped.push_back({path, "a noqa comment would have broken the syntax; none added to this file"});
      continue;
    }
    if (notebook) {
      std::string error;
      next = apply_to_notebook(*notebook, current, edits, error);
      if (!error.empty()) {
        report.skipped.push_back({path, error + "; no noqa added to this notebook"});
        continue;
      }
    }
    if (write) {
      std::string err = write_file_atomically(path, next);
      if (!err.empty()) {
        report.write_errors.push_back({path, err});
        continue;
      }
    }
    report.files.push_back({path, current, next, static_cast<int>(edits.size()), {}});
  }
  return report;
}

std::string unified_diff(const std::string& path, const std::string& before, const std::string& after) {
  std::vector<std::string> a = split_lines(before), b = split_lines(after);
  dtl::Diff<std::string> diff(a, b);
  diff.compose();
  diff.composeUnifiedHunks();
  std::ostringstream out;
  out << "--- a/" << path << "\n+++ b/" << path << "\n";
  diff.printUnifiedFormat(out);
  return out.str();
}

}  // namespace torchleak
