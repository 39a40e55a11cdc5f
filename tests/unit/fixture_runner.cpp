// The fixture runner: every file under fixtures/python/ and fixtures/cpp/ is
// analyzed with every rule enabled, and the exact set of (rule, line[,
// column]) findings must equal its `# expect:` markers; the fixes must give
// the `<file>.fixed` beside it. A top-level file of a rule's folder is
// one project; a subfolder is one project of several files (cross-file facts).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/catalogue.h"
#include "core/engine.h"
#include "core/fixer.h"
#include "core/notebook.h"

namespace fs = std::filesystem;
using namespace torchleak;

namespace {

struct Expectation {
  std::string path;
  std::string rule;
  uint32_t line;
  uint32_t column;  // 1-based code points; 0 when the marker gives none
  bool safe_fix = false;  // `TL001:9 safe`: the finding's fix is marked safe
  bool operator<(const Expectation& o) const {
    return std::tie(path, line, rule) < std::tie(o.path, o.line, o.rule);
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Markers: `# expect: TL001` or `# expect: TL001:9, TL002` (column optional),
// and `// expect:` for C++.
std::vector<Expectation> markers(const std::string& path, const std::string& text) {
  static const std::regex marker(
      R"((?:#|//)\s*expect:\s*([A-Z]+[0-9]+(?::[0-9]+)?(?: safe)?(?:\s*,\s*[A-Z]+[0-9]+(?::[0-9]+)?(?: safe)?)*))");
  static const std::regex item(R"(([A-Z]+[0-9]+)(?::([0-9]+))?( safe)?)");
  std::vector<Expectation> out;
  std::istringstream in(text);
  std::string line;
  uint32_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (!std::regex_search(line, m, marker)) continue;
    std::string list = m[1];
    for (std::sregex_iterator it(list.begin(), list.end(), item), end; it != end; ++it) {
      uint32_t col = (*it)[2].matched ? static_cast<uint32_t>(std::stoul((*it)[2])) : 0;
      out.push_back({path, (*it)[1], n, col, (*it)[3].matched});
    }
  }
  return out;
}

uint32_t codepoints(std::string_view s, uint32_t bytes) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < bytes && i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  return n;
}

// The fixtures of one language: fixtures/<language>/<rule>/<file> is one
// project, a subfolder of a rule's folder is one project of several files.
std::vector<std::vector<fs::path>> projects(const std::string& language, const std::string& extension) {
  std::vector<std::vector<fs::path>> out;
  fs::path root = fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures" / language;
  if (!fs::exists(root)) return out;
  for (const auto& rule_dir : fs::directory_iterator(root)) {
    if (!rule_dir.is_directory()) continue;
    for (const auto& e : fs::directory_iterator(rule_dir)) {
      if (e.is_regular_file() && e.path().extension() == extension) {
        out.push_back({e.path()});
      } else if (e.is_directory()) {
        std::vector<fs::path> files;
        for (const auto& f : fs::recursive_directory_iterator(e))
          if (f.is_regular_file() && f.path().extension() == extension) files.push_back(f.path());
        std::sort(files.begin(), files.end());
        if (!files.empty()) out.push_back(files);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string describe(const std::set<Expectation>& s) {
  std::string out;
  for (const auto& e : s)
    out += "  " + fs::path(e.path).filename().string() + ":" + std::to_string(e.line) + ":" +
           std::to_string(e.column) + " " + e.rule + (e.safe_fix ? " safe" : "") + "\n";
  return out.empty() ? "  (none)\n" : out;
}

// The exact set of (rule, line[, column]) findings equals the markers; with
// `fix_safety`, also which findings carry a fix marked safe (`TL001:9 safe`).
void expect_findings_equal_markers(const RunResult& result, const std::vector<Expectation>& expected,
                                   const std::string& fixture, bool fix_safety = false) {
  for (const auto& e : result.errors) ADD_FAILURE() << e.path << ": " << e.message;
  std::set<Expectation> got, want;
  for (const auto& d : result.diagnostics) {
    // Compare columns only where the marker gives one.
    uint32_t col = codepoints(d.source_line, d.start.column) + 1;
    bool marker_has_column = std::any_of(expected.begin(), expected.end(), [&](const Expectation& e) {
      return e.path == d.path && e.line == d.start.line && e.rule == d.rule_id && e.column != 0;
    });
    bool safe = fix_safety && d.fix && d.fix->safety == FixSafety::Safe;
    got.insert({d.path, d.rule_id, d.start.line, marker_has_column ? col : 0, safe});
  }
  for (Expectation e : expected) {
    e.safe_fix = e.safe_fix && fix_safety;
    want.insert(e);
  }
  EXPECT_EQ(describe(got), describe(want)) << "fixture: " << fixture;
}

class Fixture : public ::testing::TestWithParam<std::vector<fs::path>> {};

std::string fmt_cell(const std::string& rule, uint32_t cell, uint32_t line, uint32_t column) {
  return "cell " + std::to_string(cell) + ":" + std::to_string(line) + ":" + std::to_string(column) + " " + rule;
}

std::string describe_set(const std::set<std::string>& s) {
  std::string out;
  for (const auto& e : s) out += "  " + e + "\n";
  return out.empty() ? "  (none)\n" : out;
}

// One analysis per project serves both comparisons (a C++ fixture costs a
// compilation): the fixer's first pass gives the findings, its last the
// fixed texts.
//  - The exact set of findings equals the `# expect:` markers, and the
//    findings whose fix is marked safe are those whose marker says `safe`.
//  - Every fix on its fixtures: a file whose findings carry fixes has beside
//    it `<file>.fixed`, the text after `--fix --unsafe-fixes`; a file without
//    fixes has none. The fixer's last pass, over the fixed text, fixes nothing.
TEST_P(Fixture, FindingsEqualMarkersAndFixesEqualExpectedOutput) {
  RunOptions options;
  options.paths.clear();
  options.project_context = false;  // a fixture is a project of its own: the files it names
  std::vector<Expectation> expected;
  for (const auto& p : GetParam()) {
    options.paths.push_back(p.string());
    auto m = markers(p.string(), read(p));
    expected.insert(expected.end(), m.begin(), m.end());
  }
  // A marker for a rule whose catalogue entry has not landed yet: the
  // check cannot run, so the comparison would say nothing.
  for (const auto& e : expected)
    if (!Catalogue::builtin().find(e.rule)) GTEST_SKIP() << e.rule << " has no catalogue entry (rules/) yet";
  options.jobs = 1;
  options.use_config_files = false;  // every rule enabled
#ifdef TORCHLEAK_TEST_CACHE_DIR
  options.config.cpp_cache_dir = TORCHLEAK_TEST_CACHE_DIR;  // one precompiled LibTorch header for every C++ fixture
#endif
  FixOptions fo;
  fo.unsafe = true;
  fo.write = false;
  FixReport report = fix(options, fo);

  expect_findings_equal_markers(report.first, expected, GetParam().front().string(), /*fix_safety=*/true);

  for (const auto& e : report.dropped) ADD_FAILURE() << e.path << ": " << e.message;
  std::map<std::string, std::string> fixed;
  for (const auto& f : report.files) fixed[f.path] = f.fixed;
  for (const auto& p : GetParam()) {
    fs::path expected_path = p.string() + ".fixed";
    auto it = fixed.find(p.string());
    if (it == fixed.end()) {
      EXPECT_FALSE(fs::exists(expected_path)) << expected_path.string() << " exists, but no fix applies to " << p.string();
      continue;
    }
    ASSERT_TRUE(fs::exists(expected_path))
        << p.string() << " has fixes: record their result in " << expected_path.filename().string()
        << " (torchleak check --fix --unsafe-fixes --diff shows it)";
    EXPECT_EQ(it->second, read(expected_path)) << "fixed text of " << p.string();
  }
  // The last pass found nothing to fix in the fixed text.
  EXPECT_TRUE(report.converged) << "fixing the fixed text changes it again";
}

// The runtime oracle's programs (fixtures/runtime/{python,cpp}/<rule>_<case>/):
// torchleak flags each leaking program exactly where its markers say, and
// stays silent on the fixed one, which carries no marker.
class RuntimeProgram : public ::testing::TestWithParam<std::vector<fs::path>> {};

TEST_P(RuntimeProgram, FlaggedExactlyWhereMarked) {
  std::vector<SourceFile> sources;
  std::vector<Expectation> expected;
  for (const auto& p : GetParam()) {
    SourceFile f{p.string(), read(p)};
    auto m = markers(f.path, f.text);
    expected.insert(expected.end(), m.begin(), m.end());
    sources.push_back(std::move(f));
  }
  Config config;  // every rule enabled
#ifdef TORCHLEAK_TEST_CACHE_DIR
  config.cpp_cache_dir = TORCHLEAK_TEST_CACHE_DIR;  // one precompiled LibTorch header for every C++ program
#endif
  expect_findings_equal_markers(run_sources(sources, config), expected, GetParam().front().string());
}

std::string fixture_name(const ::testing::TestParamInfo<std::vector<fs::path>>& info) {
  const fs::path& p = info.param.front();
  fs::path root = fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures";
  root /= *p.lexically_relative(root).begin();  // fixtures/<language>
  // A project (a folder of files, maybe with packages) is named by its folder.
  fs::path relative = p.lexically_relative(root);
  if (info.param.size() > 1) {
    auto it = relative.begin();
    fs::path rule = *it++;
    relative = rule / *it;
  }
  std::string rel = relative.replace_extension().string();
  for (auto& c : rel)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return rel;
}

INSTANTIATE_TEST_SUITE_P(Python, Fixture, ::testing::ValuesIn(projects("python", ".py")), fixture_name);
#ifdef TORCHLEAK_WITH_CLANG
// LibTorch programs, compiled for real against the installed LibTorch headers.
INSTANTIATE_TEST_SUITE_P(Cpp, Fixture, ::testing::ValuesIn(projects("cpp", ".cpp")), fixture_name);
#endif
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Fixture);
INSTANTIATE_TEST_SUITE_P(Runtime, RuntimeProgram, ::testing::ValuesIn(projects("runtime/python", ".py")), fixture_name);
#ifdef TORCHLEAK_WITH_CLANG
INSTANTIATE_TEST_SUITE_P(RuntimeCpp, RuntimeProgram, ::testing::ValuesIn(projects("runtime/cpp", ".cpp")), fixture_name);
#endif

// Every Python fixture of one file, as a notebook: the file cut into code
// cells at its top-level statements that follow a blank line (each cell's
// last newline dropped, as Jupyter stores them), after a cell of IPython
// magics and shell escapes and with markdown cells between. The findings are
// the fixture's, each in its cell at the line and column within the cell,
// placed in the notebook's JSON on the line that holds that source line;
// the fixes, written back into the cells, give the fixture's `.fixed` text.
class NotebookFixture : public ::testing::TestWithParam<std::vector<fs::path>> {};

struct GeneratedNotebook {
  std::string json;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> line_to_cell;  // fixture line -> (cell, line in cell)
};

GeneratedNotebook as_notebook(const std::string& text) {
  using Json = nlohmann::ordered_json;
  std::vector<std::string> lines;
  for (size_t p = 0; p < text.size();) {
    size_t nl = text.find('\n', p);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    lines.push_back(text.substr(p, end - p));
    p = end;
  }
  auto source_list = [](const std::string& source) {
    Json list = Json::array();
    for (size_t p = 0; p < source.size();) {
      size_t nl = source.find('\n', p);
      size_t end = nl == std::string::npos ? source.size() : nl + 1;
      list.push_back(source.substr(p, end - p));
      p = end;
    }
    return list;
  };
  auto code = [&](const std::string& source) {
    return Json{{"cell_type", "code"}, {"execution_count", nullptr}, {"metadata", Json::object()},
                {"outputs", Json::array()}, {"source", source_list(source)}};
  };
  auto markdown = [&](const std::string& source) {
    return Json{{"cell_type", "markdown"}, {"metadata", Json::object()}, {"source", source_list(source)}};
  };
  GeneratedNotebook out;
  Json cells = Json::array();
  cells.push_back(code("%matplotlib inline\n!nvidia-smi\nfiles = !ls"));
  cells.push_back(markdown("# Training\n\nThe *whole* loop."));
  std::string cell;
  uint32_t first = 1;
  auto flush = [&](uint32_t next_first) {
    if (cell.empty()) return;
    if (cell.back() == '\n') cell.pop_back();
    uint32_t number = static_cast<uint32_t>(cells.size()) + 1;
    for (uint32_t l = first; l < next_first; ++l) out.line_to_cell[l] = {number, l - first + 1};
    cells.push_back(code(cell));
    if (cells.size() == 3) cells.push_back(markdown("Between two code cells"));
    cell.clear();
    first = next_first;
  };
  for (uint32_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    bool top_level = !l.empty() && l[0] != ' ' && l[0] != '\t' && l[0] != '\n' && l[0] != '#' && l[0] != ')' &&
                     l[0] != ']' && l[0] != '}' && l.rfind("else", 0) != 0 && l.rfind("elif", 0) != 0 &&
                     l.rfind("except", 0) != 0 && l.rfind("finally", 0) != 0 && l[0] != '@';
    bool after_blank = i > 0 && lines[i - 1] == "\n" && !(i > 1 && lines[i - 2].size() > 0 && lines[i - 2][0] == '@');
    if (top_level && after_blank) flush(i + 1);
    cell += l;
  }
  flush(static_cast<uint32_t>(lines.size()) + 1);
  Json nb = {{"cells", cells},
             {"metadata",
              {{"kernelspec", {{"display_name", "Python 3"}, {"language", "python"}, {"name", "python3"}}},
               {"language_info", {{"name", "python"}}}}},
             {"nbformat", 4},
             {"nbformat_minor", 5}};
  out.json = nb.dump(1) + "\n";
  return out;
}

// The cells' code, as the fixture's text (the magic cell left out).
std::string code_of(const std::string& json) {
  auto nb = nlohmann::json::parse(json);
  std::string out;
  bool first = true;
  for (const auto& c : nb["cells"]) {
    if (c["cell_type"] != "code") continue;
    std::string source;
    for (const auto& l : c["source"]) source += l.get<std::string>();
    if (first) {
      first = false;
      continue;
    }
    out += source + "\n";
  }
  return out;
}

TEST_P(NotebookFixture, SameFindingsInCellsAndFixesWrittenBackIntoCells) {
  const fs::path& fixture = GetParam().front();
  std::string text = read(fixture);
  GeneratedNotebook nb = as_notebook(text);
  fs::path dir = fs::temp_directory_path() / ("torchleak-notebook-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path path = dir / (fixture.stem().string() + ".ipynb");
  {
    std::ofstream out(path, std::ios::binary);
    out << nb.json;
  }
  RunOptions options;
  options.paths = {path.string()};
  options.project_context = false;
  options.use_config_files = false;
  options.use_cache = false;
  options.jobs = 1;
  FixOptions fo;
  fo.unsafe = true;
  fo.write = false;
  FixReport report = fix(options, fo);
  fs::remove(path);
  for (const auto& e : report.first.errors) ADD_FAILURE() << e.path << ": " << e.message;
  for (const auto& e : report.dropped) ADD_FAILURE() << e.path << ": " << e.message;

  std::vector<Expectation> expected = markers(fixture.string(), text);
  std::set<std::string> want, got;
  for (const auto& e : expected) {
    auto [cell, line] = nb.line_to_cell.at(e.line);
    want.insert(fmt_cell(e.rule, cell, line, e.column));
  }
  for (const auto& d : report.first.diagnostics) {
    bool marker_has_column = std::any_of(expected.begin(), expected.end(), [&](const Expectation& e) {
      auto [cell, line] = nb.line_to_cell.at(e.line);
      return cell == d.notebook.cell && line == d.notebook.start.line && e.rule == d.rule_id && e.column != 0;
    });
    uint32_t col = codepoints(d.source_line, d.notebook.start.column) + 1;
    got.insert(fmt_cell(d.rule_id, d.notebook.cell, d.notebook.start.line, marker_has_column ? col : 0));
    // In the notebook's text, the finding's line holds the cell's line as a
    // JSON string, and the column points at the finding's first character.
    std::string cell_line = d.source_line + "\n";
    std::string literal = nlohmann::json(cell_line).dump();
    size_t at = d.notebook.file_start_line.find(literal);
    if (at == std::string::npos) literal.resize(literal.size() - 3), at = d.notebook.file_start_line.find(literal);
    ASSERT_NE(at, std::string::npos) << d.notebook.file_start_line << " does not hold " << cell_line;
    std::string prefix = nlohmann::json(d.source_line.substr(0, d.notebook.start.column)).dump();
    EXPECT_EQ(d.notebook.file_start.column, at + prefix.size() - 1) << d.notebook.file_start_line;
  }
  EXPECT_EQ(describe_set(got), describe_set(want)) << "fixture: " << fixture.string();

  fs::path fixed_path = fixture.string() + ".fixed";
  if (fs::exists(fixed_path)) {
    ASSERT_EQ(report.files.size(), 1u);
    EXPECT_EQ(code_of(report.files[0].fixed), read(fixed_path));
    // Outside the edited lines, not a byte changed: the markdown cells, the
    // magic cell and the metadata are where they were.
    EXPECT_NE(report.files[0].fixed.find("\"Between two code cells\""), std::string::npos);
    EXPECT_NE(report.files[0].fixed.find("    \"%matplotlib inline\\n\",\n    \"!nvidia-smi\\n\""),
              std::string::npos);
  } else {
    EXPECT_TRUE(report.files.empty());
  }
  EXPECT_TRUE(report.converged);
}

std::vector<std::vector<fs::path>> single_file_projects(const std::string& language, const std::string& extension) {
  std::vector<std::vector<fs::path>> out;
  for (auto& p : projects(language, extension))
    if (p.size() == 1 && p.front().parent_path().parent_path().filename() == language) out.push_back(p);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Python, NotebookFixture, ::testing::ValuesIn(single_file_projects("python", ".py")),
                         fixture_name);

// Every rule of the catalogue that claims Python has a fixture folder with at
// least 8 positive and 8 negative files.
TEST(Fixtures, EveryPythonRuleHasEnoughFixtures) {
  fs::path root = fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures" / "python";
  for (const auto& rule : Catalogue::builtin().rules()) {
    if (std::find(rule.languages.begin(), rule.languages.end(), "python") == rule.languages.end()) continue;
    if (rule.engine) continue;  // reported by the engine (TL100): tested in the unit tests
    fs::path dir = root / rule.id;
    ASSERT_TRUE(fs::is_directory(dir)) << rule.id << " has no fixtures/python/" << rule.id;
    int positive = 0, negative = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".py") continue;
      std::string name = e.path().filename().string();
      auto m = markers(e.path().string(), read(e.path()));
      bool has_rule = std::any_of(m.begin(), m.end(), [&](const Expectation& x) { return x.rule == rule.id; });
      if (has_rule) ++positive;
      else if (e.path().parent_path() == dir) ++negative;  // cross-file helpers count once, as positives
    }
    EXPECT_GE(positive, 8) << rule.id << " positive fixtures";
    EXPECT_GE(negative, 8) << rule.id << " negative fixtures";
  }
}

#ifdef TORCHLEAK_WITH_CLANG
// Every rule of the catalogue that claims C++ has at least 6 positive and 6
// negative LibTorch programs in fixtures/cpp/<rule>.
TEST(Fixtures, EveryCppRuleHasEnoughFixtures) {
  fs::path root = fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures" / "cpp";
  for (const auto& rule : Catalogue::builtin().rules()) {
    if (std::find(rule.languages.begin(), rule.languages.end(), "cpp") == rule.languages.end()) continue;
    if (rule.engine) continue;
    fs::path dir = root / rule.id;
    ASSERT_TRUE(fs::is_directory(dir)) << rule.id << " has no fixtures/cpp/" << rule.id;
    int positive = 0, negative = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".cpp") continue;
      auto m = markers(e.path().string(), read(e.path()));
      bool has_rule = std::any_of(m.begin(), m.end(), [&](const Expectation& x) { return x.rule == rule.id; });
      (has_rule ? positive : negative) += 1;
    }
    EXPECT_GE(positive, 6) << rule.id << " positive C++ fixtures";
    EXPECT_GE(negative, 6) << rule.id << " negative C++ fixtures";
  }
}
#endif

}  // namespace
