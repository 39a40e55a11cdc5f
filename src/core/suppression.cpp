#include "core/suppression.h"

#include "rule_messages.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <limits>
#include <cctype>

namespace torchleak {

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_marker(char c) { return c == '#' || c == '/' || c == '*'; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool istarts_with(std::string_view s, size_t at, std::string_view prefix) {
  return at + prefix.size() <= s.size() && iequals(s.substr(at, prefix.size()), prefix);
}

size_t skip_blanks(std::string_view s, size_t i) {
  while (i < s.size() && is_blank(s[i])) ++i;
  return i;
}

// Only blanks and comment markers: what is left of a comment once its
// directive is gone.
bool only_markers(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return is_blank(c) || is_marker(c) || c == '\n'; });
}

// `# noqa` at `hash` (the index of a '#'); appends the directive or a problem.
void parse_noqa(std::string_view text, size_t hash, ParsedComment& out) {
  size_t i = skip_blanks(text, hash + 1);
  if (!istarts_with(text, i, "noqa")) return;
  size_t after = i + 4;
  if (after < text.size() && !is_blank(text[after]) && text[after] != ':' && text[after] != '#') return;
  Directive d;
  d.kind = DirectiveKind::Noqa;
  d.start = static_cast<uint32_t>(hash);
  d.end = static_cast<uint32_t>(after);
  size_t colon = skip_blanks(text, after);
  if (colon >= text.size() || text[colon] != ':') {
    out.directives.push_back(std::move(d));
    return;
  }
  // Codes: letters then digits, separated by commas and/or blanks; the list
  // ends at the first word that is not a code (an explanation may follow).
  i = colon + 1;
  while (true) {
    size_t s = i;
    while (s < text.size() && (is_blank(text[s]) || text[s] == ',')) ++s;
    size_t e = s;
    while (e < text.size() && std::isalpha(static_cast<unsigned char>(text[e]))) ++e;
    size_t letters = e - s;
    while (e < text.size() && std::isdigit(static_cast<unsigned char>(text[e]))) ++e;
    bool code = letters > 0 && e > s + letters && (e == text.size() || !is_word(text[e]));
    if (!code) break;
    d.codes.push_back({std::string(text.substr(s, e - s)), static_cast<uint32_t>(s), static_cast<uint32_t>(e)});
    d.end = static_cast<uint32_t>(e);
    i = e;
  }
  if (d.codes.empty()) {
    out.problems.push_back(
        "invalid `# noqa` directive: expected a comma-separated list of codes after `noqa:` "
        "(e.g. `# noqa: TL001, TL006`)");
    return;
  }
  out.directives.push_back(std::move(d));
}

// A comma-separated list in brackets or parentheses starting at `open`; the
// index after the closing character, or npos with a problem.
size_t parse_list(std::string_view text, size_t open, char close, std::string_view what, Directive& d,
                  bool (*allowed)(char), std::vector<std::string>& problems) {
  size_t end = text.find(close, open + 1);
  size_t newline = text.find('\n', open + 1);
  if (end == std::string_view::npos || (newline != std::string_view::npos && newline < end)) {
    problems.push_back(fmt::format("invalid `{}` directive: `{}` is not closed by `{}`", what, text[open], close));
    return std::string_view::npos;
  }
  size_t i = open + 1;
  while (i < end) {
    size_t s = skip_blanks(text, i);
    size_t e = s;
    while (e < end && allowed(text[e])) ++e;
    size_t next = skip_blanks(text, e);
    if (e == s || (next < end && text[next] != ',')) {
      problems.push_back(fmt::format("invalid `{}` directive: expected rule codes or names separated by commas in `{}`",
                                     what, text.substr(open, end + 1 - open)));
      return std::string_view::npos;
    }
    d.codes.push_back({std::string(text.substr(s, e - s)), static_cast<uint32_t>(s), static_cast<uint32_t>(e)});
    i = next + 1;
  }
  if (d.codes.empty()) {
    problems.push_back(fmt::format("invalid `{}` directive: `{}` names no rule", what, text.substr(open, end + 1 - open)));
    return std::string_view::npos;
  }
  return end + 1;
}

bool name_char(char c) { return is_word(c) || c == '-'; }
bool check_glob_char(char c) { return is_word(c) || c == '-' || c == '*' || c == '.' || c == '?'; }

// `torchleak: ...` at `at`, which follows the comment marker starting at `marker`.
void parse_torchleak(std::string_view text, size_t marker, size_t at, ParsedComment& out) {
  size_t colon = skip_blanks(text, at + 9);
  if (colon >= text.size() || text[colon] != ':') return;  // prose that mentions torchleak
  size_t w = skip_blanks(text, colon + 1);
  size_t we = w;
  while (we < text.size() && name_char(text[we])) ++we;
  std::string_view word = text.substr(w, we - w);
  Directive d;
  d.start = static_cast<uint32_t>(marker);
  d.end = static_cast<uint32_t>(we);
  if (word == "skip-file") {
    d.kind = DirectiveKind::SkipFile;
    out.directives.push_back(std::move(d));
    return;
  }
  if (word == "noqa") {
    // `noqa` and its codes, read as a line's `# noqa` is, for the whole file.
    ParsedComment codes;
    parse_noqa(text, w - 1, codes);
    for (auto& p : codes.problems) {
      std::string what = "`# noqa`";
      if (size_t at = p.find(what); at != std::string::npos) p.replace(at, what.size(), "`torchleak: noqa`");
      out.problems.push_back(std::move(p));
    }
    for (auto& c : codes.directives) {
      c.kind = DirectiveKind::FileNoqa;
      c.start = static_cast<uint32_t>(marker);
      out.directives.push_back(std::move(c));
    }
    return;
  }
  if (word != "ignore") {
    out.problems.push_back(fmt::format("unknown directive `torchleak: {}` (expected `torchleak: ignore[<rules>]`, "
                                       "`torchleak: noqa: <codes>` or `torchleak: skip-file`)",
                                       word.empty() ? text.substr(w, std::min<size_t>(12, text.size() - w)) : word));
    return;
  }
  d.kind = DirectiveKind::Ignore;
  size_t open = skip_blanks(text, we);
  if (open < text.size() && text[open] == '[') {
    size_t end = parse_list(text, open, ']', "torchleak: ignore", d, name_char, out.problems);
    if (end == std::string_view::npos) return;
    d.end = static_cast<uint32_t>(end);
  }
  out.directives.push_back(std::move(d));
}

// NOLINT, NOLINTNEXTLINE, NOLINTBEGIN, NOLINTEND at `at`.
void parse_nolint(std::string_view text, size_t at, ParsedComment& out) {
  if (at > 0 && is_word(text[at - 1])) return;
  size_t i = at + 6;
  Directive d;
  d.kind = DirectiveKind::Nolint;
  for (auto [suffix, kind] : {std::pair{std::string_view("NEXTLINE"), DirectiveKind::NolintNextLine},
                              std::pair{std::string_view("BEGIN"), DirectiveKind::NolintBegin},
                              std::pair{std::string_view("END"), DirectiveKind::NolintEnd}}) {
    if (text.substr(i, suffix.size()) == suffix) {
      d.kind = kind;
      i += suffix.size();
      break;
    }
  }
  if (i < text.size() && is_word(text[i])) return;  // NOLINTED, NOLINTS: a word, not a directive
  d.start = static_cast<uint32_t>(at);
  d.end = static_cast<uint32_t>(i);
  if (i < text.size() && text[i] == '(') {
    size_t end = parse_list(text, i, ')', directive_name(d.kind), d, check_glob_char, out.problems);
    if (end == std::string_view::npos) return;
    d.end = static_cast<uint32_t>(end);
  }
  out.directives.push_back(std::move(d));
}

}  // namespace

std::string_view directive_name(DirectiveKind kind) {
  switch (kind) {
    case DirectiveKind::Noqa: return "noqa";
    case DirectiveKind::Ignore: return "torchleak: ignore";
    case DirectiveKind::SkipFile: return "torchleak: skip-file";
    case DirectiveKind::FileNoqa: return "torchleak: noqa";
    case DirectiveKind::Nolint: return "NOLINT";
    case DirectiveKind::NolintNextLine: return "NOLINTNEXTLINE";
    case DirectiveKind::NolintBegin: return "NOLINTBEGIN";
    case DirectiveKind::NolintEnd: return "NOLINTEND";
  }
  return "noqa";
}

bool may_hold_directive(std::string_view t) {
  for (size_t i = 0; i + 4 <= t.size(); ++i) {
    char c = t[i];
    if ((c == 'n' || c == 'N') && istarts_with(t, i, "noqa")) return true;
    if (c == 't' && t.substr(i, 9) == "torchleak") return true;
    if (c == 'N' && t.substr(i, 6) == "NOLINT") return true;
  }
  return false;
}

Comment comment_at(std::string_view text, uint32_t start, uint32_t end, uint32_t line, uint32_t column) {
  Comment c;
  start = std::min<uint32_t>(start, static_cast<uint32_t>(text.size()));
  end = std::clamp<uint32_t>(end, start, static_cast<uint32_t>(text.size()));
  while (end > start && text[end - 1] == '\r') --end;  // a CRLF line's '\r' belongs to its terminator
  c.text = std::string(text.substr(start, end - start));
  c.line = line;
  c.column = column;
  c.start_byte = start;
  c.end_byte = end;
  uint32_t line_start = column <= start ? start - column : 0;
  size_t line_end = text.find('\n', start);
  if (line_end == std::string_view::npos) line_end = text.size();
  std::string_view line_text = text.substr(line_start, line_end - line_start);
  if (!line_text.empty() && line_text.back() == '\r') line_text.remove_suffix(1);
  c.line_text = std::string(line_text);
  // What the comment shares its line with.
  std::string_view before = text.substr(line_start, start - line_start);
  size_t after_end = std::max<size_t>(text.find('\n', end) == std::string_view::npos ? text.size() : text.find('\n', end), end);
  std::string_view after = text.substr(end, after_end - end);
  bool blank_before = std::all_of(before.begin(), before.end(), is_blank);
  bool blank_after = std::all_of(after.begin(), after.end(), is_blank);
  if (blank_before && blank_after) {
    c.remove_start = line_start;  // the whole line, with its terminator
    c.remove_end = static_cast<uint32_t>(after_end < text.size() ? after_end + 1 : after_end);
  } else if (blank_after) {
    uint32_t s = start;
    while (s > line_start && is_blank(text[s - 1])) --s;
    c.remove_start = s;
    c.remove_end = end;
  } else {
    uint32_t e = end;
    while (e < after_end && is_blank(text[e])) ++e;
    c.remove_start = start;
    c.remove_end = e;
  }
  return c;
}

ParsedComment parse_comment(std::string_view text) {
  ParsedComment out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '#') {
      parse_noqa(text, i, out);
      size_t t = skip_blanks(text, i + 1);
      if (text.substr(t, 9) == "torchleak") parse_torchleak(text, i, t, out);
    } else if (c == '/' && i + 1 < text.size() && (text[i + 1] == '/' || text[i + 1] == '*')) {
      size_t t = skip_blanks(text, i + 2);
      while (t < text.size() && (text[t] == '/' || text[t] == '*' || text[t] == '!')) t = skip_blanks(text, t + 1);
      if (text.substr(t, 9) == "torchleak") parse_torchleak(text, i, t, out);
      ++i;
    } else if (c == 'N' && text.substr(i, 6) == "NOLINT") {
      parse_nolint(text, i, out);
    }
  }
  std::sort(out.directives.begin(), out.directives.end(),
            [](const Directive& a, const Directive& b) { return a.start < b.start; });
  uint32_t line_offset = 0;
  size_t scanned = 0;
  for (auto& d : out.directives) {
    line_offset += static_cast<uint32_t>(std::count(text.begin() + scanned, text.begin() + d.start, '\n'));
    scanned = d.start;
    d.line_offset = line_offset;
  }
  return out;
}

bool code_is_torchleaks(DirectiveKind kind, std::string_view code) {
  switch (kind) {
    case DirectiveKind::Noqa:
    case DirectiveKind::FileNoqa:
      return code.size() > 2 && iequals(code.substr(0, 2), "TL") &&
             std::all_of(code.begin() + 2, code.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    case DirectiveKind::Ignore:
    case DirectiveKind::SkipFile: return true;
    case DirectiveKind::Nolint:
    case DirectiveKind::NolintNextLine:
    case DirectiveKind::NolintBegin:
    case DirectiveKind::NolintEnd: return istarts_with(code, 0, "torchleak-");
  }
  return false;
}

bool code_names_rule(DirectiveKind kind, std::string_view code, const RuleInfo& rule) {
  switch (kind) {
    case DirectiveKind::Noqa:
    case DirectiveKind::FileNoqa: return iequals(code, rule.id);
    case DirectiveKind::Ignore: return iequals(code, rule.id) || code == rule.name;
    case DirectiveKind::SkipFile: return true;
    case DirectiveKind::Nolint:
    case DirectiveKind::NolintNextLine:
    case DirectiveKind::NolintBegin:
    case DirectiveKind::NolintEnd: {
      std::string pattern(code);
      std::string by_name = "torchleak-" + rule.name, by_id = "torchleak-" + rule.id;
      return fnmatch(pattern.c_str(), by_name.c_str(), 0) == 0 ||
             fnmatch(pattern.c_str(), by_id.c_str(), FNM_CASEFOLD) == 0;
    }
  }
  return false;
}

FileSuppressions::FileSuppressions(std::vector<Comment> comments, uint32_t first_statement_line,
                                   const Catalogue& catalogue)
    : catalogue_(catalogue), comments_(std::move(comments)) {
  std::vector<size_t> open_begins;  // indices in entries_
  for (size_t ci = 0; ci < comments_.size(); ++ci) {
    const Comment& c = comments_[ci];
    ParsedComment parsed = parse_comment(c.text);
    for (const auto& p : parsed.problems) notes_.push_back(fmt::format("line {}: {}; ignored", c.line, p));
    for (auto& d : parsed.directives) {
      Entry e;
      e.comment = ci;
      e.line = c.line + d.line_offset;
      // Codes of torchleak's that name no rule are typos: say so, and drop them.
      std::vector<DirectiveCode> kept;
      for (auto& code : d.codes) {
        bool known = !code_is_torchleaks(d.kind, code.text) ||
                     std::any_of(catalogue.rules().begin(), catalogue.rules().end(),
                                 [&](const RuleInfo& r) { return code_names_rule(d.kind, code.text, r); });
        if (known) {
          kept.push_back(std::move(code));
        } else {
          notes_.push_back(fmt::format("line {}: `{}` names no torchleak rule: `{}`; ignored", e.line,
                                       directive_name(d.kind), code.text));
        }
      }
      if (!d.codes.empty() && kept.empty()) continue;  // silences nothing: not a bare directive
      d.codes = std::move(kept);
      e.code_used.assign(d.codes.size(), false);
      switch (d.kind) {
        case DirectiveKind::Noqa:
        case DirectiveKind::Ignore:
        case DirectiveKind::Nolint: e.first_line = e.last_line = e.line; break;
        case DirectiveKind::NolintNextLine: e.first_line = e.last_line = e.line + 1; break;
        case DirectiveKind::FileNoqa:
          e.first_line = 1;
          e.last_line = std::numeric_limits<uint32_t>::max();
          break;
        case DirectiveKind::SkipFile:
          if (first_statement_line == 0 || e.line < first_statement_line) {
            skip_file_ = true;
          } else {
            notes_.push_back(fmt::format("line {}: `torchleak: skip-file` below the first statement (line {}); "
                                         "ignored: put it at the top of the file",
                                         e.line, first_statement_line));
          }
          break;
        case DirectiveKind::NolintBegin:
        case DirectiveKind::NolintEnd: break;  // paired below
      }
      e.directive = std::move(d);
      entries_.push_back(std::move(e));
      size_t index = entries_.size() - 1;
      if (entries_[index].directive.kind == DirectiveKind::NolintBegin) open_begins.push_back(index);
      if (entries_[index].directive.kind != DirectiveKind::NolintEnd) continue;
      // A NOLINTEND closes the innermost open NOLINTBEGIN with the same list.
      auto same_codes = [&](const Entry& a, const Entry& b) {
        auto names = [](const Entry& x) {
          std::vector<std::string> v;
          for (const auto& k : x.directive.codes) v.push_back(k.text);
          std::sort(v.begin(), v.end());
          return v;
        };
        return names(a) == names(b);
      };
      auto it = std::find_if(open_begins.rbegin(), open_begins.rend(),
                             [&](size_t b) { return same_codes(entries_[b], entries_[index]); });
      if (it == open_begins.rend()) {
        notes_.push_back(fmt::format("line {}: `NOLINTEND` without a matching `NOLINTBEGIN`; ignored", entries_[index].line));
        continue;
      }
      Entry& begin = entries_[*it];
      begin.first_line = begin.line;
      begin.last_line = entries_[index].line;
      begin.partner = static_cast<int>(index);
      open_begins.erase(std::next(it).base());
    }
  }
  for (size_t b : open_begins)
    notes_.push_back(fmt::format("line {}: `NOLINTBEGIN` without a matching `NOLINTEND`; ignored", entries_[b].line));
}

bool FileSuppressions::suppresses(const Diagnostic& d, const RuleInfo& rule) {
  bool silenced = false;
  for (auto& e : entries_) {
    if (e.first_line == 0 || d.start.line < e.first_line || d.start.line > e.last_line) continue;
    if (e.directive.codes.empty()) {
      // A bare directive would silence the report that it is unused: only
      // an explicit code silences a finding of the engine's own (TL100).
      if (rule.engine) continue;
      e.used = true;
      silenced = true;
      continue;
    }
    for (size_t i = 0; i < e.directive.codes.size(); ++i) {
      if (!code_names_rule(e.directive.kind, e.directive.codes[i].text, rule)) continue;
      e.code_used[i] = true;
      silenced = true;
    }
  }
  return silenced;
}

namespace {

// Where byte `offset` of a comment falls: its line (1-based), byte column and
// the text of that line as far as it is known.
struct Place {
  uint32_t line;
  uint32_t column;
  std::string line_text;
};

Place place_in(const Comment& c, uint32_t offset) {
  std::string_view text = c.text;
  size_t nl = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  if (nl == std::string_view::npos) return {c.line, c.column + offset, c.line_text};
  uint32_t line = c.line + static_cast<uint32_t>(std::count(text.begin(), text.begin() + offset, '\n'));
  size_t end = text.find('\n', offset);
  std::string_view line_text = text.substr(nl + 1, (end == std::string_view::npos ? text.size() : end) - nl - 1);
  return {line, static_cast<uint32_t>(offset - nl - 1), std::string(line_text)};
}

// The edit that deletes directive `d` from comment `c`, with the explanation
// that follows it up to the next `#`; the whole comment when nothing else is left.
Edit remove_directive(const Comment& c, const Directive& d) {
  std::string_view text = c.text;
  size_t end = text.find('#', d.end);
  if (end == std::string_view::npos) end = text.size();
  if (text.size() >= 2 && text.substr(text.size() - 2) == "*/" && text.substr(0, 2) == "/*")
    end = std::min(end, text.size() - 2);
  std::string_view before = text.substr(0, d.start);
  std::string_view after = text.substr(end);
  if (only_markers(before) && only_markers(after)) return Edit{c.remove_start, c.remove_end, ""};
  size_t s = d.start;
  if (!only_markers(before)) {
    while (s > 0 && is_blank(text[s - 1])) --s;  // a directive after other words: the blanks before it
  }
  return Edit{c.start_byte + static_cast<uint32_t>(s), c.start_byte + static_cast<uint32_t>(end), ""};
}

// The edit that keeps only the codes of `d` not in `drop`.
Edit remove_codes(const Comment& c, const Directive& d, const std::vector<std::string>& drop) {
  std::vector<std::string> kept;
  for (const auto& code : d.codes)
    if (std::find(drop.begin(), drop.end(), code.text) == drop.end()) kept.push_back(code.text);
  std::string joined;
  for (const auto& k : kept) joined += (joined.empty() ? "" : ", ") + k;
  return Edit{c.start_byte + d.codes.front().start, c.start_byte + d.codes.back().end, joined};
}

}  // namespace

Diagnostic FileSuppressions::unused_diagnostic(const RuleInfo& unused_rule, const std::string& path, const Entry& e,
                                               const std::vector<size_t>& unused_codes) const {
  const Comment& c = comments_[e.comment];
  const Directive& d = e.directive;
  Diagnostic diag;
  diag.rule_id = unused_rule.id;
  diag.path = path;
  Place s = place_in(c, d.start), t = place_in(c, d.end);
  diag.start = {s.line, s.column};
  diag.end = {t.line, t.column};
  diag.start_byte = c.start_byte + d.start;
  diag.end_byte = c.start_byte + d.end;
  diag.source_line = s.line_text;  // a directive never spans lines
  std::string_view written = std::string_view(c.text).substr(d.start, d.end - d.start);
  diag.snippet = std::string(written);
  std::string_view name = directive_name(d.kind);
  bool whole = d.codes.empty() || unused_codes.size() == d.codes.size();
  std::vector<std::string> names;
  for (size_t i : unused_codes) names.push_back(d.codes[i].text);
  if (d.codes.empty()) {
    diag.message = fmt::format(fmt::runtime(messages::TL100::silences_nothing), fmt::arg("directive", name));
  } else {
    std::string list;
    for (const auto& n : names) list += fmt::format("{}`{}`", list.empty() ? "" : ", ", n);
    diag.message =
        fmt::format(fmt::runtime(messages::TL100::unused_codes), fmt::arg("directive", name), fmt::arg("codes", list));
  }
  Fix fix;
  fix.safety = FixSafety::Safe;
  const Entry* end = e.partner >= 0 ? &entries_[static_cast<size_t>(e.partner)] : nullptr;
  if (whole) {
    fix.title = d.kind == DirectiveKind::NolintBegin ? "Remove the `NOLINTBEGIN` and `NOLINTEND` directives"
                                                     : fmt::format("Remove the unused `{}` directive", name);
    diag.help = "remove the directive: nothing on the lines it covers needs it";
    fix.edits.push_back(remove_directive(c, d));
    if (end) fix.edits.push_back(remove_directive(comments_[end->comment], end->directive));
  } else {
    fix.title = "Remove the unused codes";
    diag.help = "remove the codes that silence nothing";
    fix.edits.push_back(remove_codes(c, d, names));
    if (end) fix.edits.push_back(remove_codes(comments_[end->comment], end->directive, names));
  }
  // Both directives of a pair may sit in one comment; a removal of the whole
  // comment then covers both.
  std::sort(fix.edits.begin(), fix.edits.end(), [](const Edit& a, const Edit& b) { return a.start_byte < b.start_byte; });
  fix.edits.erase(std::unique(fix.edits.begin(), fix.edits.end()), fix.edits.end());
  diag.fix = std::move(fix);
  return diag;
}

std::vector<Diagnostic> FileSuppressions::unused(const RuleInfo& unused_rule, const std::string& path,
                                                 const std::function<bool(const RuleInfo&)>& judged) const {
  std::vector<Diagnostic> out;
  if (skip_file_) return out;
  auto any_judged = [&](DirectiveKind kind, std::string_view code) {
    return std::any_of(catalogue_.rules().begin(), catalogue_.rules().end(),
                       [&](const RuleInfo& r) { return code_names_rule(kind, code, r) && judged(r); });
  };
  for (const auto& e : entries_) {
    const Directive& d = e.directive;
    if (e.first_line == 0) continue;  // skip-file, NOLINTEND, an unmatched NOLINTBEGIN
    if (d.codes.empty()) {
      // A bare noqa or NOLINT may be there for another tool.
      if (d.kind != DirectiveKind::Ignore || e.used) continue;
      bool any = std::any_of(catalogue_.rules().begin(), catalogue_.rules().end(), judged);
      if (any) out.push_back(unused_diagnostic(unused_rule, path, e, {}));
      continue;
    }
    std::vector<size_t> unused_codes;
    for (size_t i = 0; i < d.codes.size(); ++i) {
      if (e.code_used[i] || !code_is_torchleaks(d.kind, d.codes[i].text)) continue;
      if (any_judged(d.kind, d.codes[i].text)) unused_codes.push_back(i);
    }
    if (!unused_codes.empty()) out.push_back(unused_diagnostic(unused_rule, path, e, unused_codes));
  }
  return out;
}

}  // namespace torchleak
