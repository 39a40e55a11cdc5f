// torchleak's command line: check, rule, and --version.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "lsp/server.h"
#include "version.h"

using namespace torchleak;

int main(int argc, char** argv) {
  CLI::App app{"torchleak: finds the code patterns behind memory leaks and out-of-memory crashes in PyTorch training code"};
  app.set_version_flag("--version", std::string("torchleak ") + kVersion);
  app.require_subcommand(1);

  CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand("check", "Analyze Python training code (default path: .)");
  add_check_options(*check_cmd, check);

  std::string rule_name;
  bool rule_all = false;
  std::string rule_output_dir;
  CLI::App* rule_cmd = app.add_subcommand("rule", "Print a rule's documentation");
  rule_cmd->add_option("RULE", rule_name, "A rule code (TL001) or name (accumulate-undetached)");
  rule_cmd->add_flag("--all", rule_all, "Print every rule");
  rule_cmd->add_option("--output-dir", rule_output_dir,
                       "With --all: write one Markdown page per rule into this directory");

  CLI::App* lsp_cmd = app.add_subcommand("lsp", "Run the language server on standard input and output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*check_cmd) return run_check(check);
  if (*rule_cmd) return run_rule(rule_name, rule_all, rule_output_dir);
  if (*lsp_cmd) return lsp::Server().serve(0, 1);
  return 2;
}
