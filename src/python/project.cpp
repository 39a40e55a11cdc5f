#include "python/project.h"

#include "core/analysis_cache.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <list>
#include <memory>
#include <sstream>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "python/model.h"

namespace torchleak::python {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxKept = 48;                          // models kept per thread
constexpr std::uintmax_t kMaxBytes = std::uintmax_t{4} << 20;  // larger files are not read
constexpr int kMaxRootLevels = 16;                       // directories climbed to find the root

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// What the file system said, remembered per thread for a second at most
// (begin_file_analysis forgets older answers): the files of one run ask
// about the same directories, and an editor's next run sees new files.
std::unordered_map<std::string, bool>& project_roots() {
  thread_local std::unordered_map<std::string, bool> roots;
  return roots;
}

std::chrono::steady_clock::time_point& remembered_since() {
  thread_local std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  return since;
}

bool is_project_root(const fs::path& dir) {
  auto& known = project_roots();
  auto [it, fresh] = known.try_emplace(dir.string(), false);
  if (!fresh) return it->second;
  std::error_code ec;
  for (std::string_view marker : kProjectRootMarkers)
    if (fs::exists(dir / marker, ec)) it->second = true;
  return it->second;
}

// The directories an import looked in (absolute, normal paths): a module
// created in one of them later may change what the import finds.
using Looked = std::vector<std::string>;

void looked_in(const fs::path& dir, Looked& looked) {
  std::error_code ec;
  fs::path absolute = fs::absolute(dir, ec);
  if (ec) return;
  std::string path = absolute.lexically_normal().string();
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  if (std::find(looked.begin(), looked.end(), path) == looked.end()) looked.push_back(std::move(path));
}

// `dir/a/b.py` or `dir/a/b/__init__.py` for module "a.b"; "" names the package `dir` itself.
// `looked` receives `dir` and the directories of the path that exist.
std::string module_in(const fs::path& dir, std::string_view module, Looked& looked) {
  fs::path p = dir;
  std::string_view rest = module;
  std::error_code ec;
  bool exists = fs::is_directory(p, ec);
  if (exists) looked_in(p, looked);
  while (!rest.empty()) {
    size_t dot = rest.find('.');
    std::string_view part = rest.substr(0, dot);
    if (part.empty()) return {};
    p /= std::string(part);
    if (exists && (exists = fs::is_directory(p, ec))) looked_in(p, looked);
    rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
  }
  if (!module.empty()) {
    fs::path file = p;
    file += ".py";
    if (is_file(file)) return file.lexically_normal().string();
  }
  fs::path init = p / "__init__.py";
  if (is_file(init)) return init.lexically_normal().string();
  return {};
}

// Settings that change what a model answers.
bool same_settings(const Config& a, const Config& b) {
  return a.models == b.models && a.extra_models == b.extra_models && a.extra_losses == b.extra_losses &&
         a.extra_optimizers == b.extra_optimizers && a.extra_data_parallel == b.extra_data_parallel &&
         a.target_torch_version == b.target_torch_version;
}

struct Kept {
  std::string path;
  FileStamp stamp;  // what stat said when it was read
  Config config;
  std::string text;
  std::unique_ptr<Model> model;  // null: the file could not be read
};

// Declared before the models' tables' thread storage is first used by a
// foreign model, so destroyed after it at thread exit.
std::list<Kept>& kept() {
  thread_local std::list<Kept> k;
  return k;
}

// Models of files that changed during a file's analysis: the analysis may
// still hold pointers into them, so they go only between two files.
std::list<Kept>& retired() {
  thread_local std::list<Kept> r;
  return r;
}

struct Located {
  std::string file;
  Looked looked;
};

std::unordered_map<std::string, Located>& found_modules() {
  thread_local std::unordered_map<std::string, Located> found;
  return found;
}

Located locate_module(std::string_view importer, std::string_view module, int level);

// Where an absolute import from a directory looks (the directory, then each
// enclosing one up to the project's root) and the directories climbed to
// find that root.
struct SearchPath {
  std::vector<fs::path> dirs;
  Looked looked;
};

std::unordered_map<std::string, SearchPath>& search_paths() {
  thread_local std::unordered_map<std::string, SearchPath> paths;
  return paths;
}

}  // namespace

std::string find_module_file(std::string_view importer, std::string_view module, int level) {
  if (importer.empty()) return {};
  // Asked for every imported call of every file: remembered per thread, by
  // the importer's directory (what the answer depends on), module and level.
  size_t slash = importer.rfind('/');
  std::string key(slash == std::string_view::npos ? std::string_view(".") : importer.substr(0, slash));
  key += '\0';
  key += module;
  key += '\0';
  key += static_cast<char>('0' + std::min(level, 9));
  auto& known = found_modules();
  auto it = known.find(key);
  if (it == known.end()) it = known.emplace(std::move(key), locate_module(importer, module, level)).first;
  // The analysis depends on where the import looked, as on the files it read.
  for (const std::string& dir : it->second.looked) note_directory_listed(dir);
  const std::string& found = it->second.file;
  // Never the importer itself (`import train` in train.py).
  if (found.empty() || fs::path(found).filename() != fs::path(std::string(importer)).filename()) return found;
  if (found == fs::path(std::string(importer)).lexically_normal().string()) return {};
  return found;
}

namespace {

Located locate_module(std::string_view importer, std::string_view module, int level) {
  fs::path from = fs::path(std::string(importer)).parent_path();
  if (from.empty()) from = ".";
  std::string found;
  Looked looked;
  if (level > 0) {
    fs::path base = from;
    for (int i = 1; i < level; ++i) base = base.parent_path();
    found = module_in(base, module, looked);
  } else if (!module.empty()) {
    // The importer's directory, then each enclosing one up to the project's
    // root; a loose script (no root above it) imports from its own alone.
    // The same for every import of the directory's files: found once.
    auto& paths = search_paths();
    auto known = paths.find(from.string());
    if (known == paths.end()) {
      SearchPath sp;
      std::error_code ec;
      fs::path absolute = fs::absolute(from, ec);
      int levels = 0;
      bool rooted = false;
      for (fs::path probe = absolute; !ec && levels <= kMaxRootLevels; ++levels) {
        looked_in(probe, sp.looked);  // a root marker created there moves the root
        if (is_project_root(probe)) {
          rooted = true;
          break;
        }
        if (!probe.has_relative_path()) break;  // the filesystem's root
        probe = probe.parent_path();
      }
      if (!rooted) levels = 0;
      fs::path dir = from;
      for (int i = 0; i <= levels; ++i, dir /= "..") sp.dirs.push_back(dir);
      known = paths.emplace(from.string(), std::move(sp)).first;
    }
    looked = known->second.looked;
    for (const fs::path& dir : known->second.dirs) {
      found = module_in(dir, module, looked);
      if (!found.empty()) break;
    }
  }
  return Located{std::move(found), std::move(looked)};
}

}  // namespace

const Model* foreign_model(const std::string& path, const Config& config) {
  // The analysis depends on the file: the analysis cache records what was
  // read, with the stamp taken before reading it, and checks it is unchanged.
  // One stat says whether it is a file, its size and whether it changed.
  std::optional<FileStamp> stamp = stamp_of(path);
  std::list<Kept>& list = kept();
  if (!stamp) {
    note_file_read(path, stamp, nullptr);
    return nullptr;
  }
  std::uintmax_t size = stamp->size;
  for (auto it = list.begin(); it != list.end(); ++it) {
    if (it->path != path || !same_settings(it->config, config)) continue;
    if (it->stamp == *stamp) {
      list.splice(list.begin(), list, it);  // most recently used first
      note_file_read(path, stamp, &list.front().text);
      return list.front().model.get();
    }
    retired().splice(retired().end(), list, it);
    break;
  }
  Kept k;
  k.path = path;
  k.stamp = *stamp;
  k.config = config;
  if (size <= kMaxBytes) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in) k.text = buffer.str();
  }
  list.push_front(std::move(k));
  Kept& entry = list.front();
  note_file_read(path, stamp, &entry.text);
  if (!entry.text.empty() || size == 0) {
    try {
      entry.model = std::make_unique<Model>(entry.text, entry.config, entry.path, false);
    } catch (const std::exception&) {
      entry.model.reset();
    }
  }
  return entry.model.get();
}

void begin_file_analysis() {
  std::list<Kept>& list = kept();
  for (Kept& k : list)
    if (k.model) k.model->forget_answers();
  // Evicted only here, between two files: during a file's analysis its
  // values may point into any model it has used.
  while (list.size() > kMaxKept) list.pop_back();
  retired().clear();
  auto now = std::chrono::steady_clock::now();
  // The answers are keyed by paths as the analysis names them, relative to
  // the working directory: one that moved makes them someone else's.
  thread_local std::string working_directory;
  std::error_code ec;
  std::string cwd = fs::current_path(ec).string();
  bool moved = cwd != working_directory;
  working_directory = std::move(cwd);
  if (moved || now - remembered_since() > std::chrono::seconds(1)) {
    found_modules().clear();
    search_paths().clear();
    project_roots().clear();
    remembered_since() = now;
  }
}

}  // namespace torchleak::python
