// `torchleak check`: discovery, analysis, one report, and the exit code
// (0 nothing found, 1 findings, 2 a usage error or a path not analyzed).
#include <fmt/format.h>
#include <git2.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "core/baseline.h"
#include "core/catalogue.h"
#include "core/config_file.h"
#include "core/engine.h"
#include "core/discovery.h"
#include "core/analysis_cache.h"
#include "core/fixer.h"
#include "report/report.h"

namespace fs = std::filesystem;

namespace torchleak {

namespace {

std::atomic<bool> g_cancel{false};

// The temporary report being written, for the signal handler to remove. Set
// before the file is created, cleared after the rename; a fixed buffer, since
// the handler may only use async-signal-safe calls.
char g_temporary[4096];
volatile std::sig_atomic_t g_temporary_set = 0;

// SIGINT and SIGTERM end the run at once, whatever file is being analyzed: a
// pathological file must not keep a pre-commit hook or a CI job waiting. The
// report is only ever written through a temporary file and a rename, so the
// only thing to clean up is that temporary file.
void on_signal(int sig) {
  g_cancel.store(true);
  if (g_temporary_set) ::unlink(g_temporary);
  constexpr char kMessage[] = "torchleak: interrupted; no report written\n";
  ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  (void)ignored;
  ::_exit(128 + sig);
}

// The directory %SRCROOT% (and GitHub's file=) stands for: the git work tree
// that holds the working directory, else the working directory itself.
std::string find_srcroot() {
  std::error_code ec;
  std::string root = fs::current_path(ec).string();
  git_libgit2_init();
  git_repository* repo = nullptr;
  if (git_repository_open_ext(&repo, root.c_str(), 0, nullptr) == 0) {
    if (const char* wd = git_repository_workdir(repo)) root = wd;
    git_repository_free(repo);
  }
  git_libgit2_shutdown();
  return fs::path(root).lexically_normal().string();
}

bool parse_format(const std::string& s, report::Format& f) {
  if (s == "text" || s == "full") f = report::Format::Text;
  else if (s == "concise") f = report::Format::Concise;
  else if (s == "grouped") f = report::Format::Grouped;
  else if (s == "pylint") f = report::Format::Pylint;
  else if (s == "azure") f = report::Format::Azure;
  else if (s == "junit") f = report::Format::Junit;
  else if (s == "json") f = report::Format::Json;
  else if (s == "sarif") f = report::Format::Sarif;
  else if (s == "github") f = report::Format::Github;
  else if (s == "gitlab") f = report::Format::Gitlab;
  else return false;
  return true;
}

// An entry of --select/--ignore that names no rule is a usage error: a typo
// would otherwise silently select nothing, or ignore nothing.
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

// NO_COLOR (no-color.org) turns colour off unless --color always asks for it.
bool use_color(const std::string& mode, bool to_terminal) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  return to_terminal && !(no_color && *no_color);
}

// Writes `text` to `path` through a temporary file in the same directory and
// a rename, so a failed or interrupted run never leaves a partial report.
// Missing parent directories are created. Returns "" or why it failed.
std::string write_atomically(const std::string& path, const std::string& text) {
  std::error_code ec;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) return fmt::format("cannot create directory {}: {}", parent.string(), ec.message());
  }
  std::string tmp = path + ".torchleak-tmp." + std::to_string(::getpid());
  if (tmp.size() >= sizeof g_temporary) return "path too long";
  std::memcpy(g_temporary, tmp.c_str(), tmp.size() + 1);
  g_temporary_set = 1;
  // Whatever happens below, the temporary file is gone or renamed on return.
  struct Unset {
    ~Unset() { g_temporary_set = 0; }
  } unset;
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return std::strerror(errno);
  bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int saved = errno;
  if (std::fclose(f) != 0 && written) {
    written = false;
    saved = errno;
  }
  if (!written) {
    std::remove(tmp.c_str());
    return std::strerror(saved);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    saved = errno;
    std::remove(tmp.c_str());
    return std::strerror(saved);
  }
  return {};
}

size_t fixes_in(const std::vector<FixedFile>& files) {
  size_t n = 0;
  for (const auto& f : files) n += static_cast<size_t>(f.fixes_applied);
  return n;
}

// "fixed 2 problems in 1 file; 1 remains (1 fixable with --unsafe-fixes)"
// on stderr, as ruff counts them.
void print_fix_summary(const FixReport& r, const std::vector<Diagnostic>& remaining, bool unsafe) {
  size_t fixes = fixes_in(r.files);
  size_t hidden = 0;
  if (!unsafe)
    for (const auto& d : remaining)
      if (d.fix && d.fix->safety == FixSafety::Unsafe && !d.fix->edits.empty()) ++hidden;
  fmt::print(stderr, "torchleak: fixed {} problem{} in {} file{}; {} remain{}{}\n", fixes, fixes == 1 ? "" : "s",
             r.files.size(), r.files.size() == 1 ? "" : "s", remaining.size(), remaining.size() == 1 ? "s" : "",
             hidden ? fmt::format(" ({} fixable with --unsafe-fixes)", hidden) : "");
}

// --diff: the fixes as one unified diff per file on standard output, nothing
// written; exit 1 when there is something to fix (as ruff --diff), 2 on an
// error.
int print_fix_diff(const RunOptions& options, const CheckArgs& a) {
  FixOptions fo;
  fo.unsafe = a.unsafe_fixes;
  fo.write = false;
  FixReport r = fix(options, fo);
  if (!r.remaining.fatal.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", r.remaining.fatal);
    return 2;
  }
  if (r.remaining.cancelled) {
    fmt::print(stderr, "torchleak: interrupted\n");
    return 130;
  }
  for (const auto& e : r.remaining.errors) fmt::print(stderr, "torchleak: error: {}: {}\n", e.path, e.message);
  for (const auto& e : r.dropped) fmt::print(stderr, "torchleak: warning: {}: {}\n", e.path, e.message);
  std::string text;
  for (const auto& f : r.files) text += unified_diff(f.path, f.original, f.fixed);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0) {
    fmt::print(stderr, "torchleak: error: cannot write the diff to standard output: {}\n", std::strerror(errno));
    return 2;
  }
  size_t fixes = fixes_in(r.files);
  if (!a.quiet)
    fmt::print(stderr, "torchleak: would fix {} problem{} in {} file{}\n", fixes, fixes == 1 ? "" : "s",
               r.files.size(), r.files.size() == 1 ? "" : "s");
  if (!r.remaining.errors.empty()) return 2;
  return fixes > 0 ? 1 : 0;
}

// --show-fixes: what --fix fixed, per file and rule, on standard error.
//   Fixed 3 problems:
//   - train.py:
//       2 × TL001 (accumulate-undetached)
void print_fixes_applied(const FixReport& r) {
  size_t total = fixes_in(r.files);
  if (total == 0) return;
  const Catalogue& catalogue = Catalogue::builtin();
  std::string out = fmt::format("Fixed {} problem{}:\n", total, total == 1 ? "" : "s");
  for (const auto& f : r.files) {
    out += fmt::format("- {}:\n", f.path);
    for (const auto& [rule, n] : f.rules_fixed) {
      const RuleInfo* info = catalogue.find(rule);
      out += fmt::format("    {} \u00d7 {} ({})\n", n, rule, info ? info->name : "");
    }
  }
  std::fwrite(out.data(), 1, out.size(), stderr);
}

// --add-noqa: a suppression on the line of every finding; exit 0 (2 on an error).
int print_add_noqa(const RunOptions& options, const CheckArgs& a, bool from_stdin) {
  NoqaReport r = add_noqa(options, !from_stdin);
  if (!r.result.fatal.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", r.result.fatal);
    return 2;
  }
  for (const auto& e : r.result.errors) fmt::print(stderr, "torchleak: error: {}: {}\n", e.path, e.message);
  for (const auto& e : r.skipped) fmt::print(stderr, "torchleak: warning: {}: {}\n", e.path, e.message);
  for (const auto& e : r.write_errors)
    fmt::print(stderr, "torchleak: error: {}: cannot write the directives: {}\n", e.path, e.message);
  if (from_stdin) {
    std::string out = r.files.empty() ? options.overlays.begin()->second : r.files.front().fixed;
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  size_t n = 0;
  for (const auto& f : r.files) n += static_cast<size_t>(f.fixes_applied);
  if (!a.quiet)
    fmt::print(stderr, "torchleak: added {} noqa directive{} to {} file{}\n", n, n == 1 ? "" : "s", r.files.size(),
               r.files.size() == 1 ? "" : "s");
  return r.result.errors.empty() && r.write_errors.empty() ? 0 : 2;
}

// --show-files: the files a run would analyze, one per line; --show-settings:
// the settings of the first, and where they come from.
int show_files_or_settings(RunOptions options, const CheckArgs& a) {
  options.list_only = true;
  RunResult r = run(options);
  if (!r.fatal.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", r.fatal);
    return 2;
  }
  for (const auto& e : r.errors) fmt::print(stderr, "torchleak: error: {}: {}\n", e.path, e.message);
  std::string out;
  if (a.show_files) {
    for (const auto& f : r.files) out += f + "\n";
  } else if (r.first_config) {
    const Config& c = *r.first_config;
    auto list = [](const std::vector<std::string>& v) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}\"{}\"", i ? ", " : "", v[i]);
      return s + "]";
    };
    out += fmt::format("Resolved settings for: \"{}\"\n", r.files.front());
    out += fmt::format("Settings path: {}\n\n", c.source.empty() ? "(none: the defaults)" : "\"" + c.source + "\"");
    std::string enabled;
    for (const auto& rule : Catalogue::builtin().rules())
      if (c.rule_enabled(rule)) enabled += (enabled.empty() ? "" : ", ") + rule.id;
    out += fmt::format("enabled rules = [{}]\n", enabled);
    out += fmt::format("select = {}\nextend-select = {}\nignore = {}\nexclude = {}\n", list(c.select),
                       list(c.extend_select), list(c.ignore), list(c.exclude));
    out += "per-file-ignores = {";
    for (size_t i = 0; i < c.per_file_ignores.size(); ++i)
      out += fmt::format("{}\"{}\" = {}", i ? ", " : "", c.per_file_ignores[i].pattern,
                         list(c.per_file_ignores[i].rules));
    out += "}\n";
    out += fmt::format("target-torch-version = \"{}\"\n",
                       c.target_torch_version.empty() ? "current" : c.target_torch_version);
    out += fmt::format("device-memory = {}\noversized-layer-threshold = {}\n", c.device_memory_bytes,
                       c.oversized_layer_bytes);
    out += fmt::format("extra-models = {}\nextra-losses = {}\nextra-optimizers = {}\nextra-data-parallel = {}\n",
                       list(c.extra_models), list(c.extra_losses), list(c.extra_optimizers),
                       list(c.extra_data_parallel));
    out += fmt::format("models = {}\n", list(c.model_files));
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return r.errors.empty() ? 0 : 2;
}

}  // namespace

void add_check_options(CLI::App& cmd, CheckArgs& a) {
  cmd.add_option("PATHS", a.paths, "Files or directories to analyze (default: .)");
  // One value per occurrence (comma-separated, or the option repeated): a
  // list option must not swallow the paths that follow it.
  cmd.add_option("--select", a.select, "Only these rules: codes, names or code prefixes, comma-separated")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--ignore", a.ignore, "Skip these rules: codes, names or code prefixes, comma-separated")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--exclude", a.exclude, "Skip files and directories matching these globs, comma-separated")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--extend-select", a.extend_select,
                 "Also these rules, beside the selected ones: codes, names or code prefixes, comma-separated")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--extend-ignore", a.extend_ignore, "Skip these rules too (as --ignore)")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--output-format,--format", a.format,
                 "Output format: full (also text), concise, grouped, json, sarif, github, gitlab, junit, pylint or "
                 "azure")
      ->envname("TORCHLEAK_OUTPUT_FORMAT")
      ->check(CLI::IsMember(
          {"text", "full", "concise", "grouped", "json", "sarif", "github", "gitlab", "junit", "pylint", "azure"}));
  cmd.add_option("-o,--output-file,--output", a.output, "Write the report to this file instead of standard output")
      ->envname("TORCHLEAK_OUTPUT_FILE");
  cmd.add_option("--color", a.color, "Colour the text report: auto (on a terminal), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd.add_option("--target-torch-version", a.target_torch_version,
                 "The PyTorch version the code runs on (major.minor)");
  cmd.add_flag("-e,--exit-zero", a.exit_zero, "Exit 0 even when problems are found");
  cmd.add_flag("--statistics", a.statistics, "Count problems per rule instead of listing them");
  CLI::Option* quiet = cmd.add_flag("-q,--quiet", a.quiet, "Print the findings only: no summary, no notes");
  CLI::Option* silent =
      cmd.add_flag("-s,--silent", a.silent, "Print nothing, not even the findings; the exit code says what was found");
  cmd.add_flag("-v,--verbose", a.verbose,
               "Also say on standard error which files are analyzed with which configuration, and how long it took")
      ->excludes(quiet)
      ->excludes(silent);
  cmd.add_flag("--show-settings", a.show_settings,
               "Print the settings that apply to the first file, and the file they come from, and exit");
  cmd.add_flag("--show-files", a.show_files, "Print the files that would be analyzed, and exit");
  cmd.add_option("--stdin-filename", a.stdin_filename,
                 "With the path `-`: the file the standard input is (for its configuration and the report)");
  cmd.add_flag("--no-gitignore", a.no_gitignore, "Also analyze files that .gitignore excludes");
  cmd.add_option("-j,--jobs", a.jobs, "Threads to analyze with (default: one per core)");
  cmd.add_option("--max-file-size", a.max_file_size,
                 "Skip files larger than this, with a note: bytes, or with a unit (500KiB, 10MiB); 0: no limit "
                 "(default: 10MiB)")
      ->transform(CLI::AsSizeValue(false));
  cmd.add_option("-p,--build-path", a.build_path,
                 "C++: the build directory holding compile_commands.json (default: searched upward from each file)");
  // One value per flag, as clang-tidy's: `--extra-arg=-DX train.cpp` must not take the path.
  cmd.add_option("--extra-arg", a.extra_args, "C++: an argument appended to every compile command (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--extra-arg-before", a.extra_args_before,
                 "C++: an argument inserted before every compile command's own (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* config = cmd.add_option(
      "--config", a.config,
      "Use this configuration file (pyproject.toml or torchleak.toml) for every file, instead of the nearest one; "
      "or KEY=VALUE: a setting over every file's configuration, as a TOML line (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* isolated =
      cmd.add_flag("--isolated", a.isolated,
                   "Read no configuration file, and analyze the named files alone (not in the context of their "
                   "project)")
          ->excludes(config);
  cmd.add_option("--project-root", a.project_root,
                 "Analyze the named files in the context of this project (default: the directory of the nearest "
                 "configuration file, else the repository's root)")
      ->excludes(isolated);
  cmd.add_option("--facts", a.facts_files,
                 "The facts of the project's other files, written by `torchleak facts` for another shard "
                 "(repeatable); they stand for the project")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->excludes(isolated);
  cmd.add_flag("--no-cache", a.no_cache, "Read and write no cache of the files' facts and findings");
  cmd.add_option("--cache-dir", a.cache_dir,
                 "Keep the cache here (default: $TORCHLEAK_CACHE_DIR, else .torchleak_cache at the project's root)");
  cmd.add_flag("--report-unused-suppressions", a.report_unused_suppressions,
               "Report suppression comments that silence nothing (TL100)");
  CLI::Option* baseline =
      cmd.add_option("--baseline", a.baseline, "Report only the findings not recorded in this baseline file");
  cmd.add_option("--write-baseline", a.write_baseline, "Record the current findings in this baseline file and exit")
      ->excludes(baseline);
  CLI::Option* fix = cmd.add_flag("--fix", a.fix, "Apply the safe fixes to the files, then report what remains");
  CLI::Option* fix_only = cmd.add_flag("--fix-only", a.fix_only,
                                       "Apply the safe fixes and report nothing of what remains (implies --fix)");
  cmd.add_flag("--show-fixes", a.show_fixes, "With --fix: list the fixes applied, per file");
  cmd.add_flag("--exit-non-zero-on-fix", a.exit_non_zero_on_fix,
               "With --fix: exit 1 when a file was changed, even if nothing remains");
  CLI::Option* add_noqa = cmd.add_flag("--add-noqa", a.add_noqa,
                                       "Add `# noqa: TLnnn` to the line of every finding (idempotent), and exit");
  add_noqa->excludes(fix)->excludes(fix_only);
  CLI::Option* diff =
      cmd.add_flag("--diff", a.diff, "Print the fixes as a unified diff instead of writing them; exit 1 if there are any");
  cmd.add_flag("--unsafe-fixes", a.unsafe_fixes, "With --fix or --diff: also the fixes that may change behaviour");
  diff->excludes(fix);
  fix->excludes("--write-baseline");
  diff->excludes("--write-baseline");
}

int run_check(const CheckArgs& given) {
  CheckArgs a = given;
  if (a.fix_only) a.fix = true;
  if (a.silent) a.quiet = true;
  report::Format format;
  if (!parse_format(a.format, format)) return 2;
  if (!validate_rule_list(a.select, "--select") || !validate_rule_list(a.ignore, "--ignore") ||
      !validate_rule_list(a.extend_select, "--extend-select") ||
      !validate_rule_list(a.extend_ignore, "--extend-ignore"))
    return 2;
  // --config: one configuration file, and KEY=VALUE settings over every file's.
  std::string config_file;
  Config overrides;
  for (const std::string& c : a.config) {
    std::error_code ec;
    if (c.find('=') != std::string::npos && !fs::exists(c, ec)) {
      try {
        std::optional<Config> parsed = parse_config(c + "\n", "--config");
        if (parsed) apply_keys(overrides, *parsed);
      } catch (const ConfigError& e) {
        fmt::print(stderr, "torchleak: error: {}\n", e.what());
        return 2;
      }
    } else if (!config_file.empty()) {
      fmt::print(stderr, "torchleak: error: --config names two configuration files ({} and {}); give one\n",
                 config_file, c);
      return 2;
    } else {
      config_file = c;
    }
  }
  if (a.isolated && !config_file.empty()) {
    fmt::print(stderr, "torchleak: error: --isolated reads no configuration file, and --config names one\n");
    return 2;
  }
  // `check -`: the standard input, as the file --stdin-filename names.
  bool from_stdin = a.paths.size() == 1 && a.paths.front() == "-";
  std::string stdin_text;
  if (from_stdin) {
    std::string chunk(1 << 16, '\0');
    size_t n;
    while ((n = std::fread(chunk.data(), 1, chunk.size(), stdin)) > 0) stdin_text.append(chunk, 0, n);
    if (std::ferror(stdin)) {
      fmt::print(stderr, "torchleak: error: cannot read standard input: {}\n", std::strerror(errno));
      return 2;
    }
    a.paths = {a.stdin_filename.empty() ? std::string("stdin.py") : a.stdin_filename};
  } else if (!a.stdin_filename.empty()) {
    fmt::print(stderr, "torchleak: error: --stdin-filename goes with the path `-` (the standard input)\n");
    return 2;
  }
  if (a.statistics && format != report::Format::Text && format != report::Format::Json) {
    fmt::print(stderr, "torchleak: error: --statistics goes with --format text (json always has them)\n");
    return 2;
  }
  RunOptions options;
  if (!a.paths.empty()) options.paths = a.paths;
  options.config.select = a.select;
  options.config.extend_select = a.extend_select;
  options.config.ignore = a.ignore;
  options.config.ignore.insert(options.config.ignore.end(), a.extend_ignore.begin(), a.extend_ignore.end());
  options.config_overrides = overrides;
  if (from_stdin) options.overlays[a.paths.front()] = stdin_text;
  options.config.exclude = a.exclude;
  options.config.target_torch_version = a.target_torch_version;
  options.config.cpp_database_dir = a.build_path;
  options.config.cpp_extra_args = a.extra_args;
  options.config.cpp_extra_args_before = a.extra_args_before;
  options.jobs = a.jobs;
  options.max_file_size = a.max_file_size;
  options.respect_gitignore = !a.no_gitignore;
  options.config_file = config_file;
  options.use_config_files = !a.isolated;
  options.project_context = !a.isolated;
  options.project_root = a.project_root;
  const char* no_cache_env = std::getenv("TORCHLEAK_NO_CACHE");
  options.use_cache = !a.no_cache && !(no_cache_env && *no_cache_env && std::string_view(no_cache_env) != "0");
  options.facts_files = a.facts_files;
  options.cache_dir = a.cache_dir;
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
  if ((a.show_fixes || a.exit_non_zero_on_fix) && !a.fix) {
    fmt::print(stderr, "torchleak: error: {} goes with --fix\n", a.show_fixes ? "--show-fixes" : "--exit-non-zero-on-fix");
    return 2;
  }
  if (a.show_files || a.show_settings) return show_files_or_settings(options, a);
  if (a.unsafe_fixes && !a.fix && !a.diff) {
    fmt::print(stderr, "torchleak: error: --unsafe-fixes goes with --fix or --diff\n");
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  if (a.verbose) {
    RunOptions list = options;
    list.list_only = true;
    RunResult files = run(list);
    for (size_t i = 0; i < files.files.size(); ++i)
      fmt::print(stderr, "torchleak: verbose: {}: settings from {}\n", files.files[i],
                 files.settings_sources[i].empty() ? "the defaults" : files.settings_sources[i]);
  }
  if (a.diff) return print_fix_diff(options, a);
  if (a.add_noqa) return print_add_noqa(options, a, from_stdin);
  std::optional<FixReport> fixed;
  if (a.fix) {
    FixOptions fo;
    fo.unsafe = a.unsafe_fixes;
    fo.write = !from_stdin;  // the fixed standard input goes to standard output
    fixed = fix(options, fo);
  }
  RunResult result = fixed ? std::move(fixed->remaining) : run(options);
  if (!result.fatal.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", result.fatal);
    return 2;
  }
  if (result.cancelled) {
    fmt::print(stderr, "torchleak: interrupted; no report written\n");
    return 130;
  }
  for (const auto& e : result.errors) fmt::print(stderr, "torchleak: error: {}: {}\n", e.path, e.message);
  bool write_failed = false;
  if (fixed) {
    for (const auto& e : fixed->dropped) fmt::print(stderr, "torchleak: warning: {}: {}\n", e.path, e.message);
    for (const auto& e : fixed->write_errors) fmt::print(stderr, "torchleak: error: {}: cannot write the fixes: {}\n", e.path, e.message);
    write_failed = !fixed->write_errors.empty();
  }
  if (!a.quiet)
    for (const auto& n : result.notes) fmt::print(stderr, "torchleak: note: {}: {}\n", n.path, n.message);
  if (!a.write_baseline.empty()) {
    Baseline recorded = Baseline::record(result.diagnostics, a.write_baseline);
    if (std::string why = write_atomically(a.write_baseline, recorded.serialize()); !why.empty()) {
      fmt::print(stderr, "torchleak: error: {}: cannot write the baseline: {}\n", a.write_baseline, why);
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

  if (a.verbose)
    fmt::print(stderr, "torchleak: verbose: {} file{} checked ({} from the cache), {} other file{} of the project read "
               "for {} ({} from the cache{}), in {:.2f} s\n",
               result.files_analyzed, result.files_analyzed == 1 ? "" : "s", result.cached_findings, result.context_files,
               result.context_files == 1 ? "" : "s", result.context_files == 1 ? "its facts" : "their facts",
               result.cached_files, result.cache_dir.empty() ? ": none" : " in " + result.cache_dir, result.seconds);
  if (fixed && !a.quiet) print_fix_summary(*fixed, result.diagnostics, a.unsafe_fixes);
  if (fixed && a.show_fixes && !a.silent) print_fixes_applied(*fixed);
  // --fix on the standard input: the fixed text on standard output, the
  // findings that remain on standard error.
  bool report_to_stderr = false;
  if (fixed && from_stdin) {
    std::string out = fixed->files.empty() ? stdin_text : fixed->files.front().fixed;
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    report_to_stderr = a.output.empty();
  }
  bool changed = fixed && !fixed->files.empty();
  if (a.fix_only || a.silent) {
    if (!result.errors.empty() || write_failed) return 2;
    if (a.fix_only) return a.exit_non_zero_on_fix && changed ? 1 : 0;
    if (a.exit_non_zero_on_fix && changed) return 1;
    return !result.diagnostics.empty() && !a.exit_zero ? 1 : 0;
  }

  report::Options ropt;
  ropt.color = format == report::Format::Text && use_color(a.color, a.output.empty() && ::isatty(STDOUT_FILENO));
  ropt.statistics = a.statistics;
  ropt.quiet = a.quiet;
  if (format == report::Format::Sarif || format == report::Format::Github || format == report::Format::Gitlab)
    ropt.srcroot = find_srcroot();
  if (format == report::Format::Sarif && result.diagnostics.size() > 25000)
    fmt::print(stderr, "torchleak: warning: {} results; the SARIF report keeps the first 25000 (code scanning's limit)\n",
               result.diagnostics.size());
  std::string text = report::render(format, result, ropt);
  if (report_to_stderr) {
    std::fwrite(text.data(), 1, text.size(), stderr);
  } else if (a.output.empty()) {
    bool written = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
    if (!written) {
      fmt::print(stderr, "torchleak: error: cannot write the report to standard output: {}\n", std::strerror(errno));
      return 2;
    }
  } else if (std::string why = write_atomically(a.output, text); !why.empty()) {
    fmt::print(stderr, "torchleak: error: {}: cannot write the report: {}\n", a.output, why);
    return 2;
  }
  if (!result.errors.empty() || write_failed) return 2;
  if (a.exit_non_zero_on_fix && changed) return 1;
  if (!result.diagnostics.empty() && !a.exit_zero) return 1;
  return 0;
}

std::string usage_error_message(const CLI::App*, const CLI::Error& e) {
  return fmt::format("torchleak: error: {}\nRun with --help for more information.\n", e.what());
}

void add_clean_options(CLI::App& cmd, CleanArgs& a) {
  cmd.add_option("PATHS", a.paths, "Directories of the projects whose cache is removed (default: .)");
  cmd.add_option("--cache-dir", a.cache_dir, "The cache to remove (default: as `check` finds it)");
}

int run_clean(const CleanArgs& a) {
  std::vector<std::string> paths = a.paths.empty() ? std::vector<std::string>{"."} : a.paths;
  std::set<std::string> roots;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
      fmt::print(stderr, "torchleak: error: {}: not a directory\n", p);
      return 2;
    }
    std::string project = find_project_root(p);
    std::string root = cache_root(a.cache_dir, project.empty() ? p : project);
    if (!root.empty()) roots.insert(root);
  }
  size_t removed = 0;
  for (const std::string& root : roots) removed += clean_analysis_cache(root);
  fmt::print("torchleak: removed {} cache {}\n", removed, removed == 1 ? "entry" : "entries");
  return 0;
}

void add_facts_options(CLI::App& cmd, FactsArgs& a) {
  cmd.add_option("PATHS", a.paths, "The shard's files or directories (default: .)");
  cmd.add_option("-o,--output", a.output, "Write the facts to this file")->required();
  cmd.add_option("--exclude", a.exclude, "Skip files and directories matching these globs, comma-separated")
      ->delimiter(',');
  cmd.add_flag("--no-gitignore", a.no_gitignore, "Also read files that .gitignore excludes");
  cmd.add_option("-j,--jobs", a.jobs, "Threads to analyze with (default: one per core)");
}

int run_facts(const FactsArgs& a) {
  RunOptions options;
  if (!a.paths.empty()) options.paths = a.paths;
  options.config.exclude = a.exclude;
  options.respect_gitignore = !a.no_gitignore;
  options.jobs = a.jobs;
  options.project_context = false;  // the shard's own facts
  options.use_cache = false;
  options.keep_facts = true;
  options.cancel = &g_cancel;
  RunResult result = run(options);
  if (!result.fatal.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", result.fatal);
    return 2;
  }
  for (const auto& e : result.errors) fmt::print(stderr, "{}: error: {}\n", e.path, e.message);
  std::set<std::string> files;
  for (const auto& f : result.facts) files.insert(f.file);
  try {
    write_facts_file(a.output, std::vector<std::string>(files.begin(), files.end()), result.facts);
  } catch (const std::exception& e) {
    fmt::print(stderr, "torchleak: error: {}\n", e.what());
    return 2;
  }
  fmt::print(stderr, "torchleak: wrote {} facts of {} files to {}\n", result.facts.size(), result.files_analyzed,
             a.output);
  return result.errors.empty() ? 0 : 2;
}

void add_merge_sarif_options(CLI::App& cmd, MergeSarifArgs& a) {
  cmd.add_option("INPUTS", a.inputs, "The shards' SARIF reports (torchleak check --format sarif)")->required();
  cmd.add_option("-o,--output", a.output, "Write the merged report to this file instead of standard output");
  cmd.add_option("--category", a.category,
                 "The run's category for code scanning (runs[0].automationDetails.id), e.g. torchleak");
}

int run_merge_sarif(const MergeSarifArgs& a) {
  std::string merged;
  try {
    merged = report::merge_sarif_runs(a.inputs, a.category);
  } catch (const std::exception& e) {
    fmt::print(stderr, "torchleak: error: {}\n", e.what());
    return 2;
  }
  if (a.output.empty()) {
    fmt::print("{}", merged);
    return 0;
  }
  if (std::string why = write_atomically(a.output, merged); !why.empty()) {
    fmt::print(stderr, "torchleak: error: {}\n", why);
    return 2;
  }
  return 0;
}

}  // namespace torchleak
