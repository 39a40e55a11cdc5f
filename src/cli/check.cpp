#include <fmt/format.h>
#include <git2.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>

#include "cli/commands.h"
#include "core/baseline.h"
#include "core/catalogue.h"
#include "core/engine.h"
#include "report/report.h"

namespace fs = std::filesystem;

namespace torchleak {

namespace {

std::atomic<bool> g_cancel{false};

void on_signal(int) { g_cancel.store(true); }

// The directory %SRCROOT% stands for: the enclosing git work tree, else the
// working directory.
std::string find_srcroot() {
  std::error_code ec;
  std::string cwd = fs::current_path(ec).string();
  git_libgit2_init();
  git_repository* repo = nullptr;
  std::string root = cwd;
  if (git_repository_open_ext(&repo, cwd.c_str(), 0, nullptr) == 0) {
    if (const char* wd = git_repository_workdir(repo)) root = wd;
    git_repository_free(repo);
  }
  git_libgit2_shutdown();
  return fs::path(root).lexically_normal().string();
}

bool parse_format(const std::string& s, report::Format& f) {
  if (s == "text") f = report::Format::Text;
  else if (s == "json") f = report::Format::Json;
  else if (s == "sarif") f = report::Format::Sarif;
  else if (s == "github") f = report::Format::Github;
  else return false;
  return true;
}

// Unknown codes in --select/--ignore are a usage error, as in ruff.
bool validate_rule_list(const std::vector<std::string>& list, const char* option) {
  const Catalogue& catalogue = Catalogue::builtin();
  for (const auto& entry : list) {
    bool known = entry == "ALL";
    for (const auto& r : catalogue.rules()) known = known || rule_listed(r, {entry});
    if (!known) {
      fmt::print(stderr, "torchleak: error: {} names no rule: '{}' (see `torchleak rule --all`)\n", option, entry);
      return false;
    }
  }
  return true;
}

// Writes `text` to `path` through a temporary file and a rename, so an
// interrupted run never leaves a partial report behind.
bool write_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".torchleak-tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (g_cancel.load() || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

void add_check_options(CLI::App& cmd, CheckArgs& a) {
  cmd.add_option("PATHS", a.paths, "Files or directories to analyze");
  cmd.add_option("--select", a.select, "Only these rules (codes, names or prefixes)")->delimiter(',');
  cmd.add_option("--ignore", a.ignore, "Skip these rules (codes, names or prefixes)")->delimiter(',');
  cmd.add_option("--exclude", a.exclude, "Skip files and directories matching this glob")->delimiter(',');
  cmd.add_option("--format", a.format, "Output format")
      ->check(CLI::IsMember({"text", "json", "sarif", "github"}));
  cmd.add_option("-o,--output", a.output, "Write the report to this file instead of standard output");
  cmd.add_option("--color", a.color, "Colour the text output")->check(CLI::IsMember({"auto", "always", "never"}));
  cmd.add_option("--target-torch-version", a.target_torch_version,
                 "The PyTorch version the code runs on (major.minor)");
  cmd.add_flag("--exit-zero", a.exit_zero, "Exit 0 even when problems are found");
  cmd.add_flag("--statistics", a.statistics, "Count problems per rule");
  cmd.add_flag("-q,--quiet", a.quiet, "Print findings only, no source excerpt or summary");
  cmd.add_flag("--no-gitignore", a.no_gitignore, "Analyze files that .gitignore excludes");
  cmd.add_option("-j,--jobs", a.jobs, "Threads to analyze with (default: one per core)");
  cmd.add_option("-p,--build-path", a.build_path,
                 "C++: the build directory holding compile_commands.json (default: searched upward from each file)");
  cmd.add_option("--extra-arg", a.extra_args, "C++: an argument appended to every compile command (repeatable)");
  cmd.add_option("--extra-arg-before", a.extra_args_before,
                 "C++: an argument inserted before every compile command's own (repeatable)");
  CLI::Option* config = cmd.add_option(
      "--config", a.config,
      "Use this configuration file (pyproject.toml or torchleak.toml) for every file, instead of the nearest one");
  cmd.add_flag("--isolated", a.isolated, "Read no configuration file")->excludes(config);
  cmd.add_flag("--report-unused-suppressions", a.report_unused_suppressions,
               "Report suppression comments that silence nothing (TL100)");
  CLI::Option* baseline =
      cmd.add_option("--baseline", a.baseline, "Report only the findings not recorded in this baseline file");
  cmd.add_option("--write-baseline", a.write_baseline, "Record the current findings in this baseline file and exit")
      ->excludes(baseline);
}

int run_check(const CheckArgs& a) {
  report::Format format;
  if (!parse_format(a.format, format)) return 2;
  if (!validate_rule_list(a.select, "--select") || !validate_rule_list(a.ignore, "--ignore")) return 2;
  RunOptions options;
  if (!a.paths.empty()) options.paths = a.paths;
  options.config.select = a.select;
  options.config.ignore = a.ignore;
  options.config.exclude = a.exclude;
  options.config.target_torch_version = a.target_torch_version;
  options.config.cpp_database_dir = a.build_path;
  options.config.cpp_extra_args = a.extra_args;
  options.config.cpp_extra_args_before = a.extra_args_before;
  options.jobs = a.jobs;
  options.respect_gitignore = !a.no_gitignore;
  options.config_file = a.config;
  options.use_config_files = !a.isolated;
  options.report_unused_suppressions = a.report_unused_suppressions;
  options.cancel = &g_cancel;
  std::optional<Baseline> baseline;
  if (!a.baseline.empty()) {
    try {
      baseline = Baseline::load(a.baseline);
    } catch (const BaselineError& e) {
      fmt::print(stderr, "torchleak: error: {}\n", e.what());
      return 2;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  RunResult result = run(options);
  if (!result.fatal.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", result.fatal);
    return 2;
  }
  if (result.cancelled) {
    fmt::print(stderr, "torchleak: interrupted; no report written\n");
    return 130;
  }
  for (const auto& e : result.errors) fmt::print(stderr, "torchleak: error: {}: {}\n", e.path, e.message);
  if (!a.quiet)
    for (const auto& n : result.notes) fmt::print(stderr, "torchleak: note: {}: {}\n", n.path, n.message);
  if (!a.write_baseline.empty()) {
    Baseline recorded = Baseline::record(result.diagnostics, a.write_baseline);
    if (!write_atomically(a.write_baseline, recorded.serialize())) {
      fmt::print(stderr, "torchleak: error: {}: cannot write the baseline\n", a.write_baseline);
      return 2;
    }
    if (!a.quiet)
      fmt::print(stderr, "torchleak: recorded {} finding{} in {}\n", result.diagnostics.size(),
                 result.diagnostics.size() == 1 ? "" : "s", a.write_baseline);
    return result.errors.empty() ? 0 : 2;
  }
  if (baseline) {
    size_t gone = baseline->filter(result.diagnostics);
    if (gone && !a.quiet)
      fmt::print(stderr, "torchleak: note: {}: {} recorded finding{} no longer occur{}; --write-baseline updates it\n",
                 a.baseline, gone, gone == 1 ? "" : "s", gone == 1 ? "s" : "");
  }

  report::Options ropt;
  bool tty = a.output.empty() && ::isatty(STDOUT_FILENO);
  ropt.color = format == report::Format::Text && (a.color == "always" || (a.color == "auto" && tty));
  ropt.statistics = a.statistics;
  ropt.quiet = a.quiet;
  if (format == report::Format::Sarif) ropt.srcroot = find_srcroot();
  if (format == report::Format::Sarif && result.diagnostics.size() > 25000)
    fmt::print(stderr, "torchleak: warning: {} results; SARIF output keeps the first 25000 (code scanning's limit)\n",
               result.diagnostics.size());
  std::string text = report::render(format, result, ropt);
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  } else if (!write_atomically(a.output, text)) {
    fmt::print(stderr, "torchleak: error: {}: cannot write the report\n", a.output);
    return 2;
  }
  if (!result.errors.empty()) return 2;
  if (!result.diagnostics.empty() && !a.exit_zero) return 1;
  return 0;
}

int run_rule(const std::string& name, bool all, const std::string& output_dir) {
  const Catalogue& catalogue = Catalogue::builtin();
  if (all) {
    if (!output_dir.empty()) {
      std::error_code ec;
      fs::create_directories(output_dir, ec);
      for (const auto& r : catalogue.rules()) {
        std::ofstream out(fs::path(output_dir) / r.doc_file(), std::ios::binary | std::ios::trunc);
        out << render_rule_markdown(r);
        if (!out) {
          fmt::print(stderr, "torchleak: error: {}: cannot write\n", (fs::path(output_dir) / r.doc_file()).string());
          return 2;
        }
      }
      return 0;
    }
    bool first = true;
    for (const auto& r : catalogue.rules()) {
      if (!first) fmt::print("\n");
      first = false;
      fmt::print("{}", render_rule_markdown(r));
    }
    return 0;
  }
  if (name.empty()) {
    fmt::print(stderr, "torchleak: error: name a rule (TL001 or accumulate-undetached), or pass --all\n");
    return 2;
  }
  const RuleInfo* r = catalogue.find(name);
  if (!r) {
    fmt::print(stderr, "torchleak: error: no rule named '{}' (see `torchleak rule --all`)\n", name);
    return 2;
  }
  fmt::print("{}", render_rule_markdown(*r));
  return 0;
}

}  // namespace torchleak
