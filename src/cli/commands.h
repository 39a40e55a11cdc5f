#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace torchleak {

struct CheckArgs {
  std::vector<std::string> paths;
  std::vector<std::string> select, ignore, exclude;
  std::vector<std::string> extend_select, extend_ignore;
  std::string format = "text";
  std::string output;
  std::string color = "auto";
  // --config: at most one configuration file, and any number of KEY=VALUE
  // settings (a TOML line) over every file's configuration.
  std::vector<std::string> config;
  std::string target_torch_version;
  bool exit_zero = false;
  bool statistics = false;
  bool quiet = false;
  bool silent = false;   // -s: print nothing; the exit code tells
  bool verbose = false;  // -v: which files, which configuration, how long
  bool show_settings = false, show_files = false;
  bool add_noqa = false;  // add `# noqa: TLnnn` to every finding's line
  bool fix_only = false, show_fixes = false, exit_non_zero_on_fix = false;
  std::string stdin_filename;  // `check -`: the path the standard input stands for
  bool no_gitignore = false;
  unsigned jobs = 0;
  uint64_t max_file_size = 10u << 20;  // bytes; 0: no limit
  // C++ (LibTorch): the build directory of compile_commands.json, and compiler
  // arguments appended to (or inserted before) every compile command.
  std::string build_path;
  std::vector<std::string> extra_args, extra_args_before;
  bool isolated = false;                    // read no configuration file, no project context
  std::string project_root;                 // --project-root
  std::vector<std::string> facts_files;     // --facts: other shards' facts
  bool no_cache = false;                    // --no-cache
  std::string cache_dir;                    // --cache-dir
  bool report_unused_suppressions = false;  // TL100
  std::string baseline, write_baseline;
  // Fixes: --fix writes the safe ones, --unsafe-fixes adds the unsafe ones,
  // --diff prints what --fix would write and writes nothing.
  bool fix = false, unsafe_fixes = false, diff = false;
};

struct RuleArgs {
  std::string name;
  bool all = false;
  bool table = false;
  std::string output_dir;
  std::string lang = "en";  // --lang / TORCHLEAK_LANG: the documentation's language
};

struct CleanArgs {
  std::vector<std::string> paths;  // the projects whose cache is removed (default: .)
  std::string cache_dir;
};

struct FactsArgs {
  std::vector<std::string> paths;
  std::vector<std::string> exclude;
  std::string output;
  bool no_gitignore = false;
  unsigned jobs = 0;
};

struct MergeSarifArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string category;
};

void add_check_options(CLI::App& cmd, CheckArgs& args);
void add_facts_options(CLI::App& cmd, FactsArgs& args);
int run_facts(const FactsArgs& args);
void add_merge_sarif_options(CLI::App& cmd, MergeSarifArgs& args);
int run_merge_sarif(const MergeSarifArgs& args);
void add_clean_options(CLI::App& cmd, CleanArgs& args);
int run_clean(const CleanArgs& args);
void add_rule_options(CLI::App& cmd, RuleArgs& args);
int run_check(const CheckArgs& args);
int run_rule(const RuleArgs& args);

// What CLI11 prints for a usage error, in the form of torchleak's other errors.
std::string usage_error_message(const CLI::App* app, const CLI::Error& e);

}  // namespace torchleak
