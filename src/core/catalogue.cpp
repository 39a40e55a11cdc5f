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

// Why a message template is malformed, or "": slots are `{name}` with a
// lower-case identifier, and no other brace appears.
std::string template_problem(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '}') return fmt::format("a '}}' without its '{{' at offset {}", i);
    if (text[i] != '{') continue;
    size_t close = text.find('}', i);
    if (close == std::string::npos) return fmt::format("a '{{' without its '}}' at offset {}", i);
    std::string slot = text.substr(i + 1, close - i - 1);
    bool ok = !slot.empty() && (std::islower(static_cast<unsigned char>(slot[0])) || slot[0] == '_');
    for (char c : slot)
      ok = ok && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) return fmt::format("slot '{{{}}}' is not a lower-case name", slot);
    i = close;
  }
  return {};
}

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
  if (const toml::node* messages = t.get("messages")) {
    const toml::table* mt = messages->as_table();
    if (!mt) throw std::runtime_error(fmt::format("{}: 'messages' must be a table", file));
    for (const auto& [key, node] : *mt) {
      std::string name(key.str());
      std::optional<std::string> text = node.value<std::string>();
      if (!text) throw std::runtime_error(fmt::format("{}: message '{}' must be a string", file, name));
      if (std::string problem = template_problem(*text); !problem.empty())
        throw std::runtime_error(fmt::format("{}: message '{}': {}", file, name, problem));
      r.messages[name] = *text;
    }
  }
  if (const toml::node* engine = t.get("engine")) {
    if (!engine->is_boolean()) throw std::runtime_error(fmt::format("{}: 'engine' must be a boolean", file));
    r.engine = *engine->value<bool>();
  }
  for (const char* lang : {"zh"}) {
    const toml::node* tr = t.get(lang);
    if (!tr) continue;
    const toml::table* tt = tr->as_table();
    if (!tt) throw std::runtime_error(fmt::format("{}: [{}] must be a table", file, lang));
    std::string where = fmt::format("{} [{}]", file, lang);
    RuleInfo::Translation t;
    t.summary = required_string(*tt, "summary", where);
    t.why = required_string(*tt, "why", where);
    t.fix = required_string(*tt, "fix", where);
    for (const auto& [key, node] : *tt) {
      std::string k(key.str());
      if (k == "summary" || k == "why" || k == "fix") continue;
      if (k.size() > 5 && k.substr(k.size() - 5) == "-note") {
        t.notes[k.substr(0, k.size() - 5)] = required_string(*tt, k, where);
        continue;
      }
      throw std::runtime_error(fmt::format("{}: unknown key '{}' (expected summary, why, fix, <language>-note)", where, k));
    }
    r.translations[lang] = std::move(t);
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

// Chinese text is wrapped in the catalogue for reading, but a line break
// inside a paragraph renders as a space between two Chinese characters:
// the lines of a paragraph are joined, with no space where either side is
// not ASCII (a space between two ASCII words). Lists and code stay as they are.
std::string join_wrapped_lines(const std::string& text) {
  std::vector<std::string> lines;
  bool fence = false, joinable = false;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    bool is_fence = line.rfind("```", 0) == 0;
    bool structural = line.empty() || is_fence || line[0] == ' ' || line[0] == '|' || line[0] == '#' ||
                      line.rfind("- ", 0) == 0 || line.rfind("* ", 0) == 0 ||
                      (std::isdigit(static_cast<unsigned char>(line[0])) && line.find(". ") < 4);
    if (joinable && !structural && !fence) {
      std::string& last = lines.back();
      // A space between two ASCII words, and beside inline code, as the text spaces it elsewhere.
      bool ascii = static_cast<unsigned char>(last.back()) < 0x80 && static_cast<unsigned char>(line[0]) < 0x80;
      if (ascii || line[0] == '`' || last.back() == '`') last += ' ';
      last += line;
    } else {
      lines.push_back(line);
    }
    if (is_fence) fence = !fence;
    joinable = !fence && !line.empty() && !is_fence;
    if (end == text.size()) break;
  }
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) out += (k ? "\n" : "") + lines[k];
  return out;
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

const std::vector<std::string>& documentation_languages() {
  static const std::vector<std::string> langs = [] {
    std::vector<std::string> out{"en"};
    const auto& rules = Catalogue::builtin().rules();
    if (rules.empty()) return out;
    for (const auto& entry : rules.front().translations) {
      const std::string& lang = entry.first;
      if (std::all_of(rules.begin(), rules.end(), [&](const RuleInfo& r) { return r.translations.count(lang); }))
        out.push_back(lang);
    }
    return out;
  }();
  return langs;
}

std::string render_rule_markdown(const RuleInfo& r, std::string_view lang) {
  // The page's headings and words, per language.
  struct Words {
    const char *severity, *languages, *fix_label, *none, *what, *why, *example, *instead, *fix, *references,
        *safe, *unsafe, *error, *warning, *note, *stop;
  };
  static const Words en{"Severity", "Languages", "Fix", "none", "What it does", "Why is this bad?", "Example",
                        "Use instead", "Fix", "References", "safe", "unsafe", "error", "warning", "note", "."};
  static const Words zh{"严重程度", "语言", "修复", "无", "检查什么", "为什么有问题？", "示例", "改为",
                        "修复方法", "参考资料", "安全", "不安全", "错误", "警告", "提示", "。"};
  auto it = r.translations.find(std::string(lang));
  bool translated = lang != "en" && it != r.translations.end();
  const Words& w = translated && lang == "zh" ? zh : en;
  std::string summary = translated ? join_wrapped_lines(it->second.summary) : r.summary;
  std::string why = translated ? join_wrapped_lines(it->second.why) : r.why;
  std::string fix = translated ? join_wrapped_lines(it->second.fix) : r.fix;
  std::string sep = translated ? "；" : ". ";
  std::string colon = translated ? "：" : ": ";
  std::string out;
  out += fmt::format("# {} {}\n\n", r.id, r.name);
  std::string langs;
  for (const auto& l : r.languages) langs += (langs.empty() ? "" : ", ") + std::string(language_title(l));
  const char* severity = r.severity == Severity::Error ? w.error : r.severity == Severity::Note ? w.note : w.warning;
  std::string fix_text = r.fix_availability == FixAvailability::None
                             ? std::string(w.none)
                             : std::string(r.fix_availability == FixAvailability::Safe ? w.safe : w.unsafe) +
                                   " (`--fix`" + (r.fix_availability == FixAvailability::Unsafe ? " `--unsafe-fixes`)" : ")");
  out += fmt::format("{}{}{}{}{}{}{}{}{}{}{}\n\n", w.severity, colon, severity, sep, w.languages, colon,
                     langs.empty() ? w.none : langs, sep, w.fix_label, colon, fix_text + w.stop);
  out += fmt::format("## {}\n\n", w.what) + trim_trailing_newlines(summary) + "\n\n";
  out += fmt::format("## {}\n\n", w.why) + trim_trailing_newlines(why) + "\n\n";
  for (const auto& ex : r.examples) {
    if (!ex.note.empty()) {
      std::string note = ex.note;
      if (translated)
        if (auto n = it->second.notes.find(ex.language); n != it->second.notes.end()) note = join_wrapped_lines(n->second);
      out += fmt::format("## {}\n\n{}\n\n", language_title(ex.language), trim_trailing_newlines(note));
    }
    if (ex.bad_example.empty()) continue;
    out += fmt::format("## {} ({})\n\n```{}\n{}\n```\n\n", w.example, language_title(ex.language),
                       fence_language(ex.language), trim_trailing_newlines(ex.bad_example));
    out += fmt::format("## {} ({})\n\n```{}\n{}\n```\n\n", w.instead, language_title(ex.language),
                       fence_language(ex.language), trim_trailing_newlines(ex.good_example));
  }
  out += fmt::format("## {}\n\n", w.fix) + trim_trailing_newlines(fix) + "\n";
  if (!r.references.empty()) {
    out += fmt::format("\n## {}\n\n", w.references);
    for (const auto& ref : r.references) out += "- " + ref + "\n";
  }
  return out;
}

}  // namespace torchleak
