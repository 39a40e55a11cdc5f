#include "core/catalogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <toml++/toml.h>

namespace torchleak {

// Generated at build time from rules/*.toml (see cmake/EmbedCatalogue.cmake).
extern const std::vector<std::pair<std::string, std::string>>& embedded_catalogue_entries();

namespace {

std::string required_string(const toml::table& t, std::string_view key, const std::string& where) {
  auto v = t[key].value<std::string>();
  if (!v || v->empty())
    throw std::runtime_error(fmt::format("{}: missing or empty string key '{}'", where, key));
  return *v;
}

std::vector<std::string> string_array(const toml::table& t, std::string_view key,
                                      const std::string& where) {
  std::vector<std::string> out;
  const toml::node* n = t.get(key);
  if (!n) return out;
  const toml::array* arr = n->as_array();
  if (!arr) throw std::runtime_error(fmt::format("{}: '{}' must be an array of strings", where, key));
  for (const auto& item : *arr) {
    auto s = item.value<std::string>();
    if (!s) throw std::runtime_error(fmt::format("{}: '{}' must be an array of strings", where, key));
    out.push_back(*s);
  }
  return out;
}

Severity parse_severity(const std::string& s, const std::string& where) {
  if (s == "error") return Severity::Error;
  if (s == "warning") return Severity::Warning;
  if (s == "note") return Severity::Note;
  throw std::runtime_error(fmt::format("{}: severity must be error, warning or note, not '{}'", where, s));
}

FixAvailability parse_fix(const std::string& s, const std::string& where) {
  if (s == "none") return FixAvailability::None;
  if (s == "safe") return FixAvailability::Safe;
  if (s == "unsafe") return FixAvailability::Unsafe;
  throw std::runtime_error(fmt::format("{}: fix-availability must be none, safe or unsafe, not '{}'", where, s));
}

RuleInfo parse_entry(const std::string& file, const std::string& text) {
  toml::table t;
  try {
    t = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", file, e.description()));
  }
  RuleInfo r;
  r.id = required_string(t, "id", file);
  r.name = required_string(t, "name", file);
  r.severity = parse_severity(required_string(t, "severity", file), file);
  r.languages = string_array(t, "languages", file);
  r.precision = required_string(t, "precision", file);
  r.tags = string_array(t, "tags", file);
  r.summary = required_string(t, "summary", file);
  r.why = required_string(t, "why", file);
  r.fix = required_string(t, "fix", file);
  r.fix_availability = parse_fix(required_string(t, "fix-availability", file), file);
  r.references = string_array(t, "references", file);
  if (const toml::node* engine = t.get("engine")) {
    if (!engine->is_boolean()) throw std::runtime_error(fmt::format("{}: 'engine' must be a boolean", file));
    r.engine = *engine->value<bool>();
  }
  const toml::node* ex = t.get("example");
  if (!ex || !ex->as_table())
    throw std::runtime_error(fmt::format("{}: missing [example.<language>] tables", file));
  for (const auto& [lang, node] : *ex->as_table()) {
    const toml::table* lt = node.as_table();
    if (!lt) throw std::runtime_error(fmt::format("{}: example.{} must be a table", file, lang.str()));
    std::string where = fmt::format("{} [example.{}]", file, lang.str());
    LanguageNote note;
    note.language = std::string(lang.str());
    note.note = lt->get("note") ? required_string(*lt, "note", where) : "";
    if (lt->get("bad") || note.note.empty()) {
      note.bad_example = required_string(*lt, "bad", where);
      note.good_example = required_string(*lt, "good", where);
    }
    r.examples.push_back(std::move(note));
  }
  std::sort(r.examples.begin(), r.examples.end(), [](const LanguageNote& a, const LanguageNote& b) {
    // Python first, then C++, then any other language by name.
    auto rank = [](const std::string& l) { return l == "python" ? 0 : l == "cpp" ? 1 : 2; };
    return std::make_pair(rank(a.language), a.language) < std::make_pair(rank(b.language), b.language);
  });
  return r;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view language_title(std::string_view lang) {
  if (lang == "python") return "Python";
  if (lang == "cpp") return "C++ (LibTorch)";
  return lang;
}

std::string_view fence_language(std::string_view lang) { return lang == "python" ? "python" : "cpp"; }

std::string trim_trailing_newlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::string RuleInfo::doc_file() const { return id + "-" + name + ".md"; }

Catalogue Catalogue::parse(const std::vector<std::pair<std::string, std::string>>& entries) {
  Catalogue c;
  for (const auto& [file, text] : entries) c.rules_.push_back(parse_entry(file, text));
  std::sort(c.rules_.begin(), c.rules_.end(),
            [](const RuleInfo& a, const RuleInfo& b) { return a.id < b.id; });
  for (size_t i = 1; i < c.rules_.size(); ++i) {
    if (c.rules_[i].id == c.rules_[i - 1].id)
      throw std::runtime_error("duplicate rule id in catalogue: " + c.rules_[i].id);
  }
  return c;
}

const Catalogue& Catalogue::builtin() {
  static const Catalogue c = parse(embedded_catalogue_entries());
  return c;
}

const RuleInfo* Catalogue::find(std::string_view code_or_name) const {
  for (const auto& r : rules_) {
    if (iequals(r.id, code_or_name) || r.name == code_or_name) return &r;
  }
  return nullptr;
}

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "warning";
}

std::string_view fix_availability_name(FixAvailability f) {
  switch (f) {
    case FixAvailability::None: return "none";
    case FixAvailability::Safe: return "safe";
    case FixAvailability::Unsafe: return "unsafe";
  }
  return "none";
}

std::string render_rule_markdown(const RuleInfo& r) {
  std::string out;
  out += fmt::format("# {} {}\n\n", r.id, r.name);
  std::string langs;
  for (const auto& l : r.languages) langs += (langs.empty() ? "" : ", ") + std::string(language_title(l));
  out += fmt::format("Severity: {}. Languages: {}. Fix: {}.\n\n", severity_name(r.severity),
                     langs.empty() ? "none" : langs,
                     r.fix_availability == FixAvailability::None
                         ? "none"
                         : std::string(fix_availability_name(r.fix_availability)) + " (`--fix`" +
                               (r.fix_availability == FixAvailability::Unsafe ? " `--unsafe-fixes`)" : ")"));
  out += "## What it does\n\n" + trim_trailing_newlines(r.summary) + "\n\n";
  out += "## Why is this bad?\n\n" + trim_trailing_newlines(r.why) + "\n\n";
  for (const auto& ex : r.examples) {
    if (!ex.note.empty()) {
      out += fmt::format("## {}\n\n{}\n\n", language_title(ex.language), trim_trailing_newlines(ex.note));
    }
    if (ex.bad_example.empty()) continue;
    out += fmt::format("## Example ({})\n\n```{}\n{}\n```\n\n", language_title(ex.language),
                       fence_language(ex.language), trim_trailing_newlines(ex.bad_example));
    out += fmt::format("## Use instead ({})\n\n```{}\n{}\n```\n\n", language_title(ex.language),
                       fence_language(ex.language), trim_trailing_newlines(ex.good_example));
  }
  out += "## Fix\n\n" + trim_trailing_newlines(r.fix) + "\n";
  if (!r.references.empty()) {
    out += "\n## References\n\n";
    for (const auto& ref : r.references) out += "- " + ref + "\n";
  }
  return out;
}

}  // namespace torchleak
