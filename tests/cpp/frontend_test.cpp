// The C++ frontend's parts: LibTorch discovery, compile commands (database,
// upward search, fallback flags), the precompiled-header cache, the errors a
// file that does not compile gets, suppressions, the lexical parse check, and
// the clang-tidy module run by the real clang-tidy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cpp/check.h"
#include "core/analysis.h"
#include "core/engine.h"
#include "cpp/compilation.h"
#include "cpp/driver.h"
#include "cpp/libtorch.h"
#include "cpp/pch.h"

namespace fs = std::filesystem;
using namespace torchleak;
using namespace torchleak::cpp;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "torchleak-cpp-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& rel, const std::string& text) const {
    fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  fs::path path_;
};

EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// A LibTorch install with a small stand-in for torch/torch.h.
fs::path fake_libtorch(const TempDir& dir, const std::string& name, const std::string& header = "#pragma once\n") {
  dir.write(name + "/include/torch/csrc/api/include/torch/torch.h", header);
  dir.write(name + "/share/cmake/Torch/TorchConfig.cmake", "");
  return dir.path() / name;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --- LibTorch discovery -------------------------------------------------------------

TEST(LibTorchDiscovery, TorchDirNamesTheConfigDirectory) {
  TempDir dir;
  fs::path prefix = fake_libtorch(dir, "libtorch");
  auto found = find_libtorch(env_of({{"Torch_DIR", (prefix / "share/cmake/Torch").string()}}), {});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, "Torch_DIR");
  EXPECT_EQ(found->include_dirs,
            (std::vector<std::string>{(prefix / "include").string(),
                                      (prefix / "include/torch/csrc/api/include").string()}));
}

TEST(LibTorchDiscovery, PrefixPathThenInstallPrefixInOrder) {
  TempDir dir;
  fs::path a = fake_libtorch(dir, "a"), b = fake_libtorch(dir, "b");
  auto from_prefix_path =
      find_libtorch(env_of({{"CMAKE_PREFIX_PATH", (dir.path() / "none").string() + ":" + a.string()},
                            {"TORCH_INSTALL_PREFIX", b.string()}}),
                    {});
  ASSERT_TRUE(from_prefix_path);
  EXPECT_EQ(from_prefix_path->origin, "CMAKE_PREFIX_PATH");
  EXPECT_EQ(from_prefix_path->prefix, a.string());
  auto from_install_prefix = find_libtorch(env_of({{"TORCH_INSTALL_PREFIX", b.string()}}), {});
  ASSERT_TRUE(from_install_prefix);
  EXPECT_EQ(from_install_prefix->origin, "TORCH_INSTALL_PREFIX");
  EXPECT_EQ(from_install_prefix->prefix, b.string());
}

TEST(LibTorchDiscovery, SystemInstallAddsOnlyTheApiDirectory) {
  TempDir dir;
  fs::path sys = fake_libtorch(dir, "usr");
  auto found = find_libtorch(env_of({}), {sys.string()});
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, "the system install");
  EXPECT_EQ(found->include_dirs, std::vector<std::string>{(sys / "include/torch/csrc/api/include").string()});
  EXPECT_FALSE(find_libtorch(env_of({{"Torch_DIR", (dir.path() / "nothing").string()}}), {}));
}

// --- compile commands -----------------------------------------------------------------

std::string database(const fs::path& dir, const std::string& file, const std::string& flags) {
  return "[{\"directory\": \"" + dir.string() + "\", \"command\": \"/usr/bin/c++ " + flags + " -o x.o -c " + file +
         "\", \"file\": \"" + file + "\"}]";
}

TEST(CompileCommands, BuildPathDatabaseListsTheFile) {
  TempDir dir;
  fs::path src = dir.write("src/train.cpp", "int main() {}\n");
  dir.write("build/compile_commands.json", database(dir.path() / "build", src.string(), "-DFROM_DB=1 -std=c++17"));
  Settings settings;
  settings.database_dir = (dir.path() / "build").string();
  std::string error;
  auto c = compile_command_for(src.string(), settings, env_of({}), error);
  ASSERT_TRUE(c) << error;
  EXPECT_FALSE(c->fallback);
  EXPECT_TRUE(contains(c->argv, "-DFROM_DB=1"));
  EXPECT_EQ(c->origin, "compile_commands.json in " + (dir.path() / "build").string());
  EXPECT_EQ(c->directory, (dir.path() / "build").string());
}

TEST(CompileCommands, DatabaseFoundWalkingUpAndInferredForAHeader) {
  TempDir dir;
  fs::path src = dir.write("src/train.cpp", "int main() {}\n");
  fs::path header = dir.write("src/model.h", "#pragma once\n");
  dir.write("compile_commands.json", database(dir.path(), src.string(), "-DWALKED=1"));
  std::string error;
  auto c = compile_command_for(src.string(), Settings{}, env_of({}), error);
  ASSERT_TRUE(c) << error;
  EXPECT_TRUE(contains(c->argv, "-DWALKED=1"));
  auto h = compile_command_for(header.string(), Settings{}, env_of({}), error);
  ASSERT_TRUE(h) << error;
  EXPECT_TRUE(contains(h->argv, "-DWALKED=1"));
  EXPECT_NE(h->origin.find("inferred from"), std::string::npos) << h->origin;
}

TEST(CompileCommands, BuildPathWithoutDatabaseIsAnError) {
  TempDir dir;
  fs::path src = dir.write("train.cpp", "int main() {}\n");
  fs::create_directories(dir.path() / "build");
  Settings settings;
  settings.database_dir = (dir.path() / "build").string();
  std::string error;
  EXPECT_FALSE(compile_command_for(src.string(), settings, env_of({}), error));
  EXPECT_EQ(error, "-p " + settings.database_dir +
                       ": no compile_commands.json there (configure the project with "
                       "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON)");
}

TEST(CompileCommands, BrokenDatabaseFoundWalkingUpIsAnError) {
  TempDir dir;
  fs::path src = dir.write("src/train.cpp", "int main() {}\n");
  // Valid up to its end: Clang's YAML reader alone would keep the first entry.
  dir.write("compile_commands.json", "[{\"directory\": \"/\", \"file\": \"a.cpp\", \"command\": \"c++ a.cpp\"},\n");
  std::string error;
  EXPECT_FALSE(compile_command_for(src.string(), Settings{}, env_of({}), error));
  EXPECT_EQ(error, (dir.path() / "compile_commands.json").string() +
                       ": not valid JSON at line 2, column 1: syntax error while parsing value - unexpected end "
                       "of input; expected '[', '{', or a literal (the compilation database found above the file; "
                       "fix it, or name another build directory with -p)");
}

TEST(CompileCommands, FallbackFlagsUseTheDiscoveredLibTorch) {
  TempDir dir;
  fs::path prefix = fake_libtorch(dir, "libtorch");
  fs::path src = dir.write("train.cpp", "int main() {}\n");
  std::string error;
  auto c = compile_command_for(src.string(), Settings{}, env_of({{"TORCH_INSTALL_PREFIX", prefix.string()}}), error);
  ASSERT_TRUE(c) << error;
  EXPECT_TRUE(c->fallback);
  EXPECT_EQ(c->argv, (std::vector<std::string>{"clang++", "-std=c++17", "-isystem", (prefix / "include").string(),
                                               "-isystem", (prefix / "include/torch/csrc/api/include").string(),
                                               "-x", "c++", src.string()}));
  EXPECT_EQ(c->origin, "fallback flags: -std=c++17 and LibTorch from TORCH_INSTALL_PREFIX (" + prefix.string() + ")");
}

// --- the precompiled-header cache ------------------------------------------------------

TEST(PchCache, BuiltOnceReusedAndRebuiltWhenAFlagOrAHeaderChanges) {
  TempDir dir;
  fs::path prefix = fake_libtorch(dir, "libtorch", "#pragma once\nnamespace at { struct Tensor { int v = 0; }; }\n");
  fs::path src = dir.write("train.cpp", "#include <torch/torch.h>\nint main() { at::Tensor t; return t.v; }\n");
  CompileCommand c = fallback_command(src.string(), env_of({{"TORCH_INSTALL_PREFIX", prefix.string()}}));
  auto args = syntax_only_arguments(c.argv, src.string(), {}, {});
  std::string cache = (dir.path() / "cache").string();

  PchCache first(cache);
  PchCache::Result built = first.get(args, src.string(), c.directory);
  ASSERT_TRUE(built.error.empty()) << built.error;
  EXPECT_TRUE(built.built);
  EXPECT_TRUE(fs::is_regular_file(built.path));
  EXPECT_FALSE(first.get(args, src.string(), c.directory).built);  // in this process
  EXPECT_EQ(first.builds(), 1u);

  PchCache second(cache);  // another run: from disk
  PchCache::Result reused = second.get(args, src.string(), c.directory);
  EXPECT_FALSE(reused.built);
  EXPECT_EQ(reused.path, built.path);

  auto with_flag = syntax_only_arguments(c.argv, src.string(), {}, {"-DTRAINING=1"});
  PchCache::Result other = second.get(with_flag, src.string(), c.directory);
  EXPECT_TRUE(other.built);
  EXPECT_NE(other.path, built.path);

  // A header of the precompiled set changes: the next run rebuilds it.
  fs::path header = prefix / "include/torch/csrc/api/include/torch/torch.h";
  fs::last_write_time(header, fs::last_write_time(header) + std::chrono::seconds(5));
  PchCache third(cache);
  PchCache::Result rebuilt = third.get(args, src.string(), c.directory);
  EXPECT_TRUE(rebuilt.built);
  EXPECT_EQ(rebuilt.path, built.path);
}

TEST(PchCache, BoundedTheLeastRecentlyUsedGoFirst) {
  TempDir dir;
  fs::path prefix = fake_libtorch(dir, "libtorch", "#pragma once\nnamespace at { struct Tensor { int v = 0; }; }\n");
  fs::path src = dir.write("train.cpp", "#include <torch/torch.h>\nint main() { at::Tensor t; return t.v; }\n");
  CompileCommand c = fallback_command(src.string(), env_of({{"TORCH_INSTALL_PREFIX", prefix.string()}}));
  auto flags = [&](const std::string& define) {
    return syntax_only_arguments(c.argv, src.string(), {}, {"-D" + define + "=1"});
  };
  std::string cache = (dir.path() / "cache").string();
  PchCache::Result a = PchCache(cache).get(flags("A"), src.string(), c.directory);
  ASSERT_TRUE(a.error.empty()) << a.error;
  uint64_t one = fs::file_size(a.path);
  // Room for two and a half: the third build evicts the one used least recently.
  PchCache bounded(cache, one * 5 / 2);
  PchCache::Result b = bounded.get(flags("B"), src.string(), c.directory);
  ASSERT_TRUE(b.built);
  fs::last_write_time(a.path, fs::last_write_time(b.path) + std::chrono::seconds(2));  // A used after B
  PchCache::Result d = PchCache(cache, one * 5 / 2).get(flags("D"), src.string(), c.directory);
  ASSERT_TRUE(d.built);
  EXPECT_TRUE(fs::exists(a.path));
  EXPECT_FALSE(fs::exists(b.path));
  EXPECT_TRUE(fs::exists(d.path));
  EXPECT_EQ(PchCache(cache, one / 2).trim(d.path.substr(d.path.rfind('/') + 1, 16)), 1u);  // all but the kept one
  EXPECT_TRUE(fs::exists(d.path));
  EXPECT_FALSE(fs::exists(a.path));
}

TEST(PchCache, AppliesToFilesIncludingLibTorch) {
  EXPECT_TRUE(includes_libtorch("#include <vector>\n#include <torch/torch.h>\n"));
  EXPECT_TRUE(includes_libtorch("  #  include \"ATen/ATen.h\"\n"));
  EXPECT_FALSE(includes_libtorch("#include <vector>\n// #include <torch/torch.h>\n"));
  EXPECT_FALSE(includes_libtorch("#include \"mytorch/torch.h\"\n"));
}

// --- whole files through the engine ---------------------------------------------------

Config test_config() {
  Config config;
  config.cpp_cache_dir = TORCHLEAK_TEST_CACHE_DIR;
  return config;
}

const char* kTrainLoop = R"(#include <torch/torch.h>

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor total = torch::zeros({});
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model(torch::randn({8, 4})), torch::randn({8, 1}));
    loss.backward();
    optimizer.step();
    total += loss;
  }
  return total.item<float>() > 0;
}
)";

TEST(CppFrontend, CompilationDatabaseFlagsAreUsed) {
  TempDir dir;
  // Compiles only with the database's definition and include directory.
  std::string text = std::string("#ifndef FROM_DB\n#error compiled without the database\n#endif\n") + kTrainLoop;
  fs::path src = dir.write("src/train.cpp", text);
  auto install = find_libtorch([](const char* n) -> const char* { return std::getenv(n); });
  ASSERT_TRUE(install) << "LibTorch's headers are needed (libtorch-dev)";
  std::string flags = "-std=c++17 -DFROM_DB=1";
  for (const auto& d : install->include_dirs) flags += " -isystem " + d;
  dir.write("build/compile_commands.json", database(dir.path() / "build", src.string(), flags));
  Config config = test_config();
  config.cpp_database_dir = (dir.path() / "build").string();
  RunResult r = run_sources({{src.string(), text}}, config);
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().message;
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].rule_id, "TL001");
  EXPECT_EQ(r.diagnostics[0].start, (Position{15, 4}));
}

TEST(CppFrontend, MissingLibTorchHeadersAreAnErrorForTheFile) {
  TempDir dir;
  fs::path src = dir.write("train.cpp", kTrainLoop);
  // A database whose command lacks LibTorch's include directories.
  dir.write("compile_commands.json", database(dir.path(), src.string(), "-std=c++17"));
  RunResult r = run_sources({{src.string(), kTrainLoop}}, test_config());
  EXPECT_TRUE(r.diagnostics.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].path, src.string());
  const std::string& m = r.errors[0].message;
  EXPECT_EQ(m.rfind("LibTorch's headers were not found (<torch/torch.h>: file not found) with compile_commands.json in " +
                        dir.path().string() + ";",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("-p BUILD_DIR"), std::string::npos) << m;
  EXPECT_NE(m.find("--extra-arg=-I<libtorch>/include"), std::string::npos) << m;
}

TEST(CppFrontend, CompileErrorsReportNothingButTheError) {
  TempDir dir;
  std::string text = std::string(kTrainLoop) + "int broken() { return undeclared_name; }\n";
  fs::path src = dir.write("train.cpp", text);
  RunResult r = run_sources({{src.string(), text}}, test_config());
  EXPECT_TRUE(r.diagnostics.empty());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("does not compile with fallback flags"), std::string::npos)
      << r.errors[0].message;
  EXPECT_NE(r.errors[0].message.find("train.cpp:16: use of undeclared identifier 'undeclared_name'"),
            std::string::npos)
      << r.errors[0].message;
}

TEST(CppFrontend, ExtraArgReachesTheCompiler) {
  TempDir dir;
  // No LibTorch here: the flags alone decide whether it compiles.
  std::string text = "#ifndef EXTRA\n#error needs EXTRA\n#endif\nint main() { return EXTRA; }\n";
  fs::path src = dir.write("main.cpp", text);
  Config config = test_config();
  RunResult without = run_sources({{src.string(), text}}, config);
  ASSERT_EQ(without.errors.size(), 1u);
  EXPECT_NE(without.errors[0].message.find("main.cpp:2: needs EXTRA"), std::string::npos) << without.errors[0].message;
  config.cpp_extra_args = {"-DEXTRA=0"};
  RunResult with = run_sources({{src.string(), text}}, config);
  EXPECT_TRUE(with.errors.empty()) << with.errors.front().message;
  EXPECT_EQ(with.files_analyzed, 1u);
  config.cpp_extra_args.clear();
  config.cpp_extra_args_before = {"-DEXTRA=1"};
  EXPECT_TRUE(run_sources({{src.string(), text}}, config).errors.empty());
}

TEST(CppFrontend, NolintFormsAndTorchleakIgnore) {
  const char* text = R"(#include <torch/torch.h>

int main() {
  torch::nn::Linear model(4, 1); torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::Tensor a = torch::zeros({}), b = torch::zeros({}), c = torch::zeros({}), d = torch::zeros({}),
                e = torch::zeros({}), f = torch::zeros({}), g = torch::zeros({});
  for (int step = 0; step < 10; ++step) {
    auto loss = model(torch::randn({8, 4})).sum();
    a += loss;  // NOLINT
    b += loss;  // NOLINT(torchleak-accumulate-undetached)
    // NOLINTNEXTLINE(torchleak-*)
    c += loss;
    // NOLINTBEGIN(torchleak-accumulate-undetached)
    d += loss;
    // NOLINTEND(torchleak-accumulate-undetached)
    e += loss;  // torchleak: ignore[TL001]
    f += loss;  // NOLINT(bugprone-use-after-move)
    g += loss;
    opt.step();
  }
}
)";
  TempDir dir;
  fs::path src = dir.write("nolint.cpp", text);
  RunResult r = run_sources({{src.string(), text}}, test_config());
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().message;
  std::vector<uint32_t> lines;
  for (const auto& d : r.diagnostics) {
    EXPECT_EQ(d.rule_id, "TL001");
    lines.push_back(d.start.line);
  }
  EXPECT_EQ(lines, (std::vector<uint32_t>{17, 18}));
}

// --- the lexical check fixes are verified with ---------------------------------------

TEST(CppFrontend, ParsesChecksTokensAndBrackets) {
  const LanguageFrontend* f = frontend_for("train.cpp");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->language(), "cpp");
  EXPECT_TRUE(f->parses("int main() { total += loss.detach(); }\n"));
  EXPECT_FALSE(f->parses("int main() { total += (loss.detach(); }\n"));
  EXPECT_FALSE(f->parses("int main() { const char* s = \"unterminated; }\n"));
  EXPECT_TRUE(f->parses("// a comment with ( and {\nint x[2] = {1, 2};\n"));
}

// --- the clang-tidy module in the real clang-tidy ---------------------------------------

std::string run_command(const std::string& command, int& status) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  status = ::pclose(p);
  return out;
}

std::string clang_tidy_binary() {
  for (const char* name : {"clang-tidy-14", "clang-tidy"}) {
    int status = 0;
    run_command(std::string("command -v ") + name + " >/dev/null", status);
    if (status == 0) return name;
  }
  return {};
}

// Under AddressSanitizer (the asan preset) the module needs the ASan runtime
// first in clang-tidy, a program built without it: preload the runtime this
// test runs with. Leaks are not checked there: they would be clang-tidy's.
std::string sanitizer_preload() {
#if defined(__SANITIZE_ADDRESS__)
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    size_t path = line.find('/');
    if (path != std::string::npos && line.find("/libasan.so", path) != std::string::npos)
      return "LD_PRELOAD=" + line.substr(path) + " ASAN_OPTIONS=detect_leaks=0 ";
  }
#endif
  return "";
}

TEST(TidyModule, ClangTidyLoadsTheModuleAndReportsOnFixtures) {
  std::string module = TORCHLEAK_TIDY_MODULE;
  ASSERT_FALSE(module.empty()) << "the clang-tidy module was not built";
  std::string tidy = clang_tidy_binary();
  ASSERT_FALSE(tidy.empty()) << "clang-tidy is needed (Debian package clang-tidy)";
  tidy = sanitizer_preload() + tidy;
  auto install = find_libtorch([](const char* n) -> const char* { return std::getenv(n); });
  ASSERT_TRUE(install);
  std::string flags = " -- -std=c++17";
  for (const auto& d : install->include_dirs) flags += " -isystem " + d;

  int status = 0;
  std::string listed = run_command(tidy + " --load=" + module + " -checks='-*,torchleak-*' --list-checks", status);
  // Every C++ check is registered under its clang-tidy name.
  ASSERT_GE(torchleak::cpp::registered_checks().size(), 10u);
  for (const auto& check : torchleak::cpp::registered_checks())
    EXPECT_NE(listed.find("torchleak-" + check.name + "\n"), std::string::npos) << check.rule_id << "\n" << listed;

  TempDir dir;
  fs::path tl001 = dir.path() / "pos_epoch_total_tensor.cpp";
  fs::copy_file(fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures/cpp/TL001/pos_epoch_total_tensor.cpp", tl001);
  fs::path fixes = dir.path() / "fixes.yaml";
  std::string out = run_command(tidy + " --load=" + module + " -checks='-*,torchleak-*' --export-fixes=" +
                                    fixes.string() + " " + tl001.string() + flags,
                                status);
  EXPECT_NE(out.find(tl001.string() + ":29:7: warning: `total` accumulates `loss` with its autograd graph, keeping every iteration's graph alive"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("[torchleak-accumulate-undetached]"), std::string::npos) << out;
  EXPECT_NE(read(fixes).find("ReplacementText: '.detach()'"), std::string::npos) << read(fixes);

  fs::path tl003 = dir.path() / "pos_history_push_back.cpp";
  fs::copy_file(fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures/cpp/TL003/pos_history_push_back.cpp", tl003);
  out = run_command(tidy + " --load=" + module + " -checks='-*,torchleak-*' --fix " + tl003.string() + flags, status);
  EXPECT_NE(out.find(tl003.string() + ":24:5: warning: `history` keeps `h`"), std::string::npos) << out;
  EXPECT_NE(read(tl003).find("history.push_back(h.detach());  // expect: TL003"), std::string::npos);
}

}  // namespace
