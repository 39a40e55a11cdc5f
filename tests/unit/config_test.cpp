// Configuration files: every key, every error (naming the file, the key and
// what was expected), discovery of the nearest file, --config, the command
// line layered on top, and each key's effect on a run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/config_file.h"
#include "core/engine.h"
#include "python/model.h"

namespace fs = std::filesystem;
using namespace torchleak;

namespace {

using Strings = std::vector<std::string>;

Config parse_ok(const std::string& text, const std::string& path = "torchleak.toml") {
  std::optional<Config> c = parse_config(text, path);
  EXPECT_TRUE(c.has_value()) << text;
  return c.value_or(Config{});
}

std::string parse_error(const std::string& text, const std::string& path = "torchleak.toml") {
  try {
    parse_config(text, path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// --- every key -------------------------------------------------------------------

TEST(ConfigFile, EveryKey) {
  Config c = parse_ok(R"(
select = ["TL0", "accumulate-undetached"]
ignore = ["TL004"]
exclude = ["vendor/", "*_pb2.py"]
target-torch-version = "1.13"
oversized-layer-threshold = "512MiB"
extra-models = ["make_backbone", "mylib.nn.Tower"]
extra-losses = ["focal_loss"]
extra-optimizers = ["Lion"]
extra-data-parallel = ["ShardedWrapper"]

[per-file-ignores]
"tests/*" = ["TL001"]
"scripts/bench_*.py" = ["TL004", "accumulate-undetached"]
)");
  EXPECT_EQ(c.select, (Strings{"TL0", "accumulate-undetached"}));
  EXPECT_EQ(c.ignore, (Strings{"TL004"}));
  EXPECT_EQ(c.exclude, (Strings{"vendor/", "*_pb2.py"}));
  EXPECT_EQ(c.target_torch_version, "1.13");
  EXPECT_EQ(c.torch_version(), (std::pair<int, int>{1, 13}));
  EXPECT_EQ(c.oversized_layer_bytes, uint64_t{512} << 20);
  EXPECT_EQ(c.extra_models, (Strings{"make_backbone", "mylib.nn.Tower"}));
  EXPECT_EQ(c.extra_losses, (Strings{"focal_loss"}));
  EXPECT_EQ(c.extra_optimizers, (Strings{"Lion"}));
  EXPECT_EQ(c.extra_data_parallel, (Strings{"ShardedWrapper"}));
  ASSERT_EQ(c.per_file_ignores.size(), 2u);
  // toml++ keeps a table's keys sorted.
  EXPECT_EQ(c.per_file_ignores[0].pattern, "scripts/bench_*.py");
  EXPECT_EQ(c.per_file_ignores[0].rules, (Strings{"TL004", "accumulate-undetached"}));
  EXPECT_EQ(c.per_file_ignores[1].pattern, "tests/*");
  EXPECT_EQ(c.per_file_ignores[1].rules, (Strings{"TL001"}));
}

TEST(ConfigFile, DefaultsWhenEmpty) {
  Config c = parse_ok("");
  EXPECT_TRUE(c.select.empty());
  EXPECT_TRUE(c.ignore.empty());
  EXPECT_EQ(c.device_memory_bytes, uint64_t{16} << 30);
  EXPECT_EQ(c.oversized_layer_bytes, uint64_t{8} << 30);  // half of the device's memory
  EXPECT_EQ(c.target_torch_version, "");
}

TEST(ConfigFile, ThresholdAsAnInteger) {
  EXPECT_EQ(parse_ok("oversized-layer-threshold = 2000000000").oversized_layer_bytes, 2000000000u);
}

TEST(ConfigFile, DeviceMemorySetsHalfAsTheThresholdUnlessTheThresholdIsGiven) {
  EXPECT_EQ(parse_ok("device-memory = \"80GiB\"").oversized_layer_bytes, uint64_t{40} << 30);
  EXPECT_EQ(parse_ok("device-memory = \"80GiB\"\noversized-layer-threshold = \"2GiB\"").oversized_layer_bytes,
            uint64_t{2} << 30);
  EXPECT_EQ(parse_ok("oversized-layer-threshold = \"2GiB\"\ndevice-memory = \"80GiB\"").oversized_layer_bytes,
            uint64_t{2} << 30);
  // The command line's device-memory over a file's: half of it, unless the file set the threshold.
  Config cli;
  cli.device_memory_bytes = uint64_t{24} << 30;
  EXPECT_EQ(layer_command_line(parse_ok(""), cli).oversized_layer_bytes, uint64_t{12} << 30);
  EXPECT_EQ(layer_command_line(parse_ok("oversized-layer-threshold = \"1GiB\""), cli).oversized_layer_bytes,
            uint64_t{1} << 30);
  EXPECT_NE(parse_error("device-memory = \"lots\"\n").find("key 'device-memory' must be a size in bytes"),
            std::string::npos);
}

TEST(ConfigFile, PyprojectReadsToolTorchleak) {
  Config c = parse_ok(R"(
[project]
name = "trainer"

[tool.ruff]
line-length = 100

[tool.torchleak]
ignore = ["TL004"]

[tool.torchleak.per-file-ignores]
"tests/*" = ["ALL"]
)",
                      "pyproject.toml");
  EXPECT_EQ(c.ignore, (Strings{"TL004"}));
  ASSERT_EQ(c.per_file_ignores.size(), 1u);
  EXPECT_EQ(c.per_file_ignores[0].rules, (Strings{"ALL"}));
}

TEST(ConfigFile, APyprojectWithoutTheTableIsNotTorchleaks) {
  EXPECT_FALSE(parse_config("[project]\nname = \"x\"\n", "pyproject.toml").has_value());
  EXPECT_FALSE(parse_config("[tool.ruff]\nselect = [\"E\"]\n", "pyproject.toml").has_value());
  EXPECT_FALSE(parse_config("", "sub/pyproject.toml").has_value());
  // Any other name is read from its top level, even when empty.
  EXPECT_TRUE(parse_config("", ".torchleak.toml").has_value());
}

// --- every error ---------------------------------------------------------------------

TEST(ConfigFileErrors, UnknownKeyNamesTheKnownOnesAndTheClosest) {
  EXPECT_EQ(parse_error("[tool.torchleak]\nselct = [\"TL001\"]\n", "pyproject.toml"),
            "pyproject.toml:2:1: [tool.torchleak] key 'selct': unknown key (expected one of: extend, select, extend-select, ignore, extend-ignore, exclude, "
            "per-file-ignores, target-torch-version, device-memory, oversized-layer-threshold, extra-models, extra-losses, "
            "extra-optimizers, extra-data-parallel, models); did you mean 'select'?");
  EXPECT_EQ(parse_error("line-length = 100\n"),
            "torchleak.toml:1:1: key 'line-length': unknown key (expected one of: extend, select, extend-select, ignore, extend-ignore, exclude, "
            "per-file-ignores, target-torch-version, device-memory, oversized-layer-threshold, extra-models, extra-losses, "
            "extra-optimizers, extra-data-parallel, models)");
}

TEST(ConfigFileErrors, WrongTypes) {
  EXPECT_EQ(parse_error("[tool.torchleak]\nselect = 3\n", "pyproject.toml"),
            "pyproject.toml:2:10: [tool.torchleak] key 'select' must be an array of strings, not an integer");
  EXPECT_EQ(parse_error("ignore = \"TL001\"\n"), "torchleak.toml:1:10: key 'ignore' must be an array of strings, not a string");
  EXPECT_EQ(parse_error("select = [\"TL001\", 4]\n"),
            "torchleak.toml:1:20: key 'select' must be an array of strings, but item 2 is an integer");
  EXPECT_EQ(parse_error("exclude = [\"\"]\n"), "torchleak.toml:1:12: key 'exclude' must be an array of strings, but item 1 is empty");
  EXPECT_EQ(parse_error("exclude = true\n"), "torchleak.toml:1:11: key 'exclude' must be an array of strings, not a boolean");
  for (const char* key : {"extra-models", "extra-losses", "extra-optimizers", "extra-data-parallel"}) {
    EXPECT_EQ(parse_error(std::string(key) + " = \"Net\"\n"),
              "torchleak.toml:1:" + std::to_string(std::string(key).size() + 4) + ": key '" + key +
                  "' must be an array of strings, not a string");
    EXPECT_EQ(parse_error(std::string(key) + " = [[\"Net\"]]\n"),
              "torchleak.toml:1:" + std::to_string(std::string(key).size() + 5) + ": key '" + key +
                  "' must be an array of strings, but item 1 is an array");
  }
}

TEST(ConfigFileErrors, RulesMustExist) {
  EXPECT_EQ(parse_error("select = [\"TL999\"]\n"),
            "torchleak.toml:1:11: key 'select' names no rule: 'TL999' (expected rule codes such as \"TL001\", prefixes "
            "such as \"TL0\", names such as \"accumulate-undetached\", or \"ALL\")");
  EXPECT_EQ(parse_error("ignore = [\"TL001\", \"acumulate-undetached\"]\n"),
            "torchleak.toml:1:20: key 'ignore' names no rule: 'acumulate-undetached' (expected rule codes such as "
            "\"TL001\", prefixes such as \"TL0\", names such as \"accumulate-undetached\", or \"ALL\")");
  EXPECT_EQ(parse_error("[per-file-ignores]\n\"tests/*\" = [\"E501\"]\n"),
            "torchleak.toml:2:14: key 'per-file-ignores.\"tests/*\"' names no rule: 'E501' (expected rule codes such "
            "as \"TL001\", prefixes such as \"TL0\", names such as \"accumulate-undetached\", or \"ALL\")");
}

TEST(ConfigFileErrors, PerFileIgnores) {
  EXPECT_EQ(parse_error("per-file-ignores = [\"tests/*\"]\n"),
            "torchleak.toml:1:20: key 'per-file-ignores' must be a table of globs to arrays of rules "
            "(`\"tests/*\" = [\"TL001\"]`), not an array");
  EXPECT_EQ(parse_error("[per-file-ignores]\n\"tests/*\" = \"TL001\"\n"),
            "torchleak.toml:2:13: key 'per-file-ignores.\"tests/*\"' must be an array of strings, not a string");
}

TEST(ConfigFileErrors, TargetTorchVersion) {
  EXPECT_EQ(parse_error("target-torch-version = 2.1\n"),
            "torchleak.toml:1:24: key 'target-torch-version' must be a string \"major.minor\" such as \"2.1\", not a float");
  for (const char* bad : {"2", "2.1.0", "v2.1", "2.", ".1", "latest"}) {
    EXPECT_EQ(parse_error(std::string("target-torch-version = \"") + bad + "\"\n"),
              std::string("torchleak.toml:1:24: key 'target-torch-version' must be a version \"major.minor\" such as "
                          "\"2.1\", not \"") +
                  bad + "\"");
  }
}

TEST(ConfigFileErrors, OversizedLayerThreshold) {
  std::string expected = "torchleak.toml:1:29: key 'oversized-layer-threshold' must be a size in bytes: a positive "
                         "integer or a string such as \"1GiB\" or \"512MiB\", not ";
  EXPECT_EQ(parse_error("oversized-layer-threshold = \"huge\"\n"), expected + "\"huge\"");
  EXPECT_EQ(parse_error("oversized-layer-threshold = \"1 GiBs\"\n"), expected + "\"1 GiBs\"");
  EXPECT_EQ(parse_error("oversized-layer-threshold = -5\n"), expected + "-5");
  EXPECT_EQ(parse_error("oversized-layer-threshold = 0\n"), expected + "0");
  EXPECT_EQ(parse_error("oversized-layer-threshold = 1.5\n"), expected + "a float");
}

TEST(ConfigFileErrors, TomlSyntaxHasLineAndColumn) {
  EXPECT_EQ(parse_error("select = [\"TL001\"\nignore = []\n"),
            "torchleak.toml:2:1: invalid TOML: Error while parsing array: expected comma or closing ']', saw 'i'");
  EXPECT_EQ(parse_error("[tool.torchleak\n", "pyproject.toml"),
            "pyproject.toml:1:16: invalid TOML: Error while parsing table header: expected ']', saw '\\n'");
}

TEST(ConfigFileErrors, ToolTorchleakMustBeATable) {
  EXPECT_EQ(parse_error("[tool]\ntorchleak = 3\n", "pyproject.toml"),
            "pyproject.toml:2:13: [tool.torchleak] must be a table, not an integer");
}

TEST(ConfigFileErrors, AFileThatCannotBeRead) {
  try {
    load_config_file("no-such-dir/torchleak.toml");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "no-such-dir/torchleak.toml: cannot read the configuration file: No such file or directory");
  }
}

// --- sizes ---------------------------------------------------------------------------------

TEST(ConfigFile, ParseSize) {
  EXPECT_EQ(parse_size("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(parse_size("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_size("512 mib"), uint64_t{512} << 20);
  EXPECT_EQ(parse_size("1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(parse_size("2TiB"), uint64_t{2} << 40);
  EXPECT_EQ(parse_size("64KiB"), uint64_t{64} << 10);
  EXPECT_EQ(parse_size("1GB"), 1000000000u);
  EXPECT_EQ(parse_size("3 MB"), 3000000u);
  EXPECT_EQ(parse_size("4kB"), 4000u);
  EXPECT_EQ(parse_size("1TB"), 1000000000000u);
  EXPECT_EQ(parse_size("100"), 100u);
  EXPECT_EQ(parse_size("100B"), 100u);
  EXPECT_EQ(parse_size(""), std::nullopt);
  EXPECT_EQ(parse_size("GiB"), std::nullopt);
  EXPECT_EQ(parse_size("1.GiB"), std::nullopt);
  EXPECT_EQ(parse_size("1 GiB extra"), std::nullopt);
  EXPECT_EQ(parse_size("1PiB"), std::nullopt);
  EXPECT_EQ(parse_size("0"), std::nullopt);
  EXPECT_EQ(parse_size("0.5B"), std::nullopt);
  EXPECT_EQ(parse_size("-1GiB"), std::nullopt);
  EXPECT_EQ(parse_size("99999999TiB"), std::nullopt);
}

// --- the command line on top -------------------------------------------------------------

TEST(ConfigLayers, SelectOnTheCommandLineReplacesTheFilesSelectAndIgnore) {
  Config file;
  file.select = {"TL0"};
  file.ignore = {"TL001"};
  Config cli;
  cli.select = {"TL001"};
  Config c = layer_command_line(file, cli);
  EXPECT_EQ(c.select, (Strings{"TL001"}));
  EXPECT_EQ(c.ignore, (Strings{}));
  EXPECT_TRUE(c.rule_enabled(*Catalogue::builtin().find("TL001")));
}

TEST(ConfigLayers, IgnoreOnTheCommandLineAddsToTheFiles) {
  Config file;
  file.select = {"TL0"};
  file.ignore = {"TL004"};
  Config cli;
  cli.ignore = {"TL001"};
  Config c = layer_command_line(file, cli);
  EXPECT_EQ(c.select, (Strings{"TL0"}));
  EXPECT_EQ(c.ignore, (Strings{"TL004", "TL001"}));
}

TEST(ConfigLayers, TargetVersionOnTheCommandLineWins) {
  Config file;
  file.target_torch_version = "1.13";
  Config cli;
  EXPECT_EQ(layer_command_line(file, cli).target_torch_version, "1.13");
  cli.target_torch_version = "2.4";
  EXPECT_EQ(layer_command_line(file, cli).target_torch_version, "2.4");
}

// --- discovery ---------------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "torchleak-config-XXXXXX").string();
    path_ = fs::path(::mkdtemp(tmpl.data())).lexically_normal();
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `text` to `relative` (creating directories); returns the path.
  std::string write(const std::string& relative, const std::string& text) const {
    fs::path p = path_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string operator/(const std::string& relative) const { return (path_ / relative).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(ConfigDiscovery, TheNearestFileWalkingUpApplies) {
  TempDir t;
  t.write("pyproject.toml", "[tool.torchleak]\nignore = [\"TL004\"]\n");
  t.write("pkg/torchleak.toml", "ignore = [\"TL001\"]\n");
  ConfigResolver r(Config{}, "");
  const Config& top = r.for_file(t / "train.py");
  const Config& deep = r.for_file(t / "pkg/models/net.py");
  EXPECT_EQ(top.ignore, (Strings{"TL004"}));
  EXPECT_EQ(top.root, t.path().string());
  EXPECT_EQ(deep.ignore, (Strings{"TL001"}));  // not merged with the outer file (as ruff)
  EXPECT_EQ(deep.root, (t.path() / "pkg").string());
  EXPECT_EQ(&r.for_file(t / "pkg/models/other.py"), &deep);  // one per directory
  EXPECT_EQ(&r.for_directory(t.path() / "pkg"), &deep);
}

TEST(ConfigDiscovery, APyprojectWithoutTheTableDoesNotCount) {
  TempDir t;
  t.write("torchleak.toml", "ignore = [\"TL004\"]\n");
  t.write("sub/pyproject.toml", "[project]\nname = \"sub\"\n\n[tool.ruff]\nline-length = 90\n");
  ConfigResolver r(Config{}, "");
  EXPECT_EQ(r.for_file(t / "sub/train.py").ignore, (Strings{"TL004"}));
}

TEST(ConfigDiscovery, WithinADirectoryTheHiddenFileWinsThenThePlainOneThenPyproject) {
  TempDir t;
  t.write("pyproject.toml", "[tool.torchleak]\nignore = [\"TL001\"]\n");
  t.write("torchleak.toml", "ignore = [\"TL004\"]\n");
  EXPECT_EQ(ConfigResolver(Config{}, "").for_file(t / "a.py").ignore, (Strings{"TL004"}));
  t.write(".torchleak.toml", "ignore = [\"accumulate-undetached\"]\n");
  EXPECT_EQ(ConfigResolver(Config{}, "").for_file(t / "a.py").ignore, (Strings{"accumulate-undetached"}));
}

TEST(ConfigDiscovery, ConfigOptionOverridesDiscovery) {
  TempDir t;
  t.write("torchleak.toml", "ignore = [\"TL004\"]\n");
  std::string chosen = t.write("ci/strict.toml", "select = [\"TL001\"]\n");
  ConfigResolver r(Config{}, chosen);
  const Config& c = r.for_file(t / "train.py");
  EXPECT_EQ(c.select, (Strings{"TL001"}));
  EXPECT_EQ(c.ignore, (Strings{}));
  EXPECT_EQ(c.source, chosen);
  EXPECT_EQ(c.root, fs::current_path().string());  // as ruff: relative to the working directory
}

TEST(ConfigDiscovery, NoFileGivesTheCommandLineSettings) {
  TempDir t;
  t.write("torchleak.toml", "ignore = [\"TL004\"]\n");
  Config cli;
  cli.ignore = {"TL001"};
  EXPECT_EQ(ConfigResolver(cli, "", /*discover=*/false).for_file(t / "a.py").ignore, (Strings{"TL001"}));
  EXPECT_EQ(ConfigResolver(cli, "").for_file(t / "a.py").ignore, (Strings{"TL004", "TL001"}));
}

TEST(ConfigDiscovery, ABadFileIsAnErrorNamingIt) {
  TempDir t;
  t.write("pkg/torchleak.toml", "ignroe = []\n");
  ConfigResolver r(Config{}, "");
  try {
    r.for_file(t / "pkg/train.py");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    std::string file = (t.path() / "pkg/torchleak.toml").lexically_relative(fs::current_path()).generic_string();
    if (file.rfind("..", 0) == 0) file = (t.path() / "pkg/torchleak.toml").generic_string();
    EXPECT_EQ(what, file + ":1:1: key 'ignroe': unknown key (expected one of: extend, select, extend-select, ignore, extend-ignore, exclude, "
                           "per-file-ignores, target-torch-version, device-memory, oversized-layer-threshold, extra-models, "
                           "extra-losses, extra-optimizers, extra-data-parallel, models); did you mean 'ignore'?");
  }
}

TEST(ConfigDiscovery, ExcludeIsRelativeToTheConfigurationsDirectory) {
  TempDir t;
  t.write("torchleak.toml", "exclude = [\"vendor/\", \"*_pb2.py\", \"experiments/old_*\"]\n");
  ConfigResolver r(Config{}, "");
  EXPECT_TRUE(r.excluded(t / "vendor"));
  EXPECT_TRUE(r.excluded(t / "vendor/lib/x.py"));
  EXPECT_TRUE(r.excluded(t / "pkg/service_pb2.py"));
  EXPECT_TRUE(r.excluded(t / "experiments/old_run.py"));
  EXPECT_FALSE(r.excluded(t / "experiments/new_run.py"));
  EXPECT_FALSE(r.excluded(t / "pkg/vendored.py"));
  EXPECT_FALSE(r.excluded(t / "train.py"));
}

// --- each key's effect on a run ---------------------------------------------------------

const char* kLeak =
    "def train(model, loader, optimizer, criterion):\n"
    "    total = 0.0\n"
    "    for x, y in loader:\n"
    "        loss = criterion(model(x), y)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
    "        total += loss\n"
    "    return total\n";

// The TL001 findings of a run over `root`, as "rule path:line" with paths relative to root.
Strings findings(const TempDir& root, const std::string& config_file = "", std::string* fatal = nullptr,
                 const Config& cli = Config{}) {
  RunOptions o;
  o.paths = {root.path().string()};
  o.config = cli;
  o.config_file = config_file;
  o.jobs = 1;
  RunResult r = run(o);
  if (fatal) *fatal = r.fatal;
  Strings out;
  for (const auto& d : r.diagnostics)
    if (d.rule_id == "TL001")  // the rule these fixtures are about; others have their own tests
      out.push_back(d.rule_id + " " + fs::path(d.path).lexically_relative(root.path()).generic_string() + ":" +
                    std::to_string(d.start.line));
  for (const auto& e : r.errors) out.push_back("error " + e.path + ": " + e.message);
  return out;
}

TEST(ConfigRun, EachDirectoryIsAnalyzedWithItsNearestConfiguration) {
  TempDir t;
  t.write("pyproject.toml", "[tool.torchleak]\nselect = [\"ALL\"]\n");
  t.write("train.py", kLeak);
  t.write("legacy/torchleak.toml", "ignore = [\"TL001\"]\n");
  t.write("legacy/train.py", kLeak);
  t.write("legacy/deep/train.py", kLeak);
  EXPECT_EQ(findings(t), (Strings{"TL001 train.py:7"}));
}

TEST(ConfigRun, SelectAndIgnore) {
  TempDir t;
  t.write("train.py", kLeak);
  t.write("torchleak.toml", "select = [\"TL004\"]\n");
  EXPECT_EQ(findings(t), Strings{});
  t.write("torchleak.toml", "select = [\"TL0\"]\nignore = [\"accumulate-undetached\"]\n");
  EXPECT_EQ(findings(t), Strings{});
  t.write("torchleak.toml", "select = [\"TL0\"]\n");
  EXPECT_EQ(findings(t), (Strings{"TL001 train.py:7"}));
  // --select on the command line replaces the file's select and ignore.
  t.write("torchleak.toml", "ignore = [\"TL001\"]\n");
  Config cli;
  cli.select = {"TL001"};
  EXPECT_EQ(findings(t, "", nullptr, cli), (Strings{"TL001 train.py:7"}));
  // --ignore adds to the file's.
  t.write("torchleak.toml", "ignore = [\"TL004\"]\n");
  Config cli_ignore;
  cli_ignore.ignore = {"TL001"};
  EXPECT_EQ(findings(t, "", nullptr, cli_ignore), Strings{});
}

TEST(ConfigRun, PerFileIgnoresAreRelativeToTheConfiguration) {
  TempDir t;
  t.write("pkg/torchleak.toml", "[per-file-ignores]\n\"tests/*\" = [\"TL001\"]\n\"bench_*.py\" = [\"ALL\"]\n");
  t.write("pkg/tests/test_train.py", kLeak);
  t.write("pkg/tools/bench_speed.py", kLeak);
  t.write("pkg/train.py", kLeak);
  t.write("tests/test_train.py", kLeak);  // outside pkg: pkg's configuration does not apply
  EXPECT_EQ(findings(t), (Strings{"TL001 pkg/train.py:7", "TL001 tests/test_train.py:7"}));
}

TEST(ConfigRun, ExcludeSkipsFilesAndDirectories) {
  TempDir t;
  t.write("torchleak.toml", "exclude = [\"third_party/\", \"*_generated.py\"]\n");
  t.write("third_party/lib/train.py", kLeak);
  t.write("model_generated.py", kLeak);
  t.write("train.py", kLeak);
  EXPECT_EQ(findings(t), (Strings{"TL001 train.py:7"}));
}

TEST(ConfigRun, ConfigFileOptionAppliesToEveryFile) {
  TempDir t;
  t.write("train.py", kLeak);
  t.write("sub/torchleak.toml", "ignore = [\"TL001\"]\n");
  t.write("sub/train.py", kLeak);
  std::string chosen = t.write("strict.toml", "select = [\"ALL\"]\n");
  EXPECT_EQ(findings(t, chosen), (Strings{"TL001 sub/train.py:7", "TL001 train.py:7"}));
}

TEST(ConfigRun, ABadConfigurationStopsTheRun) {
  TempDir t;
  t.write("train.py", kLeak);
  t.write("sub/torchleak.toml", "select = \"TL001\"\n");
  t.write("sub/train.py", kLeak);
  std::string fatal;
  EXPECT_EQ(findings(t, "", &fatal), Strings{});
  std::string file = (t.path() / "sub/torchleak.toml").lexically_relative(fs::current_path()).generic_string();
  if (file.rfind("..", 0) == 0) file = (t.path() / "sub/torchleak.toml").generic_string();
  EXPECT_EQ(fatal, file + ":1:10: key 'select' must be an array of strings, not a string");
}

// A loop whose accumulated value is attached only if a name the config lists is a model / loss / wrapper.
TEST(ConfigRun, ExtraModelsLossesAndDataParallel) {
  TempDir t;
  t.write("models.py",
          "from mylib import make_body\n"
          "\n"
          "\n"
          "def train(loader):\n"
          "    body = make_body()\n"
          "    total = 0.0\n"
          "    for x, y in loader:\n"
          "        total += body(x)\n"
          "    return total\n");
  t.write("losses.py",
          "from mylib import fancy_objective\n"
          "\n"
          "\n"
          "def train(model, loader):\n"
          "    total = 0.0\n"
          "    for x, y in loader:\n"
          "        value = fancy_objective(model(x), y)\n"
          "        total += value\n"
          "    return total\n");
  t.write("wrapped.py",
          "from mylib import ShardedWrapper\n"
          "\n"
          "\n"
          "def train(model, loader):\n"
          "    wrapped = ShardedWrapper(model)\n"
          "    total = 0.0\n"
          "    for x, y in loader:\n"
          "        total += wrapped(x)\n"
          "    return total\n");
  EXPECT_EQ(findings(t), Strings{});
  t.write("torchleak.toml",
          "extra-models = [\"make_body\"]\nextra-losses = [\"fancy_objective\"]\n"
          "extra-data-parallel = [\"mylib.ShardedWrapper\"]\n");
  EXPECT_EQ(findings(t), (Strings{"TL001 losses.py:8", "TL001 models.py:8", "TL001 wrapped.py:8"}));
}

// The model answers from the config's extra names (what rules such as
// missing-zero-grad read); checked on the model itself.
TEST(ConfigModel, ExtraOptimizers) {
  std::string text =
      "from mylib import Lion\n"
      "\n"
      "\n"
      "def train(model, loader):\n"
      "    solver = Lion(model.parameters())\n"
      "    for x in loader:\n"
      "        solver.step()\n";
  auto step_receiver_is_optimizer = [&](const Config& config) {
    python::Model m(text, config);
    for (const auto& c : m.calls())
      if (c.method == "step") return m.is_optimizer(c.receiver);
    ADD_FAILURE() << "no step() call";
    return false;
  };
  EXPECT_FALSE(step_receiver_is_optimizer(Config{}));
  Config by_leaf = parse_ok("extra-optimizers = [\"Lion\"]\n");
  EXPECT_TRUE(step_receiver_is_optimizer(by_leaf));
  Config by_qualified_name = parse_ok("extra-optimizers = [\"mylib.Lion\"]\n");
  EXPECT_TRUE(step_receiver_is_optimizer(by_qualified_name));
}

TEST(ConfigModel, TargetTorchVersionAndThresholdReachTheModel) {
  Config c = parse_ok("target-torch-version = \"1.12\"\noversized-layer-threshold = \"256MiB\"\n");
  python::Model m("x = 1\n", c);
  EXPECT_EQ(m.config().torch_version(), (std::pair<int, int>{1, 12}));
  EXPECT_EQ(m.config().oversized_layer_bytes, uint64_t{256} << 20);
}

}  // namespace
