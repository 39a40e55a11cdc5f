// Configuration files: `[tool.torchleak]` in pyproject.toml, or the top level
// of torchleak.toml / .torchleak.toml. For each analyzed file the nearest one
// walking up from its directory applies (as in ruff); `--config FILE` makes
// one file apply everywhere. Command-line settings are layered on top.
//
// A mistake in a configuration file (an unknown key, a wrong type, a TOML
// syntax error) is an error naming the file, the key and what was expected:
// the run does not start with settings the user did not mean.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace torchleak {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Levenshtein distance, for "did you mean" hints.
size_t edit_distance(std::string_view a, std::string_view b);

// The keys a configuration may set, in the order the documentation lists them.
const std::vector<std::string_view>& config_keys();

// Parses the text of a configuration file. `display_path` names it in errors;
// a file named pyproject.toml is read from its [tool.torchleak] table, any
// other from its top level. Returns nullopt for a pyproject.toml without that
// table (it is not torchleak's). `source` and `root` are left to the caller.
// Throws ConfigError.
std::optional<Config> parse_config(std::string_view text, const std::string& display_path);

// Reads and parses a configuration file. Throws ConfigError (also when the
// file cannot be read).
std::optional<Config> load_config_file(const std::string& path);

// A size in bytes: an integer, or a string such as "1GiB", "512 MiB", "1.5GB"
// (KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000, B is bytes).
std::optional<uint64_t> parse_size(std::string_view text);

// `file` (a configuration file's settings) with the command line's on top, as
// ruff layers them: --select replaces the file's select and ignore; --ignore
// adds to the file's ignore; --target-torch-version replaces; the extra-*
// lists and per-file-ignores add up. --exclude is applied by discovery.
Config layer_command_line(Config file, const Config& command_line);

// `to` with the keys `from` set (Config::keys_set) taken from `from`, as a
// configuration file layers on the one it extends and `--config KEY=VALUE`
// on every file's: extend-select and extend-ignore add, every other key replaces.
void apply_keys(Config& to, const Config& from);

// Finds the configuration of each file, once per directory.
class ConfigResolver {
 public:
  // `command_line`: the settings given on the command line. `config_file`:
  // --config, used for every file, or "" to discover the nearest one per file.
  // `discover`: false to use no configuration file at all.
  // `overrides`: `--config KEY=VALUE` settings, over every file's (apply_keys).
  ConfigResolver(Config command_line, std::string config_file, bool discover = true, Config overrides = {});

  // The settings for the file at `path`. Throws ConfigError.
  const Config& for_file(const std::string& path);
  // The settings for the files directly in directory `dir`. Throws ConfigError.
  const Config& for_directory(const std::filesystem::path& dir);

  // Whether a path met while walking a directory is excluded by the `exclude`
  // of the configuration that applies where it lies. Throws ConfigError.
  bool excluded(const std::string& path);

 private:
  const Config& defaults();
  Config layered(Config file) const;

  Config command_line_;
  Config overrides_;
  std::string config_file_;
  bool discover_;
  std::filesystem::path cwd_;
  std::map<std::string, std::unique_ptr<Config>> by_file_;   // configuration file -> settings
  std::map<std::string, const Config*> by_directory_;        // directory -> settings
  std::unique_ptr<Config> defaults_;
};

}  // namespace torchleak
