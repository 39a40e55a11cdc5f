// torchleak's command line: check, rule, lsp, facts, merge-sarif, clean, and --version.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/config_file.h"
#include "lsp/server.h"
#include "version.h"

using namespace torchleak;

int main(int argc, char** argv) {
  CLI::App app{"torchleak: finds the code patterns behind memory leaks and out-of-memory crashes in PyTorch training code"};
  app.set_version_flag("--version", std::string("torchleak ") + kVersion);
  app.require_subcommand(1);
  app.failure_message(usage_error_message);

  CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand("check", "Analyze Python training code (default path: .)");
  add_check_options(*check_cmd, check);

  RuleArgs rule;
  CLI::App* rule_cmd = app.add_subcommand("rule", "Print a rule's documentation");
  add_rule_options(*rule_cmd, rule);

  CLI::App* lsp_cmd = app.add_subcommand("lsp", "Run the language server on standard input and output");

  FactsArgs facts;
  CLI::App* facts_cmd =
      app.add_subcommand("facts", "Write the cross-file facts of a shard's files, for `check --facts` (docs/scaling.md)");
  add_facts_options(*facts_cmd, facts);

  MergeSarifArgs merge;
  CLI::App* merge_cmd = app.add_subcommand("merge-sarif", "Merge the SARIF reports of a run's shards into one run");
  add_merge_sarif_options(*merge_cmd, merge);

  CleanArgs clean;
  CLI::App* clean_cmd = app.add_subcommand("clean", "Remove the cache of a project (.torchleak_cache)");
  add_clean_options(*clean_cmd, clean);

  // An unknown command names the known ones (and the nearest, for a typo).
  if (argc > 1 && argv[1][0] != '-') {
    std::string given = argv[1];
    std::vector<std::string> known;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) known.push_back(sub->get_name());
    if (std::find(known.begin(), known.end(), given) == known.end()) {
      std::string nearest;
      size_t best = 3;
      for (const auto& k : known) {
        size_t d = edit_distance(given, k);
        if (d < best) {
          best = d;
          nearest = k;
        }
      }
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fmt::print(stderr, "torchleak: error: unknown command '{}' (the commands are {}){}\n", given, list,
                 nearest.empty() ? "" : fmt::format("; did you mean '{}'?", nearest));
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*check_cmd) return run_check(check);
  if (*rule_cmd) return run_rule(rule);
  if (*lsp_cmd) return lsp::Server().serve(0, 1);
  if (*clean_cmd) return run_clean(clean);
  if (*facts_cmd) return run_facts(facts);
  if (*merge_cmd) return run_merge_sarif(merge);
  return 2;
}
