// The fix engine: edits applied, re-parsed, written atomically with the
// file's mode and line endings, and a second run changes nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/analysis.h"
#include "core/fixer.h"

namespace fs = std::filesystem;
using namespace torchleak;

namespace {

const char* kLeaky =
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
    "        total += loss\n"
    "        total = total + criterion(model(x), y) * 0.5\n"
    "    return total\n";

// kLeaky with its two safe fixes: the total starts as a number and is only
// added to, so the losses are accumulated as Python numbers.
const char* kFixed =
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
    "        total += loss.item()\n"
    "        total = total + criterion(model(x), y).item() * 0.5\n"
    "    return total\n";

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/torchleak-fixer-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name, const std::string& text) const {
    std::string p = (fs::path(path_) / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunOptions options_for(const std::string& path) {
  RunOptions o;
  o.paths = {path};
  o.jobs = 1;
  o.use_config_files = false;
  return o;
}

TEST(ApplyEdits, SkipsOverlapsAndKeepsOrder) {
  int applied = 0;
  std::string out = apply_edits("abcdef", {{4, 4, "X"}, {1, 3, "Y"}, {2, 5, "Z"}}, &applied);
  EXPECT_EQ(out, "aYdXef");
  EXPECT_EQ(applied, 2);
}

TEST(Fixer, AppliesSafeFixesAndIsIdempotent) {
  TempDir dir;
  std::string path = dir.file("train.py", kLeaky);
  ::chmod(path.c_str(), 0754);
  FixReport report = fix(options_for(path), {});
  ASSERT_EQ(report.fixes_applied, 2);
  EXPECT_TRUE(report.remaining.diagnostics.empty());
  std::string fixed = read(path);
  EXPECT_EQ(fixed, kFixed);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0754u);
  FixReport again = fix(options_for(path), {});
  EXPECT_EQ(again.fixes_applied, 0);
  EXPECT_EQ(read(path), fixed);
  // No temporary file is left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Fixer, KeepsCrlfLineEndings) {
  TempDir dir;
  std::string crlf;
  for (char c : std::string(kLeaky)) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  std::string path = dir.file("train.py", crlf);
  FixReport report = fix(options_for(path), {});
  EXPECT_EQ(report.fixes_applied, 2);
  std::string fixed = read(path);
  std::string expected;
  for (char c : std::string(kFixed)) {
    if (c == '\n') expected += '\r';
    expected += c;
  }
  EXPECT_EQ(fixed, expected);  // no bare LF was introduced
}

TEST(Fixer, DiffModeWritesNothing) {
  TempDir dir;
  std::string path = dir.file("train.py", kLeaky);
  FixOptions fo;
  fo.write = false;
  FixReport report = fix(options_for(path), fo);
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_EQ(read(path), kLeaky);
  EXPECT_EQ(unified_diff("train.py", report.files[0].original, report.files[0].fixed),
            "--- a/train.py\n"
            "+++ b/train.py\n"
            "@@ -8,6 +8,6 @@\n"
            "         loss = criterion(model(x), y)\n"
            "         loss.backward()\n"
            "         optimizer.step()\n"
            "-        total += loss\n"
            "-        total = total + criterion(model(x), y) * 0.5\n"
            "+        total += loss.item()\n"
            "+        total = total + criterion(model(x), y).item() * 0.5\n"
            "     return total\n");
}

TEST(Fixer, ParseCheckRejectsBrokenSyntax) {
  const LanguageFrontend* python = frontend_for("x.py");
  ASSERT_NE(python, nullptr);
  EXPECT_TRUE(python->parses("x = (1 + 2)\n"));
  EXPECT_FALSE(python->parses("x = (1 + \n"));
}

}  // namespace

// One suppression edit for --add-noqa and the language server's "Suppress"
// action: the text each writes, from the same function.
namespace {
std::string suppressed(const std::string& program, size_t at, std::set<std::string> ids, bool cpp) {
  std::string why;
  std::optional<Edit> e = suppression_edit(program, at, ids, cpp, &why);
  if (!e) return "none: " + why;
  return apply_edits(program, {*e}, nullptr);
}
}  // namespace

TEST(SuppressionEdit, AddsOrExtendsANoqaListInPython) {
  EXPECT_EQ(suppressed("a = 1\ntotal += loss   \nb = 2\n", 8, {"TL001"}, false),
            "a = 1\ntotal += loss  # noqa: TL001\nb = 2\n");
  EXPECT_EQ(suppressed("total += loss  # noqa: TL006\n", 0, {"TL001"}, false), "total += loss  # noqa: TL006, TL001\n");
  EXPECT_EQ(suppressed("x = f(a, b)\n", 0, {"TL006", "TL001"}, false), "x = f(a, b)  # noqa: TL001, TL006\n");
  // A `#` inside a string is no comment: a new directive, not an extension.
  EXPECT_EQ(suppressed("log('# noqa: x', loss)\n", 0, {"TL002"}, false), "log('# noqa: x', loss)  # noqa: TL002\n");
  EXPECT_EQ(suppressed("total += loss + \\\n    aux\n", 0, {"TL001"}, false), "none: continued with a backslash");
}

TEST(SuppressionEdit, NamesTheClangTidyCheckInCpp) {
  EXPECT_EQ(suppressed("  total += loss;\n", 4, {"TL001"}, true),
            "  total += loss;  // NOLINT(torchleak-accumulate-undetached)\n");
  EXPECT_EQ(suppressed("f(x);", 0, {"TL001", "TL002"}, true),
            "f(x);  // NOLINT(torchleak-accumulate-undetached,torchleak-append-undetached)");
}
