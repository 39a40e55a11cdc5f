// One specification per rule: the message templates in rules/*.toml are the
// texts both languages' checks format, through the generated rule_messages.h.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <iterator>
#include <string>

#include "core/catalogue.h"
#include "rule_messages.h"

namespace torchleak {
namespace {

TEST(CatalogueMessages, TheGeneratedHeaderHoldsTheCataloguesTexts) {
  const Catalogue& c = Catalogue::builtin();
  size_t in_catalogue = 0;
  for (const RuleInfo& r : c.rules()) in_catalogue += r.messages.size();
  EXPECT_EQ(std::size(messages::kAll), in_catalogue);
  for (const messages::Entry& e : messages::kAll) {
    const RuleInfo* r = c.find(std::string(e.rule));
    ASSERT_NE(r, nullptr) << e.rule;
    auto it = r->messages.find(std::string(e.name));
    ASSERT_NE(it, r->messages.end()) << e.rule << " " << e.name;
    EXPECT_EQ(it->second, std::string(e.text)) << e.rule << " " << e.name;
  }
  EXPECT_EQ(std::string(messages::TL001::accumulates), c.find("TL001")->messages.at("accumulates"));
}

TEST(CatalogueMessages, SlotsAreNamed) {
  EXPECT_EQ(fmt::format(fmt::runtime(messages::TL001::accumulates), fmt::arg("total", "t"), fmt::arg("value", "v")),
            "`t` accumulates `v` with its autograd graph, keeping every iteration's graph alive");
}

// A rule with a Python and a C++ form says the same thing in both: its
// messages come from the catalogue, not from two checks' string literals.
TEST(CatalogueMessages, EveryRuleOfBothLanguagesHasItsTemplates) {
  size_t both = 0;
  for (const RuleInfo& r : Catalogue::builtin().rules()) {
    bool python = false, cpp = false;
    for (const std::string& l : r.languages) {
      python = python || l == "python";
      cpp = cpp || l == "cpp";
    }
    if (!python || !cpp) continue;
    ++both;
    EXPECT_FALSE(r.messages.empty()) << r.id << " runs in both languages and has no [messages] table";
  }
  EXPECT_EQ(both, 13u);  // every rule but TL004, which has no C++ form
}

Catalogue parse_one(const std::string& messages) {
  return Catalogue::parse({{"TL900-x.toml", R"(id = "TL900"
name = "x"
severity = "warning"
languages = ["python"]
precision = "high"
tags = []
fix-availability = "none"
summary = "s"
why = "w"
fix = "f"
references = []
[example.python]
bad = "b"
good = "g"
[messages]
)" + messages}});
}

TEST(CatalogueMessages, MalformedTemplatesNameTheFileAndTheMessage) {
  EXPECT_EQ(parse_one("ok = \"`{total}` grows\"\n").find("TL900")->messages.at("ok"), "`{total}` grows");
  for (const char* bad : {"m = \"`{Total}`\"\n", "m = \"`{total`\"\n", "m = \"total}\"\n", "m = \"{}\"\n", "m = 3\n"}) {
    try {
      parse_one(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("TL900-x.toml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'m'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace torchleak
