// The baseline: the file written, read back, its errors, and a finding's
// identity surviving edits elsewhere in its file (lines added or removed
// above it, reformatting), while new findings still show.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/baseline.h"
#include "core/engine.h"

namespace fs = std::filesystem;
using namespace torchleak;

namespace {

using Strings = std::vector<std::string>;

// Two functions with one leak each (lines 7 and 15).
const char* kTrain =
    "def train(model, loader, optimizer, criterion):\n"
    "    total = 0.0\n"
    "    for x, y in loader:\n"
    "        loss = criterion(model(x), y)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
    "        total += loss\n"
    "    return total\n"
    "\n"
    "\n"
    "def evaluate(model, loader, criterion):\n"
    "    total = 0.0\n"
    "    for x, y in loader:\n"
    "        loss = criterion(model(x), y)\n"
    "        total += loss\n"
    "    return total\n";

// TL001's findings only: other rules (TL006 on `evaluate`) have their own tests.
std::vector<Diagnostic> analyze(const std::string& path, const std::string& text) {
  Config tl001;
  tl001.select = {"TL001"};
  RunResult r = run_sources({SourceFile{path, text}}, tl001);
  for (const auto& e : r.errors) ADD_FAILURE() << e.message;
  return r.diagnostics;
}

Strings lines(const std::vector<Diagnostic>& ds) {
  Strings out;
  for (const auto& d : ds) out.push_back(d.rule_id + " " + d.path + ":" + std::to_string(d.start.line) + " " + d.context);
  return out;
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(Baseline, TheFileItWrites) {
  auto found = analyze("src/train.py", kTrain);
  ASSERT_EQ(lines(found), (Strings{"TL001 src/train.py:7 train", "TL001 src/train.py:15 evaluate"}));
  Baseline b = Baseline::record(found, "baseline.json");
  std::string fp_train = finding_fingerprint(found[0]);
  std::string fp_eval = finding_fingerprint(found[1]);
  EXPECT_EQ(fp_train, fp_eval);  // the same statement text: told apart by the function
  EXPECT_EQ(fp_train.size(), 16u);
  EXPECT_EQ(b.serialize(),
            "{\n"
            "  \"version\": 1,\n"
            "  \"tool\": \"torchleak\",\n"
            "  \"findings\": [\n"
            "    {\"rule\":\"TL001\",\"path\":\"src/train.py\",\"context\":\"evaluate\",\"fingerprint\":\"" +
                fp_eval +
                "\",\"count\":1},\n"
                "    {\"rule\":\"TL001\",\"path\":\"src/train.py\",\"context\":\"train\",\"fingerprint\":\"" +
                fp_train +
                "\",\"count\":1}\n"
                "  ]\n"
                "}\n");
  EXPECT_EQ(b.findings(), 2u);
}

TEST(Baseline, AnEmptyBaseline) {
  EXPECT_EQ(Baseline::record({}, "b.json").serialize(),
            "{\n  \"version\": 1,\n  \"tool\": \"torchleak\",\n  \"findings\": []\n}\n");
}

TEST(Baseline, ReadsBackWhatItWrites) {
  auto found = analyze("train.py", kTrain);
  Baseline b = Baseline::record(found, "b.json");
  Baseline back = Baseline::parse(b.serialize(), "b.json", "b.json");
  EXPECT_EQ(back.entries(), b.entries());
}

TEST(Baseline, TheFingerprintIgnoresWhitespaceAndComments) {
  auto a = analyze("train.py", kTrain);
  auto b = analyze("train.py", replace(kTrain, "        total += loss\n    return total\n\n",
                                       "        total  +=   loss   # running sum\n    return total\n\n"));
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(finding_fingerprint(a[0]), finding_fingerprint(b[0]));
  auto c = analyze("train.py", replace(kTrain, "        total += loss\n    return total\n\n", "        total += (\n"
                                                                                          "            loss\n"
                                                                                          "        )\n"
                                                                                          "    return total\n\n"));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NE(finding_fingerprint(a[0]), finding_fingerprint(c[0]));  // parentheses are tokens: another text
  auto d = analyze("train.py", replace(kTrain, "        total += loss\n    return total\n\n",
                                       "        total += loss * 2\n    return total\n\n"));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NE(finding_fingerprint(a[0]), finding_fingerprint(d[0]));
}

TEST(Baseline, AFindingKeepsItsIdentityWhenLinesAreAddedAboveIt) {
  Baseline b = Baseline::record(analyze("train.py", kTrain), "b.json");
  std::string edited = std::string("\"\"\"Training and evaluation.\"\"\"\nimport logging\n\nlog = logging.getLogger()\n\n\n") +
                       replace(kTrain, "    total = 0.0\n", "    total = 0.0\n    log.info(\"training\")\n\n");
  auto found = analyze("train.py", edited);
  ASSERT_EQ(lines(found), (Strings{"TL001 train.py:15 train", "TL001 train.py:23 evaluate"}));
  EXPECT_EQ(b.filter(found), 0u);
  EXPECT_EQ(lines(found), Strings{});
}

TEST(Baseline, AFindingKeepsItsIdentityWhenLinesAreRemovedAboveIt) {
  std::string longer = std::string("import torch\nimport numpy as np\n\n\n") + kTrain;
  Baseline b = Baseline::record(analyze("train.py", longer), "b.json");
  auto found = analyze("train.py", kTrain);
  EXPECT_EQ(b.filter(found), 0u);
  EXPECT_EQ(lines(found), Strings{});
}

TEST(Baseline, NewFindingsStillShow) {
  Baseline b = Baseline::record(analyze("train.py", kTrain), "b.json");
  // A third leak, in a new function.
  std::string more = std::string(kTrain) +
                     "\n\n"
                     "def finetune(model, loader, criterion):\n"
                     "    running = 0.0\n"
                     "    for x, y in loader:\n"
                     "        running += criterion(model(x), y)\n"
                     "    return running\n";
  auto found = analyze("train.py", more);
  EXPECT_EQ(b.filter(found), 0u);
  EXPECT_EQ(lines(found), (Strings{"TL001 train.py:22 finetune"}));
  // The same statement in another file is another finding.
  auto elsewhere = analyze("other.py", kTrain);
  EXPECT_EQ(b.filter(elsewhere), 2u);
  EXPECT_EQ(lines(elsewhere), (Strings{"TL001 other.py:7 train", "TL001 other.py:15 evaluate"}));
}

TEST(Baseline, CountsAreConsumedSoADuplicateInTheSameFunctionShows) {
  Baseline b = Baseline::record(analyze("train.py", kTrain), "b.json");
  std::string twice = replace(kTrain, "        total += loss\n    return total\n\n",
                              "        total += loss\n        total += loss\n    return total\n\n");
  auto found = analyze("train.py", twice);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(b.filter(found), 0u);
  EXPECT_EQ(lines(found), (Strings{"TL001 train.py:8 train"}));
}

TEST(Baseline, FixedFindingsAreCounted) {
  Baseline b = Baseline::record(analyze("train.py", kTrain), "b.json");
  std::string fixed = replace(kTrain, "        total += loss\n    return total\n\n",
                              "        total += loss.item()\n    return total\n\n");
  auto found = analyze("train.py", fixed);
  EXPECT_EQ(b.filter(found), 1u);
  EXPECT_EQ(lines(found), Strings{});
}

TEST(Baseline, PathsAreRelativeToTheBaselinesDirectory) {
  fs::path cwd = fs::current_path();
  auto found = analyze("pkg/train.py", kTrain);
  Baseline b = Baseline::record(found, "pkg/.torchleak-baseline.json");
  ASSERT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(b.entries()[0].path, "train.py");
  // The same file named by its absolute path matches.
  auto absolute = analyze((cwd / "pkg/train.py").string(), kTrain);
  EXPECT_EQ(b.filter(absolute), 0u);
  EXPECT_EQ(absolute.size(), 0u);
  EXPECT_EQ(Baseline::record(found, "baseline.json").entries()[0].path, "pkg/train.py");
}

std::string parse_error(const std::string& text) {
  try {
    Baseline::parse(text, "b.json", "b.json");
  } catch (const BaselineError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BaselineErrors, EachMistakeIsNamed) {
  EXPECT_EQ(parse_error(""), "b.json: not a torchleak baseline: parse error at line 1, column 1: syntax error while "
                             "parsing value - unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(parse_error("{\"version\": 1,"),
            "b.json: not a torchleak baseline: parse error at line 1, column 15: syntax error while parsing object key "
            "- unexpected end of input; expected string literal");
  EXPECT_EQ(parse_error("[]"), "b.json: not a torchleak baseline: expected a JSON object");
  EXPECT_EQ(parse_error("{}"), "b.json: not a torchleak baseline: no \"version\" (write one with --write-baseline)");
  EXPECT_EQ(parse_error("{\"version\": 2, \"findings\": []}"),
            "b.json: not a torchleak baseline: version 2 is not supported (this torchleak reads version 1; rewrite it "
            "with --write-baseline)");
  EXPECT_EQ(parse_error("{\"version\": 1}"), "b.json: not a torchleak baseline: \"findings\" must be an array");
  EXPECT_EQ(parse_error("{\"version\": 1, \"findings\": [3]}"), "b.json: not a torchleak baseline: finding 1 is not an object");
  EXPECT_EQ(parse_error("{\"version\": 1, \"findings\": [{\"rule\": \"TL001\", \"path\": \"a.py\", \"context\": \"f\"}]}"),
            "b.json: not a torchleak baseline: finding 1 has no string \"fingerprint\"");
  EXPECT_EQ(parse_error("{\"version\": 1, \"findings\": [{\"rule\": \"TL001\", \"path\": \"a.py\", \"context\": \"f\", "
                        "\"fingerprint\": \"00\", \"count\": 0}]}"),
            "b.json: not a torchleak baseline: finding 1 has no positive integer \"count\"");
}

TEST(BaselineErrors, AMissingFile) {
  try {
    Baseline::load("no-such-dir/baseline.json");
    ADD_FAILURE() << "no error";
  } catch (const BaselineError& e) {
    EXPECT_STREQ(e.what(), "no-such-dir/baseline.json: cannot read the baseline: No such file or directory");
  }
}

}  // namespace
