// The rule catalogue: one TOML entry per rule in rules/, embedded at build
// time. It is the single source of a rule's documentation: `torchleak rule`,
// docs/rules/*.md, SARIF rule metadata and the language server all read it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostic.h"

namespace torchleak {

enum class FixAvailability { None, Safe, Unsafe };

struct LanguageNote {
  std::string language;  // "python", "cpp"
  std::string bad_example;
  std::string good_example;
  std::string note;  // e.g. why a rule has no C++ counterpart
};

struct RuleInfo {
  std::string id;    // "TL001"
  std::string name;  // "accumulate-undetached"
  Severity severity = Severity::Warning;
  std::vector<std::string> languages;  // languages the rule is checked in
  std::string precision;               // SARIF precision: very-high, high, medium, low
  std::vector<std::string> tags;
  std::string summary;  // one sentence: what it finds
  std::string why;      // why it leaks
  std::string fix;      // how to fix it, one line
  FixAvailability fix_availability = FixAvailability::None;
  std::vector<LanguageNote> examples;  // bad and good example per language
  std::vector<std::string> references;
  // The message templates both languages' checks format (the entry's
  // [messages] table; cmake/EmbedMessages.cmake turns it into the header
  // rule_messages.h the checks include). Slots are `{name}`.
  std::map<std::string, std::string> messages;
  // The documentation in other languages (the entry's `[zh]` table): the
  // summary, why and fix, written by the team; the examples are shared.
  struct Translation {
    std::string summary, why, fix;
    std::map<std::string, std::string> notes;  // by language of the examples ("cpp-note" in the table)
  };
  std::map<std::string, Translation> translations;  // by language code ("zh")
  // Reported by the engine itself rather than by a check (TL100, unused
  // suppressions): it has no check and no fixture folder of its own.
  bool engine = false;

  std::string doc_file() const;  // "TL001-accumulate-undetached.md"
};

class Catalogue {
 public:
  // The catalogue built into this binary. Throws std::runtime_error naming
  // the entry when an embedded entry is malformed (a build-time mistake).
  static const Catalogue& builtin();

  // Parses entries given as (file name, TOML text).
  static Catalogue parse(const std::vector<std::pair<std::string, std::string>>& entries);

  const std::vector<RuleInfo>& rules() const { return rules_; }
  // By code ("TL001", case-insensitive) or name ("accumulate-undetached").
  const RuleInfo* find(std::string_view code_or_name) const;

 private:
  std::vector<RuleInfo> rules_;
};

std::string_view severity_name(Severity s);
std::string_view fix_availability_name(FixAvailability f);

// The rule's documentation page in Markdown, as `torchleak rule` prints it.
// `lang`: "en", or a language of RuleInfo::translations ("zh"); a rule
// without that translation is rendered in English.
std::string render_rule_markdown(const RuleInfo& rule, std::string_view lang = "en");

// The documentation languages: "en", and those every rule is translated to.
const std::vector<std::string>& documentation_languages();

// Base address of the rule documentation pages, for links in SARIF and LSP.
// Set by the build (TORCHLEAK_DOCS_URL).
inline constexpr std::string_view kDocsBaseUrl = TORCHLEAK_DOCS_URL;

}  // namespace torchleak
