#include "core/notebook.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/fixer.h"

namespace torchleak {

namespace {

using Json = nlohmann::json;

// An iterator over the notebook's bytes that tells how far nlohmann's lexer
// has read: when a string value is reported, just past its closing quote;
// when an array starts or ends, just past the bracket. That is how the
// positions of the cells' sources in the text are known while the library
// does all the parsing.
struct CountingIterator {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p = nullptr;
  const char** read = nullptr;
  reference operator*() const { return *p; }
  CountingIterator& operator++() {
    ++p;
    *read = p;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator t = *this;
    ++*this;
    return t;
  }
  friend bool operator!=(const CountingIterator& a, const CountingIterator& b) { return a.p != b.p; }
};

// The opening quote of the string literal whose closing quote is at end - 1:
// inside a literal every quote is escaped (an odd run of backslashes before
// it), the opening one is not.
size_t literal_begin(std::string_view raw, size_t end) {
  size_t i = end - 1;
  while (i > 0) {
    --i;
    if (raw[i] != '"') continue;
    size_t run = 0;
    for (size_t k = i; k > 0 && raw[k - 1] == '\\'; --k) ++run;
    if (run % 2 == 0) return i;
  }
  return 0;
}

struct RawCell {
  std::string type;
  bool has_source = false;
  bool list = false;
  bool bad_source = false;  // a source that is neither a string nor a list of strings
  size_t raw_begin = 0, raw_end = 0;
  std::vector<std::pair<size_t, size_t>> literals;
  std::vector<std::string> texts;
};

// The parts of nbformat 4 the analysis needs, from one pass of the parser.
struct Reader : nlohmann::json_sax<Json> {
  std::string_view raw;
  const char** read;
  struct Frame {
    bool array;
    std::string key;
  };
  std::vector<Frame> stack;
  std::vector<RawCell> cells;
  bool cells_seen = false, cells_not_list = false;
  std::optional<int64_t> nbformat;
  std::string language, kernel_language;
  std::string error;

  size_t at() const { return static_cast<size_t>(*read - raw.data()); }
  bool at_path(std::initializer_list<const char*> keys) const {
    if (stack.size() != keys.size()) return false;
    size_t i = 0;
    for (const char* k : keys) {
      const Frame& f = stack[i++];
      if (*k == '[' ? !f.array : (f.array || f.key != k)) return false;
    }
    return true;
  }
  bool in_cell() const {
    return stack.size() == 3 && !stack[0].array && stack[0].key == "cells" && stack[1].array && !stack[2].array;
  }
  bool is_source() const { return in_cell() && stack[2].key == "source"; }
  bool is_source_element() const {
    return stack.size() == 4 && stack[0].key == "cells" && stack[1].array && stack[2].key == "source" &&
           stack[3].array;
  }
  // A value other than a string where a source is expected.
  void other_value() {
    if (is_source() && !cells.empty()) cells.back().bad_source = true;
    if (is_source_element() && !cells.empty()) cells.back().bad_source = true;
  }
  bool null() override { return other_value(), true; }
  bool boolean(bool) override { return other_value(), true; }
  bool number_integer(number_integer_t v) override {
    if (at_path({"nbformat"})) nbformat = v;
    return other_value(), true;
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (at_path({"nbformat"})) nbformat = static_cast<int64_t>(v);
    return other_value(), true;
  }
  bool number_float(number_float_t, const string_t&) override { return other_value(), true; }
  bool binary(binary_t&) override { return other_value(), true; }
  bool string(string_t& s) override {
    if (is_source() && !cells.empty()) {
      RawCell& c = cells.back();
      c.has_source = true;
      c.raw_end = at();
      c.raw_begin = literal_begin(raw, c.raw_end);
      c.literals.emplace_back(c.raw_begin, c.raw_end);
      c.texts.push_back(s);
    } else if (is_source_element() && !cells.empty()) {
      size_t end = at();
      cells.back().literals.emplace_back(literal_begin(raw, end), end);
      cells.back().texts.push_back(s);
    } else if (in_cell() && stack[2].key == "cell_type" && !cells.empty()) {
      cells.back().type = s;
    } else if (at_path({"metadata", "language_info", "name"})) {
      language = s;
    } else if (at_path({"metadata", "kernelspec", "language"})) {
      kernel_language = s;
    }
    return true;
  }
  bool start_object(std::size_t) override {
    if (at_path({"cells", "["})) cells.emplace_back();
    other_value();
    stack.push_back({false, {}});
    return true;
  }
  bool key(string_t& k) override {
    stack.back().key = k;
    return true;
  }
  bool end_object() override {
    stack.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (at_path({"cells"})) cells_seen = true;
    if (is_source() && !cells.empty()) {
      RawCell& c = cells.back();
      c.has_source = true;
      c.list = true;
      c.raw_begin = at() - 1;
    } else if (is_source_element() && !cells.empty()) {
      cells.back().bad_source = true;
    }
    stack.push_back({true, {}});
    return true;
  }
  bool end_array() override {
    stack.pop_back();
    if (is_source() && !cells.empty()) cells.back().raw_end = at();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    // Line and column of the byte the parser stopped at.
    size_t pos = std::min(position ? position - 1 : 0, raw.size());
    size_t line = 1 + static_cast<size_t>(std::count(raw.begin(), raw.begin() + static_cast<ptrdiff_t>(pos), '\n'));
    size_t nl = raw.rfind('\n', pos ? pos - 1 : 0);
    size_t col = pos - (nl == std::string_view::npos || nl >= pos ? 0 : nl + 1) + 1;
    std::string what = e.what();
    if (size_t colon = what.rfind(": "); colon != std::string::npos) what = what.substr(colon + 2);
    error = fmt::format("not valid JSON at line {}, column {}: {}", line, col, what);
    return false;
  }
};

std::string_view trim_left(std::string_view s) {
  size_t i = s.find_first_not_of(" \t");
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// IPython's syntax on one line: a line magic (%time x), a shell escape
// (!pip install), help (?x, x?), or a name assigned from one (files = !ls).
bool is_magic_line(std::string_view line) {
  std::string_view s = trim_left(line);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  if (s.empty()) return false;
  if (s[0] == '%' || s[0] == '!' || s[0] == '?') return true;
  if (s.back() == '?') {
    size_t i = 0;
    while (i < s.size() && (word_char(s[i]) || s[i] == '.')) ++i;
    std::string_view rest = s.substr(i);
    if (i > 0 && (rest == "?" || rest == "??")) return true;
  }
  // `name = %magic` / `a, b = !cmd`
  size_t eq = s.find('=');
  if (eq != std::string_view::npos && eq > 0 && eq + 1 < s.size() && s[eq + 1] != '=' &&
      std::string_view("=!<>+-*/%&|^@:").find(s[eq - 1]) == std::string_view::npos) {
    std::string_view target = s.substr(0, eq);
    bool plain = std::all_of(target.begin(), target.end(),
                             [](char c) { return word_char(c) || c == '.' || c == ',' || c == ' ' || c == '\t'; });
    std::string_view value = trim_left(s.substr(eq + 1));
    if (plain && !value.empty() && (value[0] == '%' || value[0] == '!')) return true;
  }
  return false;
}

// Cell magics whose body is Python run as it stands (timed, captured).
bool python_cell_magic(std::string_view first_line) {
  std::string_view s = trim_left(first_line).substr(2);
  size_t end = 0;
  while (end < s.size() && word_char(s[end])) ++end;
  std::string_view name = s.substr(0, end);
  return name == "time" || name == "timeit" || name == "capture" || name == "prun";
}

// Decoded bytes [0, decoded) of the literal starting at raw[begin] (its
// opening quote) span raw[begin + 1, result).
size_t raw_offset(std::string_view raw, size_t begin, size_t decoded) {
  size_t i = begin + 1, n = 0;
  auto hex = [&](size_t at) -> unsigned {
    unsigned v = 0;
    for (size_t k = at; k < at + 4 && k < raw.size(); ++k) {
      char c = raw[k];
      v = v * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                                                      : (std::tolower(c) - 'a' + 10));
    }
    return v;
  };
  while (n < decoded && i < raw.size() && raw[i] != '"') {
    if (raw[i] != '\\') {
      ++n;
      ++i;
      continue;
    }
    if (i + 1 < raw.size() && raw[i + 1] == 'u') {
      unsigned code = hex(i + 2);
      if (code >= 0xD800 && code < 0xDC00 && i + 11 < raw.size() && raw[i + 6] == '\\' && raw[i + 7] == 'u') {
        n += 4;
        i += 12;
      } else {
        n += code < 0x80 ? 1 : code < 0x800 ? 2 : 3;
        i += 6;
      }
    } else {
      ++n;
      i += 2;
    }
  }
  return i;
}

Position raw_position(const Notebook& nb, size_t offset) {
  auto it = std::upper_bound(nb.raw_line_starts.begin(), nb.raw_line_starts.end(), static_cast<uint32_t>(offset));
  size_t line = static_cast<size_t>(it - nb.raw_line_starts.begin());
  return {static_cast<uint32_t>(line), static_cast<uint32_t>(offset - nb.raw_line_starts[line - 1])};
}

std::string_view raw_line(const Notebook& nb, std::string_view raw, uint32_t line) {
  size_t begin = nb.raw_line_starts[line - 1];
  size_t end = line < nb.raw_line_starts.size() ? nb.raw_line_starts[line] - 1 : raw.size();
  std::string_view s = raw.substr(begin, end - begin);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

const NotebookCell* cell_at(const Notebook& nb, uint32_t program_byte) {
  for (const auto& c : nb.cells)
    if (program_byte >= c.program_begin && program_byte < c.program_end) return &c;
  for (auto it = nb.cells.rbegin(); it != nb.cells.rend(); ++it)
    if (program_byte >= it->program_begin) return &*it;
  return nb.cells.empty() ? nullptr : &nb.cells.front();
}

// The program's line starts within one cell, rebuilt from the masked lines.
struct CellLines {
  std::vector<uint32_t> program;  // program byte of each line's start
  std::vector<uint32_t> length;   // bytes of each line in the source, without '\n'
};

CellLines lines_of(const Notebook& nb, const NotebookCell& c) {
  CellLines out;
  uint32_t p = c.program_begin;
  for (size_t k = 0; k < c.line_starts.size(); ++k) {
    out.program.push_back(p);
    size_t end = nb.program.find('\n', p);
    uint32_t program_len = static_cast<uint32_t>((end == std::string::npos ? nb.program.size() : end) - p);
    size_t src_end = k + 1 < c.line_starts.size() ? c.line_starts[k + 1] - 1 : c.source.size();
    if (k + 1 == c.line_starts.size() && !c.source.empty() && c.source.back() == '\n') src_end = c.source.size() - 1;
    out.length.push_back(static_cast<uint32_t>(src_end - c.line_starts[k]));
    p += program_len + 1;
  }
  return out;
}

// A program byte as (line index in the cell, byte column); line index ==
// number of lines at the cell's end.
std::pair<size_t, uint32_t> cell_line_column(const CellLines& lines, uint32_t program_byte) {
  auto it = std::upper_bound(lines.program.begin(), lines.program.end(), program_byte);
  if (it == lines.program.begin()) return {0, 0};
  size_t k = static_cast<size_t>(it - lines.program.begin()) - 1;
  return {k, program_byte - lines.program[k]};
}

uint32_t source_byte(const NotebookCell& c, const CellLines& lines, size_t k, uint32_t column) {
  if (k >= c.line_starts.size()) return static_cast<uint32_t>(c.source.size());
  if (column > lines.length[k]) {
    // The program's newline after a last line that has none in the source.
    uint32_t next = k + 1 < c.line_starts.size() ? c.line_starts[k + 1] : static_cast<uint32_t>(c.source.size());
    return std::min<uint32_t>(c.line_starts[k] + column, next);
  }
  return c.line_starts[k] + column;
}

}  // namespace

bool is_notebook_path(std::string_view path) {
  return path.size() >= 6 && path.substr(path.size() - 6) == ".ipynb";
}

std::optional<Notebook> read_notebook(std::string_view text, std::string& error, std::string& other_language) {
  const char* read = text.data();
  Reader reader;
  reader.raw = text;
  reader.read = &read;
  CountingIterator first{text.data(), &read}, last{text.data() + text.size(), &read};
  bool ok = Json::sax_parse(first, last, &reader, nlohmann::detail::input_format_t::json, true, false);
  if (!ok) {
    error = reader.error.empty() ? "not valid JSON" : reader.error;
    return std::nullopt;
  }
  if (!reader.nbformat) {
    error = "not a Jupyter notebook: no \"nbformat\" number";
    return std::nullopt;
  }
  if (*reader.nbformat != 4) {
    error = fmt::format("nbformat {} is not supported (only 4; `jupyter nbconvert --to notebook` converts it)",
                        *reader.nbformat);
    return std::nullopt;
  }
  if (!reader.cells_seen) {
    error = "not a Jupyter notebook: no \"cells\" list";
    return std::nullopt;
  }
  std::string lang = !reader.language.empty() ? reader.language : reader.kernel_language;
  if (!lang.empty() && lang != "python") {
    other_language = lang;
    return std::nullopt;
  }
  Notebook nb;
  nb.raw_line_starts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') nb.raw_line_starts.push_back(static_cast<uint32_t>(i + 1));
  uint32_t number = 0;
  uint32_t line = 1;
  for (auto& rc : reader.cells) {
    ++number;
    if (rc.type != "code") continue;
    if (!rc.has_source || rc.bad_source) {
      error = fmt::format("cell {}: its \"source\" is not a string or a list of strings", number);
      return std::nullopt;
    }
    NotebookCell c;
    c.number = number;
    c.list = rc.list;
    c.raw_begin = rc.raw_begin;
    c.raw_end = rc.raw_end;
    for (size_t k = 0; k < rc.texts.size(); ++k) {
      c.pieces.push_back({rc.literals[k].first, rc.literals[k].second, static_cast<uint32_t>(c.source.size())});
      c.source += rc.texts[k];
    }
    // Lines, and which of them IPython reads rather than Python.
    for (size_t p = 0; p < c.source.size();) {
      c.line_starts.push_back(static_cast<uint32_t>(p));
      size_t nl = c.source.find('\n', p);
      p = nl == std::string::npos ? c.source.size() : nl + 1;
    }
    auto text_of = [&](size_t k) {
      size_t b = c.line_starts[k];
      size_t e = k + 1 < c.line_starts.size() ? c.line_starts[k + 1] : c.source.size();
      std::string_view s = std::string_view(c.source).substr(b, e - b);
      if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
      return s;
    };
    size_t n = c.line_starts.size();
    c.masked.assign(n, false);
    std::vector<bool> head(n, false);  // a masked line that becomes `pass`
    size_t first_code = 0;
    while (first_code < n && trim_left(text_of(first_code)).empty()) ++first_code;
    bool whole_cell = false;
    if (first_code < n && trim_left(text_of(first_code)).substr(0, 2) == "%%") {
      c.masked[first_code] = true;
      whole_cell = !python_cell_magic(text_of(first_code));
      if (whole_cell) std::fill(c.masked.begin(), c.masked.end(), true);
    }
    if (!whole_cell) {
      for (size_t k = 0; k < n; ++k) {
        if (c.masked[k] || !is_magic_line(text_of(k))) continue;
        c.masked[k] = true;
        head[k] = true;
        // A magic continued with a backslash goes on to the next line.
        for (size_t j = k; j + 1 < n; ++j) {
          std::string_view t = text_of(j);
          while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.remove_suffix(1);
          if (t.empty() || t.back() != '\\') break;
          c.masked[j + 1] = true;
          k = j + 1;
        }
      }
    }
    c.first_line = line;
    c.program_begin = static_cast<uint32_t>(nb.program.size());
    for (size_t k = 0; k < n; ++k) {
      std::string_view t = text_of(k);
      if (!c.masked[k]) {
        nb.program += t;
      } else if (head[k]) {
        nb.program += t.substr(0, t.size() - trim_left(t).size());
        nb.program += "pass";
      }
      nb.program += '\n';
      ++line;
    }
    c.program_end = static_cast<uint32_t>(nb.program.size());
    nb.cells.push_back(std::move(c));
  }
  return nb;
}

NotebookPosition locate(const Notebook& nb, std::string_view raw, uint32_t program_byte) {
  NotebookPosition out;
  const NotebookCell* c = cell_at(nb, program_byte);
  if (!c) return out;
  out.cell = c->number;
  CellLines lines = lines_of(nb, *c);
  auto [k, column] = cell_line_column(lines, program_byte);
  if (k < lines.length.size()) column = std::min(column, lines.length[k]);
  out.in_cell = {static_cast<uint32_t>(k + 1), column};
  uint32_t sb = source_byte(*c, lines, k, column);
  size_t offset = c->raw_begin;
  if (c->list) {
    const NotebookCell::Piece* piece = nullptr;
    for (const auto& p : c->pieces)
      if (p.source_begin <= sb) piece = &p;
    if (piece) offset = raw_offset(raw, piece->raw_begin, sb - piece->source_begin);
  } else if (!c->pieces.empty()) {
    offset = raw_offset(raw, c->pieces.front().raw_begin, sb);
  }
  out.in_file = raw_position(nb, offset);
  out.file_line = std::string(raw_line(nb, raw, out.in_file.line));
  return out;
}

std::optional<CellEdit> cell_edit(const Notebook& nb, const Edit& e) {
  const NotebookCell* c = cell_at(nb, e.start_byte);
  if (!c || e.end_byte > c->program_end || e.end_byte < e.start_byte) return std::nullopt;
  CellLines lines = lines_of(nb, *c);
  auto [k1, col1] = cell_line_column(lines, e.start_byte);
  auto [k2, col2] = cell_line_column(lines, e.end_byte);
  for (size_t k = k1; k <= k2 && k < c->masked.size(); ++k)
    if (c->masked[k]) return std::nullopt;
  CellEdit out;
  out.cell = c->number;
  out.edit.start_byte = source_byte(*c, lines, k1, col1);
  out.edit.end_byte = source_byte(*c, lines, k2, col2);
  out.edit.replacement = e.replacement;
  return out;
}

std::string apply_to_notebook(const Notebook& nb, std::string_view raw, const std::vector<Edit>& edits,
                              std::string& error) {
  std::map<uint32_t, std::vector<Edit>> by_cell;
  for (const auto& e : edits) {
    auto ce = cell_edit(nb, e);
    if (!ce) {
      error = "a fix reaches across cells or into an IPython magic";
      return std::string(raw);
    }
    by_cell[ce->cell].push_back(ce->edit);
  }
  // (raw span, replacement), applied from the end of the text.
  std::vector<std::tuple<size_t, size_t, std::string>> replacements;
  auto dump = [](const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); };
  for (const auto& c : nb.cells) {
    auto it = by_cell.find(c.number);
    if (it == by_cell.end()) continue;
    std::string source = apply_edits(c.source, it->second, nullptr);
    if (source == c.source) continue;
    if (!c.list) {
      replacements.emplace_back(c.raw_begin, c.raw_end, dump(source));
      continue;
    }
    std::vector<std::string> old_lines, new_lines;
    for (size_t k = 0; k < c.pieces.size(); ++k) {
      uint32_t end = k + 1 < c.pieces.size() ? c.pieces[k + 1].source_begin : static_cast<uint32_t>(c.source.size());
      old_lines.push_back(c.source.substr(c.pieces[k].source_begin, end - c.pieces[k].source_begin));
    }
    for (size_t p = 0; p < source.size();) {
      size_t nl = source.find('\n', p);
      size_t end = nl == std::string::npos ? source.size() : nl + 1;
      new_lines.push_back(source.substr(p, end - p));
      p = end;
    }
    size_t n = old_lines.size(), m = new_lines.size();
    size_t pre = 0;
    while (pre < n && pre < m && old_lines[pre] == new_lines[pre]) ++pre;
    size_t suf = 0;
    while (suf < n - pre && suf < m - pre && old_lines[n - 1 - suf] == new_lines[m - 1 - suf]) ++suf;
    std::vector<std::string> middle;
    for (size_t k = pre; k < m - suf; ++k) middle.push_back(dump(new_lines[k]));
    if (n == 0) {
      std::string text = "[";
      for (size_t k = 0; k < middle.size(); ++k) text += (k ? ", " : "") + middle[k];
      replacements.emplace_back(c.raw_begin, c.raw_end, text + "]");
      continue;
    }
    // The separator the notebook uses between two lines of a source.
    std::string sep;
    if (n >= 2) {
      sep = std::string(raw.substr(c.pieces[0].raw_end, c.pieces[1].raw_begin - c.pieces[0].raw_end));
    } else {
      std::string_view before = raw.substr(c.raw_begin + 1, c.pieces[0].raw_begin - c.raw_begin - 1);
      size_t nl = before.rfind('\n');
      sep = nl == std::string_view::npos ? ", " : ",\n" + std::string(before.substr(nl + 1));
    }
    size_t span_begin = pre > 0 ? c.pieces[pre - 1].raw_end : c.pieces[0].raw_begin;
    size_t span_end = suf > 0 ? c.pieces[n - suf].raw_begin : c.pieces[n - 1].raw_end;
    std::string text;
    for (size_t k = 0; k < middle.size(); ++k) text += (k ? sep : "") + middle[k];
    if (pre > 0 && suf > 0) text = sep + text + (middle.empty() ? "" : sep);
    else if (pre > 0 && !middle.empty()) text = sep + text;
    else if (suf > 0 && !middle.empty()) text += sep;
    replacements.emplace_back(span_begin, span_end, text);
  }
  std::sort(replacements.begin(), replacements.end(),
            [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  std::string out(raw);
  for (const auto& [b, e, text] : replacements) out.replace(b, e - b, text);
  return out;
}

}  // namespace torchleak
