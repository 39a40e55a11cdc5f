// The cache of each file's facts (core/project_index.h), so that a file
// named alone is analyzed in the context of its project without analyzing
// the project again: one entry per file, keyed by the file's path and
// content, the tool's build and the settings that change facts; an entry
// also records the files its analysis read through imports, with their
// content, and is used only while they are unchanged.
//
// Writes are atomic (a temporary file renamed over the entry), so two runs
// at once never leave a half-written entry; an entry that cannot be read or
// parsed is ignored and rewritten. The directory's size is bounded: the
// entries used least recently go first.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/project_index.h"

namespace torchleak {

inline constexpr uint64_t kDefaultFactsCacheBytes = uint64_t{256} << 20;  // 256 MiB

class FactsCache {
 public:
  // `root`: the cache directory (created on first store, with a .gitignore
  // that ignores everything in it); entries live in its `facts` directory.
  // "": no cache.
  explicit FactsCache(const std::string& root, uint64_t max_bytes = kDefaultFactsCacheBytes);

  const std::string& dir() const { return dir_; }

  // The facts recorded for the file at `path` with content `text` and these
  // settings, when every file its analysis read is unchanged; their `file`
  // is `path`.
  std::optional<std::vector<Fact>> load(const std::string& path, std::string_view text, const Config& config) const;

  // Records the facts of one analysis and the files it read (`reads`).
  // Failing to write is not an error: the next run analyzes the file again.
  void store(const std::string& path, std::string_view text, const Config& config, const std::vector<Fact>& facts,
             const std::vector<std::string>& reads) const;

  // Removes the entries used least recently until the directory holds at
  // most `max_bytes` (entries are touched when they are used).
  void trim() const;

  // The number of entries written by this object.
  size_t writes() const { return writes_; }

 private:
  std::string entry_path(const std::string& path, std::string_view text, const Config& config) const;

  std::string root_;
  std::string dir_;
  uint64_t max_bytes_;
  std::string build_;  // the tool's version and the identity of this build
  mutable std::atomic<size_t> writes_{0};
};

// The files an analysis read besides the one analyzed (another module of
// the project, through an import), recorded for the thread that analyzes:
// a frontend calls note_file_read; the engine installs a FileReads around
// each analysis.
void note_file_read(const std::string& path);

class FileReads {
 public:
  FileReads();
  ~FileReads();
  FileReads(const FileReads&) = delete;
  FileReads& operator=(const FileReads&) = delete;
  const std::vector<std::string>& files() const { return files_; }

 private:
  friend void note_file_read(const std::string& path);
  std::vector<std::string> files_;
  FileReads* previous_;
};

// Removes files named `*<extension>` under `dir` (below it too when
// `recursive`), those used least recently (modified: a use touches them)
// first, until those left take at most `target` bytes; only when they take
// more than `max_bytes` now. `remove` removes one (false: it could not) and
// may refuse some. The number removed.
size_t trim_least_recently_used(const std::string& dir, std::string_view extension, bool recursive,
                                uint64_t max_bytes, uint64_t target,
                                const std::function<bool(const std::string& path)>& remove);

// Removes the entries of the cache at `root` (`torchleak clean`); the number removed.
size_t clean_facts_cache(const std::string& root);

}  // namespace torchleak
