// `torchleak rule`: a rule's documentation from the catalogue, the same text
// as docs/rules/*.md, which `rule --all --output-dir docs/rules` regenerates
// (with docs/rules/README.md, the index). `rule --table` prints the index
// table that README.md carries between its `<!-- rules -->` markers.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "cli/commands.h"
#include "core/catalogue.h"

namespace fs = std::filesystem;

namespace torchleak {

namespace {

std::string languages_of(const RuleInfo& r) {
  std::string out;
  for (const auto& l : r.languages) out += (out.empty() ? "" : ", ") + (l == "cpp" ? std::string("C++") : l == "python" ? std::string("Python") : l);
  return out;
}

std::string fix_of(const RuleInfo& r) {
  switch (r.fix_availability) {
    case FixAvailability::Safe: return "safe";
    case FixAvailability::Unsafe: return "unsafe";
    case FixAvailability::None: break;
  }
  return "";
}

// Every rule, one row each, links relative to `link_prefix`.
std::string rule_table(const Catalogue& catalogue, std::string_view link_prefix, std::string_view lang = "en") {
  std::string out = lang == "zh" ? "| 代码 | 名称 | 语言 | 修复 | 检查什么 |\n| --- | --- | --- | --- | --- |\n"
                                 : "| code | name | languages | fix | finds |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& r : catalogue.rules()) {
    std::string summary;
    auto tr = r.translations.find(std::string(lang));
    const std::string& text = tr != r.translations.end() ? tr->second.summary : r.summary;
    for (char c : text) summary += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
    std::string fix = fix_of(r);
    if (lang == "zh") fix = fix == "safe" ? "安全" : fix == "unsafe" ? "不安全" : fix;
    out += fmt::format("| [{}]({}{}) | {} | {} | {} | {} |\n", r.id, link_prefix, r.doc_file(), r.name,
                       languages_of(r), fix, summary);
  }
  return out;
}

std::string index_page(const Catalogue& catalogue, std::string_view lang) {
  if (lang == "zh")
    return "# 规则\n\ntorchleak 检查的每条规则，由 `rules/` 中的规则目录生成（英文版见 [docs/rules/](../../rules/)）。"
           "「修复」一列说明 `torchleak check --fix` 是否应用该规则的修复（安全），或者只有 "
           "`--fix --unsafe-fixes` 才会应用（不安全）。\n\n" +
           rule_table(catalogue, "", lang);
  return "# Rules\n\nEvery rule torchleak checks, rendered from the catalogue in `rules/`. The fix column says\n"
         "whether `torchleak check --fix` applies the rule's fix (safe) or only `--fix --unsafe-fixes` does\n"
         "(unsafe).\n\n" +
         rule_table(catalogue, "");
}

// One page per rule; pages of rules no longer in the catalogue (renamed or
// removed) are deleted, so the directory mirrors the catalogue exactly.
int write_pages(const Catalogue& catalogue, const fs::path& dir, std::string_view lang) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    fmt::print(stderr, "torchleak: error: {}: cannot create directory: {}\n", dir.string(), ec.message());
    return 2;
  }
  std::set<std::string> pages;
  for (const auto& r : catalogue.rules()) {
    fs::path page = dir / r.doc_file();
    pages.insert(r.doc_file());
    std::ofstream out(page, std::ios::binary | std::ios::trunc);
    out << render_rule_markdown(r, lang);
    out.close();
    if (!out) {
      fmt::print(stderr, "torchleak: error: {}: cannot write\n", page.string());
      return 2;
    }
  }
  {
    fs::path index = dir / "README.md";
    std::ofstream out(index, std::ios::binary | std::ios::trunc);
    out << index_page(catalogue, lang);
    out.close();
    if (!out) {
      fmt::print(stderr, "torchleak: error: {}: cannot write\n", index.string());
      return 2;
    }
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    // TLnnn-name.md: what doc_file() names a page; anything else is left alone.
    size_t digits = name.rfind("TL", 0) == 0 ? name.find_first_not_of("0123456789", 2) : std::string::npos;
    bool rule_page = digits != std::string::npos && digits > 2 && name[digits] == '-' &&
                     entry.path().extension() == ".md";
    if (rule_page && !pages.count(name)) fs::remove(entry.path(), ec);
  }
  return 0;
}

}  // namespace

void add_rule_options(CLI::App& cmd, RuleArgs& a) {
  CLI::Option* name = cmd.add_option("RULE", a.name, "A rule code (TL001) or name (accumulate-undetached)");
  CLI::Option* all = cmd.add_flag("--all", a.all, "Every rule, in code order");
  cmd.add_option("--output-dir", a.output_dir,
                 "With --all: write one Markdown page per rule into this directory (as docs/rules/)")
      ->needs(all);
  CLI::Option* table = cmd.add_flag("--table", a.table,
                                    "Print the Markdown table of every rule, as README.md carries it");
  name->excludes(all);
  name->excludes(table);
  table->excludes(all);
  cmd.add_option("--lang", a.lang, "The documentation's language: en or zh (default: $TORCHLEAK_LANG, else en)")
      ->envname("TORCHLEAK_LANG")
      ->check(CLI::IsMember(documentation_languages()));
}

int run_rule(const RuleArgs& a) {
  const Catalogue& catalogue = Catalogue::builtin();
  if (a.all && !a.output_dir.empty()) return write_pages(catalogue, a.output_dir, a.lang);
  if (a.table) {
    fmt::print("{}", rule_table(catalogue, a.lang == "en" ? "docs/rules/" : "docs/" + a.lang + "/rules/", a.lang));
    return 0;
  }
  if (a.all) {
    bool first = true;
    for (const auto& r : catalogue.rules()) {
      fmt::print("{}{}", first ? "" : "\n", render_rule_markdown(r, a.lang));
      first = false;
    }
    return 0;
  }
  if (a.name.empty()) {
    fmt::print(stderr, "torchleak: error: name a rule (a code such as TL001, or a name), or pass --all\n");
    return 2;
  }
  const RuleInfo* r = catalogue.find(a.name);
  if (!r) {
    fmt::print(stderr, "torchleak: error: no rule named '{}' (see `torchleak rule --all`)\n", a.name);
    return 2;
  }
  fmt::print("{}", render_rule_markdown(*r, a.lang));
  return 0;
}

}  // namespace torchleak
