// The cache of each Python file's analysis: its facts (core/project_index.h),
// so that a file named alone is analyzed in the context of its project
// without analyzing the project again, and its findings, so that a re-run
// of an unchanged tree analyzes nothing.
//
// One entry per file and settings: the entry is named by the file's absolute
// path, the tool's build and the settings that change facts or findings; it
// holds the hash of the content it was computed from, and is current while
// the file still has that content. To know that without reading the file, it
// also holds the file's stamp (what stat says: times, size, inode), trusted
// as git's index trusts it: a stamp taken within a second of the write is
// not kept (the file could change again within the clock's resolution, the
// "racily clean" case), and then the content is read and hashed. An entry
// also records the files its analysis read through imports, with their
// content hash and stamp, and is current only while they are unchanged.
//
// The findings of an entry are the file's findings after the project's
// facts were joined, its settings and suppression comments applied; when
// they depended on other files' facts they are kept with the digest of the
// project's facts they were resolved with and used only under the same
// digest.
//
// Entries are kept in segments: each run that stores entries writes them
// as one new segment file (a file per entry would cost a file creation per
// source file, which some file systems make slow), read back whole and
// indexed by the runs that follow, the newest entry of a file winning. When
// there are more than a few segments, or they exceed the size bound, the
// next run that writes merges them into one: this run's entries, then the
// ones it used, then the others from the newest back, under three quarters
// of the bound; the others go (least recently used first).
//
// A segment is written to a temporary file renamed into place, so two runs
// at once never leave a half-written one, and a merge deletes only the
// segments it read; an entry whose checksum does not match, or that cannot
// be decoded, is ignored and rewritten.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <mutex>
#include <optional>
#include <set>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "core/project_index.h"

namespace torchleak {

inline constexpr uint64_t kDefaultAnalysisCacheBytes = uint64_t{256} << 20;  // 256 MiB

// What stat says of a file; equal stamps of a regular file mean unchanged
// content (when the stamp was trusted, see above).
struct FileStamp {
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t size = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
  int64_t taken_ns = 0;  // when stat was asked (not part of the comparison)
  friend bool operator==(const FileStamp& a, const FileStamp& b) {
    return a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns && a.size == b.size && a.inode == b.inode &&
           a.device == b.device;
  }
};
// The files whose presence makes a directory the project's root, where an
// absolute import stops looking (python/project.h): a directory's listing
// counts them (listing_hash).
inline constexpr std::string_view kProjectRootMarkers[] = {".git",      "pyproject.toml", "setup.py",
                                                           "setup.cfg", "torchleak.toml", ".torchleak.toml"};

// The stamp of a file, taken now (before its content is read, so that a
// change after the read shows in the next stamp).
std::optional<FileStamp> stamp_of(const std::string& path);
// The same for a directory.
std::optional<FileStamp> directory_stamp_of(const std::string& path);
// The hash of the names a directory holds that can change what an import
// finds (module files, packages holding `__init__.py`, a project root's
// markers), sorted (never 0); 0 when it cannot be listed.
uint64_t listing_hash(const std::string& path);

// A file an analysis read besides the one analyzed: its stamp taken before
// the read, the hash of what was read (0: there was no such file). Or a
// directory where an import looked for a file: its stamp and the hash of
// the names it holds (0: there was no such directory), so that a file
// created there later (a module that now shadows the one found) shows.
struct FileRead {
  std::string path;
  uint64_t content = 0;
  std::optional<FileStamp> stamp;
  bool directory = false;
};

// The hash of a file's content as entries record it (never 0).
uint64_t content_hash(std::string_view text);

// A file's facts as an entry holds them (their `file` aside), and their
// digest: equal facts, equal digests.
struct EncodedFacts {
  std::string bytes;
  uint64_t digest = 0;
};
EncodedFacts encode_facts(const std::vector<Fact>& facts);

// A file's findings as a run reports them, and what they were computed under.
struct CachedFindings {
  // The digest of the project's facts the deferred findings were resolved
  // with; 0: the file had none, the findings do not depend on other files.
  uint64_t project = 0;
  // The run's circumstances that change the findings without changing the
  // entry's name: how the file and its project's files were named (paths are
  // reported as given), whether unused suppressions are reported.
  std::string circumstances;
  uint32_t lines = 0;
  std::vector<std::string> notes;
  std::vector<Diagnostic> diagnostics;
};

class AnalysisCache {
 public:
  // `root`: the cache directory (created on first store, with a .gitignore
  // that ignores everything in it); entries live in its `facts` directory.
  // "": no cache.
  explicit AnalysisCache(const std::string& root, uint64_t max_bytes = kDefaultAnalysisCacheBytes);

  const std::string& dir() const { return dir_; }

  // A current entry, as load() returns it: its facts and findings are
  // decoded on demand.
  class Entry {
   public:
    uint64_t content() const { return content_; }
    uint64_t facts_digest() const { return facts_digest_; }
    // Whether the file's stamp changed but not its content: storing the
    // entry again saves reading the file next time.
    bool restamp() const { return restamp_; }
    // Decoded facts, their `file` the path the entry was loaded for; empty
    // when the entry is damaged in a way its checksum did not catch.
    std::vector<Fact> facts() const;
    EncodedFacts encoded_facts() const;
    std::optional<CachedFindings> findings() const;
    const std::vector<FileRead>& reads() const { return reads_; }

   private:
    friend class AnalysisCache;
    std::string path_;
    std::string bytes_;  // the whole entry
    size_t facts_at_ = 0, findings_at_ = 0;
    uint64_t content_ = 0, facts_digest_ = 0;
    bool restamp_ = false;
    std::vector<FileRead> reads_;
  };

  // The entry of the file at `path` with these settings when it is current.
  // `stamp` is the file's (nullopt: unknown); `text` gives its content when
  // the stamp does not settle it (nullptr: it cannot be read).
  std::optional<Entry> load(const std::string& path, const std::optional<FileStamp>& stamp,
                            const std::function<const std::string*()>& text, const Config& config) const;

  // Records the analysis of the file at `path`: the stamp taken before its
  // content was read, the content's hash, its facts, the files the analysis
  // read, and its findings when it was a named file. Kept in memory until
  // flush(). Failing to write is not an error: the next run analyzes the
  // file again.
  void store(const std::string& path, const std::optional<FileStamp>& stamp, uint64_t content,
             const Config& config, const EncodedFacts& facts, const std::vector<FileRead>& reads,
             const CachedFindings* findings) const;

  // Writes the entries stored since the cache was opened as one segment,
  // merging the segments (and keeping under the size bound) when due; the
  // end of a run. Nothing when nothing was stored.
  void flush() const;

  // The number of entries stored through this object.
  size_t writes() const { return writes_; }

 private:
  std::string entry_key(const std::string& path, const Config& config) const;
  const std::string& fingerprint(const Config& config) const;
  void open_segments() const;
  bool write_segment(const std::vector<std::pair<std::string_view, std::string_view>>& records) const;

  struct Segment {
    std::string path;
    std::string bytes;
  };
  struct Record {
    size_t segment = 0, offset = 0, size = 0;
  };
  mutable std::once_flag opened_;
  mutable std::vector<Segment> segments_;  // oldest first
  mutable std::vector<Record> records_;
  mutable std::unordered_map<std::string, size_t> index_;  // key -> its newest record
  mutable std::unique_ptr<std::atomic<bool>[]> used_;    // per record: loaded by this run
  mutable std::vector<std::pair<std::string, std::string>> pending_;  // key, entry: stored by this run

  std::string root_;
  std::string dir_;
  uint64_t max_bytes_;
  std::string build_;  // the tool's version and the identity of this build
  mutable std::atomic<size_t> writes_{0};
  mutable std::mutex lock_;
  mutable std::map<const Config*, std::string> fingerprints_;
  // Whether each directory an entry's imports looked in still holds the
  // names the entry saw (by their hash and the path), asked once per run:
  // many entries share one.
  mutable std::unordered_map<std::string, bool> directories_;
  std::filesystem::path cwd_;
};

// The files an analysis read besides the one analyzed (another module of
// the project, through an import), recorded for the thread that analyzes:
// a frontend calls note_file_read with the stamp it took before reading and
// the text it read (nullptr: no such file); the engine installs a FileReads
// around each analysis.
void note_file_read(const std::string& path, const std::optional<FileStamp>& stamp, const std::string* text);
// The same for a directory an import looked in (an absolute, normal path).
void note_directory_listed(const std::string& path);

class FileReads {
 public:
  FileReads();
  ~FileReads();
  FileReads(const FileReads&) = delete;
  FileReads& operator=(const FileReads&) = delete;
  const std::vector<FileRead>& files() const { return files_; }

 private:
  friend void note_file_read(const std::string& path, const std::optional<FileStamp>& stamp, const std::string* text);
  friend void note_directory_listed(const std::string& path);
  std::vector<FileRead> files_;
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
size_t clean_analysis_cache(const std::string& root);

}  // namespace torchleak
