// Turning the paths a user gives into the files to analyze: directories are
// walked, .gitignore rules and --exclude globs respected, hidden directories,
// virtual environments and build trees skipped.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace torchleak {

struct DiscoveryOptions {
  std::vector<std::string> exclude;  // globs, matched against names, reported paths and paths under the root given
  bool respect_gitignore = true;
  // The `exclude` of configuration files, which depends on where a path lies
  // (core/config_file.h): true to skip the file or directory.
  std::function<bool(const std::string& path)> excluded_by_config;
};

struct DiscoveredFiles {
  std::vector<std::string> files;  // sorted, deduplicated, as they will be reported
  std::vector<std::pair<std::string, std::string>> errors;  // (path, reason)
};

// `handles` decides which files are analyzed. A file named explicitly is
// analyzed even when .gitignore matches it, skipped when an exclude glob does,
// and an error when no frontend takes it.
DiscoveredFiles discover(const std::vector<std::string>& paths, const DiscoveryOptions& options,
                         bool (*handles)(const std::string& path));

// The project a file belongs to: the directory of the nearest configuration
// file above it (torchleak.toml, .torchleak.toml, a pyproject.toml with a
// [tool.torchleak] table), else the root of the git repository holding it,
// else "" (a loose file). Spelled as `path` is: relative to the working
// directory when `path` is relative. Remembered per directory.
std::string find_project_root(const std::string& path);
// Forgets find_project_root's remembered answers: a long-lived process (the
// language server) calls it before each analysis, so that a configuration
// file or a repository created since is seen.
void forget_project_roots();

// A path as the file system knows it (absolute, normalized): two spellings of
// one file compare equal.
std::string normal_absolute(const std::string& path);

// Whether a directory name is one torchleak never descends into.
bool is_skipped_directory_name(const std::string& name);

}  // namespace torchleak
