// Suppression comments: the parser (every directive form, and garbage), the
// per-file application (line scoping, NOLINT regions, skip-file), and unused
// suppressions (TL100) with their fixes, end to end through the engine with
// TL001 findings.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/catalogue.h"
#include "core/engine.h"
#include "core/suppression.h"

using namespace torchleak;

namespace {

// --- the parser ----------------------------------------------------------------

std::string describe(const ParsedComment& p, std::string_view text) {
  std::string out;
  for (const auto& d : p.directives) {
    out += std::string(directive_name(d.kind)) + " @" + std::to_string(d.start) + "-" + std::to_string(d.end) + " '" +
           std::string(text.substr(d.start, d.end - d.start)) + "'";
    for (const auto& c : d.codes)
      out += " [" + c.text + "@" + std::to_string(c.start) + "-" + std::to_string(c.end) + "]";
    out += "\n";
  }
  for (const auto& problem : p.problems) out += "problem: " + problem + "\n";
  return out;
}

std::string parse(std::string_view text) { return describe(parse_comment(text), text); }

TEST(SuppressionParser, NoqaBare) {
  EXPECT_EQ(parse("# noqa"), "noqa @0-6 '# noqa'\n");
  EXPECT_EQ(parse("#noqa"), "noqa @0-5 '#noqa'\n");
  EXPECT_EQ(parse("# NOQA  "), "noqa @0-6 '# NOQA'\n");
}

TEST(SuppressionParser, NoqaCodes) {
  EXPECT_EQ(parse("# noqa: TL001"), "noqa @0-13 '# noqa: TL001' [TL001@8-13]\n");
  EXPECT_EQ(parse("# noqa: TL001, TL006"), "noqa @0-20 '# noqa: TL001, TL006' [TL001@8-13] [TL006@15-20]\n");
  EXPECT_EQ(parse("# noqa:TL001,E501"), "noqa @0-17 '# noqa:TL001,E501' [TL001@7-12] [E501@13-17]\n");
  EXPECT_EQ(parse("# noqa: TL001 TL006"), "noqa @0-19 '# noqa: TL001 TL006' [TL001@8-13] [TL006@14-19]\n");
}

TEST(SuppressionParser, NoqaListEndsAtTheFirstWordThatIsNotACode) {
  EXPECT_EQ(parse("# noqa: TL001 the total is a float"), "noqa @0-13 '# noqa: TL001' [TL001@8-13]\n");
}

TEST(SuppressionParser, NoqaAfterAnotherComment) {
  EXPECT_EQ(parse("# type: ignore  # noqa: TL001"), "noqa @16-29 '# noqa: TL001' [TL001@24-29]\n");
}

TEST(SuppressionParser, NotNoqa) {
  EXPECT_EQ(parse("# noqaxyz"), "");
  EXPECT_EQ(parse("# we do not noqa this"), "");
  EXPECT_EQ(parse("# a plain comment"), "");
}

TEST(SuppressionParser, NoqaWithoutCodesIsIgnoredWithAProblem) {
  std::string expected =
      "problem: invalid `# noqa` directive: expected a comma-separated list of codes after `noqa:` "
      "(e.g. `# noqa: TL001, TL006`)\n";
  EXPECT_EQ(parse("# noqa: ???"), expected);
  EXPECT_EQ(parse("# noqa:"), expected);
  EXPECT_EQ(parse("# noqa: because"), expected);
}

TEST(SuppressionParser, TorchleakIgnore) {
  EXPECT_EQ(parse("# torchleak: ignore[TL001]"), "torchleak: ignore @0-26 '# torchleak: ignore[TL001]' [TL001@20-25]\n");
  EXPECT_EQ(parse("# torchleak: ignore[accumulate-undetached, TL006]"),
            "torchleak: ignore @0-49 '# torchleak: ignore[accumulate-undetached, TL006]' "
            "[accumulate-undetached@20-41] [TL006@43-48]\n");
  EXPECT_EQ(parse("#torchleak:ignore [ TL001 ]"), "torchleak: ignore @0-27 '#torchleak:ignore [ TL001 ]' [TL001@20-25]\n");
  EXPECT_EQ(parse("# torchleak: ignore"), "torchleak: ignore @0-19 '# torchleak: ignore'\n");
  EXPECT_EQ(parse("// torchleak: ignore[TL001]"), "torchleak: ignore @0-27 '// torchleak: ignore[TL001]' [TL001@21-26]\n");
}

TEST(SuppressionParser, TorchleakSkipFile) {
  EXPECT_EQ(parse("# torchleak: skip-file"), "torchleak: skip-file @0-22 '# torchleak: skip-file'\n");
}

TEST(SuppressionParser, TorchleakGarbageIsIgnoredWithAProblem) {
  EXPECT_EQ(parse("# torchleak: ignore[TL001"),
            "problem: invalid `torchleak: ignore` directive: `[` is not closed by `]`\n");
  EXPECT_EQ(parse("# torchleak: ignore[]"), "problem: invalid `torchleak: ignore` directive: `[]` names no rule\n");
  EXPECT_EQ(parse("# torchleak: ignore[TL001; TL006]"),
            "problem: invalid `torchleak: ignore` directive: expected rule codes or names separated by commas in "
            "`[TL001; TL006]`\n");
  EXPECT_EQ(parse("# torchleak: ignroe[TL001]"),
            "problem: unknown directive `torchleak: ignroe` (expected `torchleak: ignore[<rules>]`, "
            "`torchleak: noqa: <codes>` or `torchleak: skip-file`)\n");
}

TEST(SuppressionParser, ProseAboutTorchleakIsNotADirective) {
  EXPECT_EQ(parse("# torchleak flags this loop, see the docs"), "");
  EXPECT_EQ(parse("# run torchleak: it is fast"), "");
}

TEST(SuppressionParser, Nolint) {
  EXPECT_EQ(parse("// NOLINT"), "NOLINT @3-9 'NOLINT'\n");
  EXPECT_EQ(parse("// NOLINT(torchleak-accumulate-undetached)"),
            "NOLINT @3-42 'NOLINT(torchleak-accumulate-undetached)' [torchleak-accumulate-undetached@10-41]\n");
  EXPECT_EQ(parse("// NOLINTNEXTLINE(torchleak-*, bugprone-use-after-move)"),
            "NOLINTNEXTLINE @3-55 'NOLINTNEXTLINE(torchleak-*, bugprone-use-after-move)' [torchleak-*@18-29] "
            "[bugprone-use-after-move@31-54]\n");
  EXPECT_EQ(parse("// NOLINTBEGIN(torchleak-TL001)"), "NOLINTBEGIN @3-31 'NOLINTBEGIN(torchleak-TL001)' [torchleak-TL001@15-30]\n");
  EXPECT_EQ(parse("// NOLINTEND"), "NOLINTEND @3-12 'NOLINTEND'\n");
  EXPECT_EQ(parse("/* NOLINT */"), "NOLINT @3-9 'NOLINT'\n");
}

TEST(SuppressionParser, NolintGarbage) {
  EXPECT_EQ(parse("// NOLINTED by hand"), "");
  EXPECT_EQ(parse("// NOLINT(torchleak-accumulate-undetached"),
            "problem: invalid `NOLINT` directive: `(` is not closed by `)`\n");
  EXPECT_EQ(parse("// NOLINT()"), "problem: invalid `NOLINT` directive: `()` names no rule\n");
}

TEST(SuppressionParser, MayHoldDirective) {
  EXPECT_TRUE(may_hold_directive("# noqa"));
  EXPECT_TRUE(may_hold_directive("# NoQa: TL001"));
  EXPECT_TRUE(may_hold_directive("# torchleak: skip-file"));
  EXPECT_TRUE(may_hold_directive("// NOLINTNEXTLINE"));
  EXPECT_FALSE(may_hold_directive("# compute the loss"));
  EXPECT_FALSE(may_hold_directive("# nolint"));
}

TEST(SuppressionParser, CodesNameRules) {
  const RuleInfo& tl001 = *Catalogue::builtin().find("TL001");
  EXPECT_TRUE(code_names_rule(DirectiveKind::Noqa, "TL001", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::Noqa, "tl001", tl001));
  EXPECT_FALSE(code_names_rule(DirectiveKind::Noqa, "accumulate-undetached", tl001));  // noqa takes codes
  EXPECT_FALSE(code_names_rule(DirectiveKind::Noqa, "TL0", tl001));                    // no prefixes
  EXPECT_TRUE(code_names_rule(DirectiveKind::Ignore, "accumulate-undetached", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::Ignore, "TL001", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::Nolint, "torchleak-accumulate-undetached", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::Nolint, "torchleak-*", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::Nolint, "torchleak-accumulate-*", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::Nolint, "*", tl001));
  EXPECT_TRUE(code_names_rule(DirectiveKind::NolintNextLine, "torchleak-TL001", tl001));
  EXPECT_FALSE(code_names_rule(DirectiveKind::Nolint, "bugprone-*", tl001));
  EXPECT_FALSE(code_names_rule(DirectiveKind::Nolint, "accumulate-undetached", tl001));

  EXPECT_TRUE(code_is_torchleaks(DirectiveKind::Noqa, "TL001"));
  EXPECT_FALSE(code_is_torchleaks(DirectiveKind::Noqa, "E501"));
  EXPECT_FALSE(code_is_torchleaks(DirectiveKind::Noqa, "TLX1"));
  EXPECT_TRUE(code_is_torchleaks(DirectiveKind::Ignore, "anything"));
  EXPECT_TRUE(code_is_torchleaks(DirectiveKind::Nolint, "torchleak-*"));
  EXPECT_FALSE(code_is_torchleaks(DirectiveKind::Nolint, "*"));
}

TEST(SuppressionParser, CommentAtGivesWhatDeletingItRemoves) {
  std::string text = "x = 1  # noqa: TL001\n    # torchleak: ignore\ny = 2\nint z; /* NOLINT */ int w;\n";
  Comment trailing = comment_at(text, 7, 20, 1, 7);
  EXPECT_EQ(trailing.text, "# noqa: TL001");
  EXPECT_EQ(trailing.line_text, "x = 1  # noqa: TL001");
  EXPECT_EQ(text.substr(trailing.remove_start, trailing.remove_end - trailing.remove_start), "  # noqa: TL001");
  Comment own_line = comment_at(text, 25, 44, 2, 4);
  EXPECT_EQ(own_line.text, "# torchleak: ignore");
  EXPECT_EQ(text.substr(own_line.remove_start, own_line.remove_end - own_line.remove_start),
            "    # torchleak: ignore\n");
  Comment between = comment_at(text, 58, 70, 4, 7);
  EXPECT_EQ(between.text, "/* NOLINT */");
  EXPECT_EQ(text.substr(between.remove_start, between.remove_end - between.remove_start), "/* NOLINT */ ");
}

// --- FileSuppressions on its own (the C++ forms: no C++ frontend needed) ----

Diagnostic finding(const std::string& rule, uint32_t line) {
  Diagnostic d;
  d.rule_id = rule;
  d.path = "f.cpp";
  d.start = {line, 2};
  d.end = {line, 8};
  return d;
}

// Comments of a C++ source: each `//` comment from its start to its line's end.
std::vector<Comment> cpp_comments(const std::string& text) {
  std::vector<Comment> out;
  uint32_t line = 1;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    size_t c = text.find("//", begin);
    if (c != std::string::npos && c < end)
      out.push_back(comment_at(text, static_cast<uint32_t>(c), static_cast<uint32_t>(end), line,
                               static_cast<uint32_t>(c - begin)));
    begin = end + 1;
    ++line;
  }
  return out;
}

const RuleInfo& tl001() { return *Catalogue::builtin().find("TL001"); }

TEST(FileSuppressions, NolintAppliesToItsLine) {
  std::string src =
      "total += loss;  // NOLINT(torchleak-accumulate-undetached)\n"  // 1
      "total += loss;\n"                                              // 2
      "total += loss;  // NOLINT(bugprone-*)\n"                       // 3
      "total += loss;  // NOLINT\n";                                  // 4
  FileSuppressions s(cpp_comments(src), 0, Catalogue::builtin());
  EXPECT_TRUE(s.suppresses(finding("TL001", 1), tl001()));
  EXPECT_FALSE(s.suppresses(finding("TL001", 2), tl001()));
  EXPECT_FALSE(s.suppresses(finding("TL001", 3), tl001()));
  EXPECT_TRUE(s.suppresses(finding("TL001", 4), tl001()));
  EXPECT_TRUE(s.notes().empty());
}

TEST(FileSuppressions, NolintNextLineAppliesToTheNextLineOnly) {
  std::string src =
      "// NOLINTNEXTLINE(torchleak-*)\n"  // 1
      "total += loss;\n"                  // 2
      "total += loss;\n";                 // 3
  FileSuppressions s(cpp_comments(src), 0, Catalogue::builtin());
  EXPECT_FALSE(s.suppresses(finding("TL001", 1), tl001()));
  EXPECT_TRUE(s.suppresses(finding("TL001", 2), tl001()));
  EXPECT_FALSE(s.suppresses(finding("TL001", 3), tl001()));
}

TEST(FileSuppressions, NolintBeginEndCoversItsRegion) {
  std::string src =
      "total += loss;\n"                                       // 1
      "// NOLINTBEGIN(torchleak-accumulate-undetached)\n"      // 2
      "total += loss;\n"                                       // 3
      "total += loss;\n"                                       // 4
      "// NOLINTEND(torchleak-accumulate-undetached)\n"        // 5
      "total += loss;\n";                                      // 6
  FileSuppressions s(cpp_comments(src), 0, Catalogue::builtin());
  EXPECT_FALSE(s.suppresses(finding("TL001", 1), tl001()));
  EXPECT_TRUE(s.suppresses(finding("TL001", 3), tl001()));
  EXPECT_TRUE(s.suppresses(finding("TL001", 4), tl001()));
  EXPECT_FALSE(s.suppresses(finding("TL001", 6), tl001()));
}

TEST(FileSuppressions, UnmatchedNolintBeginOrEndIsIgnoredWithANote) {
  std::string src =
      "// NOLINTEND(torchleak-*)\n"    // 1
      "// NOLINTBEGIN(torchleak-*)\n"  // 2
      "total += loss;\n"               // 3
      "// NOLINTEND(bugprone-*)\n";    // 4
  FileSuppressions s(cpp_comments(src), 0, Catalogue::builtin());
  EXPECT_FALSE(s.suppresses(finding("TL001", 3), tl001()));
  EXPECT_EQ(s.notes(), (std::vector<std::string>{
                           "line 1: `NOLINTEND` without a matching `NOLINTBEGIN`; ignored",
                           "line 4: `NOLINTEND` without a matching `NOLINTBEGIN`; ignored",
                           "line 2: `NOLINTBEGIN` without a matching `NOLINTEND`; ignored",
                       }));
}

TEST(FileSuppressions, UnusedNolintBeginIsReportedWithAFixRemovingBothEnds) {
  std::string src =
      "int a;\n"                                            // 1
      "// NOLINTBEGIN(torchleak-accumulate-undetached)\n"   // 2
      "int b;\n"                                            // 3
      "// NOLINTEND(torchleak-accumulate-undetached)\n"     // 4
      "int c;\n";                                           // 5
  FileSuppressions s(cpp_comments(src), 0, Catalogue::builtin());
  auto unused = s.unused(*Catalogue::builtin().find("TL100"), "f.cpp", [](const RuleInfo&) { return true; });
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0].start, (Position{2, 3}));
  EXPECT_EQ(unused[0].message, "Unused `NOLINTBEGIN` directive (unused: `torchleak-accumulate-undetached`)");
  ASSERT_TRUE(unused[0].fix);
  std::string fixed = src;
  auto edits = unused[0].fix->edits;
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.start_byte > b.start_byte; });
  for (const auto& e : edits) fixed.replace(e.start_byte, e.end_byte - e.start_byte, e.replacement);
  EXPECT_EQ(fixed, "int a;\nint b;\nint c;\n");
}

// --- end to end: Python sources through the engine, TL001 findings -----------

// A training loop: line 11 is `total += loss` (TL001), followed by `suffix`.
std::string train(const std::string& suffix, const std::string& header = "") {
  return header +
         "import torch\n"
         "\n"
         "\n"
         "def train(model, loader, optimizer, criterion):\n"
         "    total = 0.0\n"
         "    for x, y in loader:\n"
         "        optimizer.zero_grad()\n"
         "        loss = criterion(model(x), y)\n"
         "        loss.backward()\n"
         "        optimizer.step()\n"
         "        total += loss" +
         suffix +
         "\n"
         "    return total\n";
}

struct Outcome {
  std::vector<std::string> findings;  // "TL001:11:9"
  std::vector<std::string> notes;
  std::vector<Diagnostic> diagnostics;
};

// The rules these tests are about (other rules have their own fixtures).
Config tl001_and_tl004() {
  Config c;
  c.select = {"TL001", "TL004"};
  return c;
}

Outcome analyze(const std::string& text, bool report_unused = false, const Config& config = tl001_and_tl004()) {
  RunResult r = run_sources({SourceFile{"train.py", text}}, config, 1, report_unused);
  Outcome o;
  for (const auto& d : r.diagnostics)
    o.findings.push_back(d.rule_id + ":" + std::to_string(d.start.line) + ":" + std::to_string(d.start.column + 1));
  for (const auto& n : r.notes) o.notes.push_back(n.message);
  for (const auto& e : r.errors) ADD_FAILURE() << e.message;
  o.diagnostics = r.diagnostics;
  return o;
}

using Strings = std::vector<std::string>;

TEST(Suppressions, TheUnsuppressedLoopHasOneFinding) {
  EXPECT_EQ(analyze(train("")).findings, Strings{"TL001:11:9"});
}

TEST(Suppressions, EveryFormSilencesTheFinding) {
  for (const char* comment : {"  # noqa: TL001", "  # noqa: TL001, TL004", "  # noqa:TL001", "  # NOQA: tl001",
                              "  # noqa", "  # torchleak: ignore[TL001]",
                              "  # torchleak: ignore[accumulate-undetached]", "  # torchleak: ignore",
                              "  # type: ignore  # noqa: TL001", "  # noqa: E501, TL001"}) {
    Outcome o = analyze(train(comment));
    EXPECT_EQ(o.findings, Strings{}) << comment;
    EXPECT_EQ(o.notes, Strings{}) << comment;
  }
}

TEST(Suppressions, OtherRulesCodesDoNotSilenceIt) {
  for (const char* comment : {"  # noqa: TL004", "  # noqa: E501", "  # torchleak: ignore[TL004]",
                              "  # torchleak: ignore[missing-worker-init-fn]", "  # noqa: accumulate-undetached"}) {
    EXPECT_EQ(analyze(train(comment)).findings, Strings{"TL001:11:9"}) << comment;
  }
}

TEST(Suppressions, ADirectiveCoversOnlyItsOwnLine) {
  std::string text = train("");
  // On the line above the finding and on the line below, it silences nothing.
  std::string above = text;
  above.insert(above.find("        total += loss"), "        # noqa: TL001\n");
  EXPECT_EQ(analyze(above).findings, Strings{"TL001:12:9"});
  std::string below = text;
  below.replace(below.find("    return total"), 16, "    return total  # noqa");
  EXPECT_EQ(analyze(below).findings, Strings{"TL001:11:9"});
}

TEST(Suppressions, ADirectiveInAStringIsNotASuppression) {
  std::string text = train("; note = \"# noqa: TL001\"");
  EXPECT_EQ(analyze(text).findings, Strings{"TL001:11:9"});
}

TEST(Suppressions, GarbageIsIgnoredWithANoteAndTheFindingStays) {
  Outcome unclosed = analyze(train("  # torchleak: ignore[TL001"));
  EXPECT_EQ(unclosed.findings, Strings{"TL001:11:9"});
  EXPECT_EQ(unclosed.notes,
            Strings{"line 11: invalid `torchleak: ignore` directive: `[` is not closed by `]`; ignored"});
  Outcome no_codes = analyze(train("  # noqa: ???"));
  EXPECT_EQ(no_codes.findings, Strings{"TL001:11:9"});
  EXPECT_EQ(no_codes.notes, Strings{"line 11: invalid `# noqa` directive: expected a comma-separated list of codes "
                                    "after `noqa:` (e.g. `# noqa: TL001, TL006`); ignored"});
  Outcome unknown = analyze(train("  # noqa: TL999"));
  EXPECT_EQ(unknown.findings, Strings{"TL001:11:9"});
  EXPECT_EQ(unknown.notes, Strings{"line 11: `noqa` names no torchleak rule: `TL999`; ignored"});
  Outcome unknown_name = analyze(train("  # torchleak: ignore[accumulate-undetatched]"));
  EXPECT_EQ(unknown_name.findings, Strings{"TL001:11:9"});
  EXPECT_EQ(unknown_name.notes,
            Strings{"line 11: `torchleak: ignore` names no torchleak rule: `accumulate-undetatched`; ignored"});
}

TEST(Suppressions, AnUnknownCodeBesideAKnownOneKeepsTheKnownOne) {
  Outcome o = analyze(train("  # noqa: TL999, TL001"));
  EXPECT_EQ(o.findings, Strings{});
  EXPECT_EQ(o.notes, Strings{"line 11: `noqa` names no torchleak rule: `TL999`; ignored"});
}

TEST(Suppressions, SkipFileAtTheTopSkipsTheFile) {
  EXPECT_EQ(analyze(train("", "# torchleak: skip-file\n")).findings, Strings{});
  EXPECT_EQ(analyze(train("", "#!/usr/bin/env python3\n# Copyright notice\n\n# torchleak: skip-file\n")).findings,
            Strings{});
  EXPECT_EQ(analyze(train("", "\"\"\"Training loop.\"\"\"\n# torchleak: skip-file\n")).findings, Strings{});
}

TEST(Suppressions, SkipFileBelowTheFirstStatementIsIgnoredWithANote) {
  std::string text = train("");
  text += "# torchleak: skip-file\n";
  Outcome o = analyze(text);
  EXPECT_EQ(o.findings, Strings{"TL001:11:9"});
  EXPECT_EQ(o.notes, Strings{"line 13: `torchleak: skip-file` below the first statement (line 1); ignored: put it at "
                             "the top of the file"});
  // Trailing a statement on line 1 is below it too.
  Outcome trailing = analyze(train("", "import os  # torchleak: skip-file\n"));
  EXPECT_EQ(trailing.findings, Strings{"TL001:12:9"});
}

TEST(Suppressions, AByteOrderMarkKeepsFixesOfUnusedSuppressionsInPlace) {
  std::string text = "\xEF\xBB\xBFx = 1  # noqa: TL001\n";
  Outcome o = analyze(text, true);
  ASSERT_EQ(o.diagnostics.size(), 1u);
  ASSERT_TRUE(o.diagnostics[0].fix);
  const Edit& e = o.diagnostics[0].fix->edits.at(0);
  EXPECT_EQ(text.substr(e.start_byte, e.end_byte - e.start_byte), "  # noqa: TL001");
}

// --- unused suppressions (TL100) ----------------------------------------------

std::string apply_fix(std::string text, const Diagnostic& d) {
  if (!d.fix) return text;
  auto edits = d.fix->edits;
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.start_byte > b.start_byte; });
  for (const auto& e : edits) text.replace(e.start_byte, e.end_byte - e.start_byte, e.replacement);
  return text;
}

// A clean loop (the total is a number): line 11 is `total += loss.item()` + `suffix`.
std::string clean(const std::string& suffix) {
  std::string text = train(suffix);
  text.replace(text.find("total += loss"), 13, "total += loss.item()");
  return text;
}

TEST(UnusedSuppressions, NotReportedUnlessAskedFor) {
  EXPECT_EQ(analyze(clean("  # noqa: TL001")).findings, Strings{});
}

TEST(UnusedSuppressions, AnUnusedNoqaIsReportedAndItsFixRemovesTheComment) {
  std::string text = clean("  # noqa: TL001");
  Outcome o = analyze(text, true);
  ASSERT_EQ(o.findings, Strings{"TL100:11:31"});
  const Diagnostic& d = o.diagnostics[0];
  EXPECT_EQ(d.message, "Unused `noqa` directive (unused: `TL001`)");
  EXPECT_EQ(d.source_line, "        total += loss.item()  # noqa: TL001");
  EXPECT_EQ(d.end, (Position{11, 43}));
  ASSERT_TRUE(d.fix);
  EXPECT_EQ(d.fix->safety, FixSafety::Safe);
  EXPECT_EQ(apply_fix(text, d), clean(""));
}

TEST(UnusedSuppressions, EveryFormWhenUnused) {
  struct Case {
    const char* comment;
    const char* message;
    std::string fixed;
  };
  std::vector<Case> cases = {
      {"  # torchleak: ignore[TL001]", "Unused `torchleak: ignore` directive (unused: `TL001`)", clean("")},
      {"  # torchleak: ignore[accumulate-undetached]",
       "Unused `torchleak: ignore` directive (unused: `accumulate-undetached`)", clean("")},
      {"  # torchleak: ignore", "Unused `torchleak: ignore` directive: it silences nothing", clean("")},
      // Another tool's code stays; only torchleak's goes.
      {"  # noqa: E501, TL001", "Unused `noqa` directive (unused: `TL001`)", clean("  # noqa: E501")},
      {"  # noqa: TL001, E501", "Unused `noqa` directive (unused: `TL001`)", clean("  # noqa: E501")},
      // The explanation after the codes goes with them; a following comment stays.
      {"  # noqa: TL001 the total is a float", "Unused `noqa` directive (unused: `TL001`)", clean("")},
      {"  # noqa: TL001  # keep", "Unused `noqa` directive (unused: `TL001`)", clean("  # keep")},
      {"  # type: ignore  # noqa: TL001", "Unused `noqa` directive (unused: `TL001`)", clean("  # type: ignore")},
  };
  for (const auto& c : cases) {
    std::string text = clean(c.comment);
    Outcome o = analyze(text, true);
    ASSERT_EQ(o.diagnostics.size(), 1u) << c.comment;
    EXPECT_EQ(o.diagnostics[0].rule_id, "TL100") << c.comment;
    EXPECT_EQ(o.diagnostics[0].message, c.message) << c.comment;
    EXPECT_EQ(apply_fix(text, o.diagnostics[0]), c.fixed) << c.comment;
  }
}

TEST(UnusedSuppressions, CrlfLineEndsAreKept) {
  std::string text = clean("  # noqa: TL001");
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  Outcome o = analyze(crlf, true);
  ASSERT_EQ(o.findings, Strings{"TL100:11:31"});
  std::string expected;
  for (char c : clean("")) expected += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_EQ(apply_fix(crlf, o.diagnostics[0]), expected);
  // An own-line directive goes with its whole line, terminator included.
  std::string own = clean("");
  own.insert(own.find("        total += loss"), "        # noqa: TL001\n");
  std::string own_crlf;
  for (char c : own) own_crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  Outcome o2 = analyze(own_crlf, true);
  ASSERT_EQ(o2.findings, Strings{"TL100:11:9"});
  EXPECT_EQ(apply_fix(own_crlf, o2.diagnostics[0]), expected);
}

TEST(UnusedSuppressions, OnlyTheUnusedCodesOfAListGo) {
  // TL001 silences the finding; TL004 ran on this file and found nothing here.
  std::string text = train("  # noqa: TL004, TL001");
  Outcome o = analyze(text, true);
  ASSERT_EQ(o.findings, Strings{"TL100:11:24"});
  EXPECT_EQ(o.diagnostics[0].message, "Unused `noqa` directive (unused: `TL004`)");
  EXPECT_EQ(apply_fix(text, o.diagnostics[0]), train("  # noqa: TL001"));
}

TEST(UnusedSuppressions, AnOwnLineDirectiveGoesWithItsLine) {
  std::string text = clean("");
  text.insert(text.find("        total += loss"), "        # torchleak: ignore[TL001]\n");
  Outcome o = analyze(text, true);
  ASSERT_EQ(o.findings, Strings{"TL100:11:9"});
  EXPECT_EQ(apply_fix(text, o.diagnostics[0]), clean(""));
}

TEST(UnusedSuppressions, BareNoqaIsSharedWithOtherToolsAndNeverReported) {
  EXPECT_EQ(analyze(clean("  # noqa"), true).findings, Strings{});
  EXPECT_EQ(analyze(clean("  # noqa: E501"), true).findings, Strings{});
}

TEST(UnusedSuppressions, CodesOfRulesThatDidNotRunAreNotJudged) {
  Config only_tl004;
  only_tl004.select = {"TL004"};
  EXPECT_EQ(analyze(clean("  # noqa: TL001"), true, only_tl004).findings, Strings{});
  Config ignore_tl001 = tl001_and_tl004();
  ignore_tl001.ignore = {"TL001"};
  EXPECT_EQ(analyze(clean("  # noqa: TL001"), true, ignore_tl001).findings, Strings{});
  Config per_file = tl001_and_tl004();
  per_file.per_file_ignores = {{"train.py", {"TL001"}}};
  EXPECT_EQ(analyze(clean("  # noqa: TL001"), true, per_file).findings, Strings{});
}

TEST(UnusedSuppressions, TL100CanBeIgnoredOrSuppressed) {
  Config ignore_tl100 = tl001_and_tl004();
  ignore_tl100.ignore = {"TL100"};
  EXPECT_EQ(analyze(clean("  # noqa: TL001"), true, ignore_tl100).findings, Strings{});
  EXPECT_EQ(analyze(clean("  # noqa: TL001, TL100"), true).findings, Strings{});
}

TEST(UnusedSuppressions, AUsedDirectiveIsNotReported) {
  EXPECT_EQ(analyze(train("  # noqa: TL001"), true).findings, Strings{});
  EXPECT_EQ(analyze(train("  # torchleak: ignore"), true).findings, Strings{});
}

TEST(UnusedSuppressions, NothingIsReportedInASkippedFile) {
  EXPECT_EQ(analyze("# torchleak: skip-file\nx = 1  # noqa: TL001\n", true).findings, Strings{});
}

}  // namespace
