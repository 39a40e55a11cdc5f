#include "core/discovery.h"
#include "core/analysis.h"

#include <fnmatch.h>
#include <git2.h>
#include <git2/sys/repository.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <map>
#include <memory>
#include <set>

namespace fs = std::filesystem;

namespace torchleak {

namespace {

// Directory names that hold installed packages, caches or build output, never
// the project's own code. Names a project may well use for its code (`env`
// for reinforcement-learning environments, `target`) are not listed: virtual
// environments and build trees are recognised by their marker files instead.
constexpr std::array<const char*, 12> kSkippedNames = {
    "__pycache__", "node_modules", "site-packages", "venv", "virtualenv", "build",
    "dist", "_build", "buck-out", "__pypackages__", "htmlcov", "wheelhouse"};

bool glob_matches(const std::string& glob, const std::string& path) {
  if (fnmatch(glob.c_str(), path.c_str(), 0) == 0) return true;
  // "dir/" or "dir/**" style: a prefix of the path.
  std::string prefix = glob;
  while (!prefix.empty() && (prefix.back() == '/' || prefix.back() == '*')) prefix.pop_back();
  return !prefix.empty() && prefix.size() < glob.size() && (path == prefix || path.rfind(prefix + "/", 0) == 0);
}

// A glob matches a file or directory by its name, by its path as reported, or
// by its path relative to the directory given on the command line.
bool excluded(const std::vector<std::string>& globs, const fs::path& path, const fs::path& root) {
  if (globs.empty()) return false;
  std::string whole = path.generic_string();
  if (whole.rfind("./", 0) == 0) whole.erase(0, 2);
  std::string under_root = path.lexically_normal().lexically_relative(root.lexically_normal()).generic_string();
  std::string name = path.filename().string();
  for (const auto& g : globs) {
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0 || glob_matches(g, whole)) return true;
    if (!under_root.empty() && under_root != "." && under_root.rfind("..", 0) != 0 && glob_matches(g, under_root))
      return true;
  }
  return false;
}

// A virtual environment or a build tree, recognised by its marker files.
bool is_environment_or_build(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "pyvenv.cfg", ec) || fs::exists(dir / "CMakeCache.txt", ec) ||
         fs::exists(dir / "conda-meta", ec);
}

// .gitignore rules through libgit2, one repository object per work tree.
class IgnoreRules {
 public:
  IgnoreRules() { git_libgit2_init(); }
  ~IgnoreRules() {
    for (auto& [root, repo] : repos_)
      if (repo) git_repository_free(repo);
    git_libgit2_shutdown();
  }
  IgnoreRules(const IgnoreRules&) = delete;
  IgnoreRules& operator=(const IgnoreRules&) = delete;

  bool ignored(const fs::path& path, bool is_dir) {
    std::error_code ec;
    fs::path abs = fs::absolute(path, ec).lexically_normal();
    if (ec) return false;
    git_repository* repo = repository_for(is_dir ? abs : abs.parent_path());
    if (!repo) return false;
    const char* wd = git_repository_workdir(repo);
    if (!wd) return false;
    fs::path rel = abs.lexically_relative(fs::path(wd));
    std::string r = rel.generic_string();
    if (r.empty() || r == "." || r.rfind("..", 0) == 0) return false;
    if (is_dir) r += "/";
    int result = 0;
    if (git_ignore_path_is_ignored(&result, repo, r.c_str()) != 0) return false;
    return result == 1;
  }

 private:
  git_repository* repository_for(const fs::path& dir) {
    auto it = repos_by_dir_.find(dir.string());
    if (it != repos_by_dir_.end()) return it->second;
    // A subdirectory of a known work tree that holds no repository of its
    // own (no .git entry: not a submodule, not a nested repository) belongs
    // to its parent's: one stat instead of opening the repository again.
    if (dir.has_relative_path()) {
      auto parent = repos_by_dir_.find(dir.parent_path().string());
      std::error_code ec;
      if (parent != repos_by_dir_.end() && parent->second && !fs::exists(dir / ".git", ec) && !ec)
        return repos_by_dir_[dir.string()] = parent->second;
    }
    git_repository* repo = nullptr;
    if (git_repository_open_ext(&repo, dir.c_str(), 0, nullptr) != 0) repo = nullptr;
    // The configuration as it is now: libgit2 otherwise checks every
    // configuration file for changes on each question.
    if (repo) {
      git_config* config = nullptr;
      git_config* snapshot = nullptr;
      if (git_repository_config(&config, repo) == 0 && git_config_snapshot(&snapshot, config) == 0)
        git_repository_set_config(repo, snapshot);
      git_config_free(snapshot);
      git_config_free(config);
    }
    // Share one object per work tree.
    if (repo) {
      const char* wd = git_repository_workdir(repo);
      std::string key = wd ? std::string("repo:") + wd : dir.string();
      auto existing = repos_.find(key);
      if (existing != repos_.end()) {
        git_repository_free(repo);
        repo = existing->second;
      } else {
        repos_[key] = repo;
      }
    }
    repos_by_dir_[dir.string()] = repo;
    return repo;
  }
  std::map<std::string, git_repository*> repos_;         // owned, one per work tree
  std::map<std::string, git_repository*> repos_by_dir_;  // lookup cache, not owned
};

}  // namespace

bool is_skipped_directory_name(const std::string& name) {
  if (name.size() > 1 && name[0] == '.') return true;  // hidden: .git, .venv, .tox, ...
  if (name.size() > 9 && name.substr(name.size() - 9) == ".egg-info") return true;
  return std::find_if(kSkippedNames.begin(), kSkippedNames.end(),
                      [&](const char* s) { return name == s; }) != kSkippedNames.end();
}

DiscoveredFiles discover(const std::vector<std::string>& paths, const DiscoveryOptions& options,
                         bool (*handles)(const std::string& path)) {
  DiscoveredFiles out;
  IgnoreRules ignore;
  std::set<std::string> seen;
  std::set<std::pair<dev_t, ino_t>> visited_dirs;  // guards against symlink loops
  auto add = [&](const std::string& p) {
    if (seen.insert(p).second) out.files.push_back(p);
  };
  for (const auto& given : paths) {
    std::error_code ec;
    fs::path root(given);
    fs::file_status st = fs::status(root, ec);
    if (ec || !fs::exists(st)) {
      out.errors.emplace_back(given, "no such file or directory");
      continue;
    }
    if (!fs::is_directory(st)) {
      if (!fs::is_regular_file(st)) {
        out.errors.emplace_back(given, "not a regular file");
        continue;
      }
      fs::path file = root.lexically_normal();
      if (excluded(options.exclude, file, file)) continue;
      if (options.excluded_by_config && options.excluded_by_config(file.generic_string())) continue;
      if (!handles(given)) {
        out.errors.emplace_back(given, is_cpp_source_path(given)
                                           ? "a C++ source file, and this build of torchleak has no LibTorch (C++) "
                                             "frontend: it needs a build with Clang's libraries (docs/install.md)"
                                           : "not a Python or C++ source file");
        continue;
      }
      add(file.generic_string());
      continue;
    }
    std::vector<fs::path> stack{root};
    while (!stack.empty()) {
      fs::path dir = stack.back();
      stack.pop_back();
      struct stat sb {};
      if (::stat(dir.c_str(), &sb) == 0 && !visited_dirs.insert({sb.st_dev, sb.st_ino}).second) continue;
      std::vector<fs::directory_entry> entries;
      fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
      if (ec) {
        out.errors.emplace_back(dir.generic_string(), "cannot read directory: " + ec.message());
        continue;
      }
      for (; it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        entries.push_back(*it);
      }
      std::sort(entries.begin(), entries.end(),
                [](const auto& a, const auto& b) { return a.path() > b.path(); });
      for (const auto& e : entries) {
        fs::path p = e.path();
        if (p.generic_string().rfind("./", 0) == 0) p = p.lexically_relative(".");
        std::string name = p.filename().string();
        std::error_code sec;
        bool is_dir = e.is_directory(sec);
        if (is_dir) {
          // A linked directory is not entered (as git does not): it would
          // report files twice, or walk out of the project.
          if (e.is_symlink(sec)) continue;
          if (is_skipped_directory_name(name) || excluded(options.exclude, p, root) || is_environment_or_build(p))
            continue;
          if (options.excluded_by_config && options.excluded_by_config(p.generic_string())) continue;
          if (options.respect_gitignore && ignore.ignored(p, true)) continue;
          stack.push_back(p);
          continue;
        }
        if (!e.is_regular_file(sec) || !handles(p.generic_string())) continue;
        if (excluded(options.exclude, p, root)) continue;
        if (options.excluded_by_config && options.excluded_by_config(p.generic_string())) continue;
        if (options.respect_gitignore && ignore.ignored(p, false)) continue;
        add(p.generic_string());
      }
    }
  }
  std::sort(out.files.begin(), out.files.end());
  return out;
}

std::string normal_absolute(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(path), ec);
  if (ec) p = fs::path(path);
  return p.lexically_normal().generic_string();
}

namespace {

bool configures_torchleak(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "torchleak.toml", ec) || fs::is_regular_file(dir / ".torchleak.toml", ec)) return true;
  fs::path pyproject = dir / "pyproject.toml";
  if (!fs::is_regular_file(pyproject, ec)) return false;
  std::ifstream in(pyproject);
  std::string line;
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 16, "[tool.torchleak]") == 0) return true;
  }
  return false;
}

}  // namespace

namespace {
// find_project_root's answers: absolute directory -> absolute root, "" for none.
std::mutex roots_lock;
std::map<std::string, std::string> known_roots;
}  // namespace

void forget_project_roots() {
  std::lock_guard<std::mutex> guard(roots_lock);
  known_roots.clear();
}

std::string find_project_root(const std::string& path) {
  std::mutex& lock = roots_lock;
  std::map<std::string, std::string>& known = known_roots;
  fs::path absolute = fs::path(normal_absolute(path));
  std::error_code ec;
  fs::path dir = fs::is_directory(absolute, ec) ? absolute : absolute.parent_path();
  std::string root;
  {
    std::lock_guard<std::mutex> guard(lock);
    if (auto it = known.find(dir.string()); it != known.end()) {
      root = it->second;
    } else {
      std::string repository;
      for (fs::path probe = dir;; probe = probe.parent_path()) {
        if (configures_torchleak(probe)) {
          root = probe.string();
          break;
        }
        if (repository.empty() && fs::exists(probe / ".git", ec)) repository = probe.string();
        if (!probe.has_relative_path()) break;  // the file system's root
      }
      if (root.empty()) root = repository;
      known[dir.string()] = root;
    }
  }
  if (root.empty() || fs::path(path).is_absolute()) return root;
  fs::path relative = fs::path(root).lexically_relative(fs::current_path(ec));
  return relative.empty() ? root : relative.generic_string();
}

}  // namespace torchleak
