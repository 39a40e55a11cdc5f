// One run of the analyzer over a set of paths: discovery, parallel per-file
// analysis (first phase), the project index, deferred findings (second
// phase), filtering, sorting. Rendering is left to the reporters.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis.h"
#include "core/config.h"
#include "core/diagnostic.h"
#include "core/project_index.h"

namespace torchleak {

struct FileError {
  std::string path;
  std::string message;
};

inline constexpr uint64_t kDefaultMaxFileSize = 10u << 20;  // 10 MiB

struct RunOptions {
  std::vector<std::string> paths{"."};
  Config config;      // command-line settings (select, ignore, exclude, ...)
  // Configuration files (core/config_file.h): each file is analyzed with the
  // nearest pyproject.toml [tool.torchleak] / torchleak.toml / .torchleak.toml
  // above it, `config` layered on top; `config_file` (--config) instead names
  // the one file for all; `use_config_files` false reads none.
  std::string config_file;
  bool use_config_files = true;
  // `--config KEY=VALUE`: settings over every file's (Config::keys_set names them).
  Config config_overrides;
  // The files named are analyzed in the context of their project (the
  // directory of the nearest configuration file, else the repository's root;
  // `project_root` when given): the facts of the project's other Python files
  // count, the findings are those of the named files. False: the named files alone.
  bool project_context = true;
  std::string project_root;
  // The facts cache (core/analysis_cache.h): in `cache_dir` when given, else in
  // $TORCHLEAK_CACHE_DIR, else in .torchleak_cache at the project's root;
  // entries under its `facts` directory. `use_cache` false: none.
  bool use_cache = true;
  std::string cache_dir;
  // Facts files (`torchleak facts`): the facts of the project's other files,
  // computed by other shards of a run. Given, they stand for the project:
  // no other file is read for context.
  std::vector<std::string> facts_files;
  // Keep the named files' facts in RunResult::facts (`torchleak facts`).
  bool keep_facts = false;
  // Report suppressions that silence nothing (TL100).
  bool report_unused_suppressions = false;
  unsigned jobs = 0;  // 0: one per core
  bool respect_gitignore = true;
  // Buffers that take precedence over the files on disk (the editor's, the
  // standard input's). A path of `paths` with a buffer need not exist on disk.
  std::map<std::string, std::string> overlays;
  // Discover the files and resolve their settings, analyze nothing
  // (RunResult::files, RunResult::first_config): --show-files, --show-settings.
  bool list_only = false;
  // Files larger than this many bytes are skipped with a note ("skipped: too
  // large"); 0: no limit. The default is far above any hand-written source.
  uint64_t max_file_size = kDefaultMaxFileSize;
  // Set to true from a signal handler to stop promptly.
  const std::atomic<bool>* cancel = nullptr;
};

struct RunResult {
  std::vector<Diagnostic> diagnostics;  // sorted, deduplicated
  std::vector<FileError> errors;        // files that could not be analyzed
  std::vector<FileError> notes;         // analyzed with a caveat
  size_t files_analyzed = 0;
  size_t context_files = 0;  // other files of the project read for their facts
  size_t cached_files = 0;   // ... of which the facts came from the cache
  size_t cached_findings = 0;  // named files whose findings came from the cache
  std::string cache_dir;     // the facts cache used, "" for none
  std::vector<Fact> facts;   // the named files' facts, with RunOptions::keep_facts
  // With RunOptions::list_only: the files that would be analyzed, and the
  // settings of the first one.
  std::vector<std::string> files;
  std::vector<std::string> settings_sources;  // per file: its configuration file, "" for the defaults
  std::optional<Config> first_config;
  size_t lines_analyzed = 0;
  double seconds = 0;
  bool cancelled = false;
  // Why the run could not start (a bad configuration file), or "".
  std::string fatal;
};

RunResult run(const RunOptions& options);

// A facts file: the facts of a shard's files, as `torchleak facts` writes it
// (JSON: {"torchleak-facts": 1, "files": [...], "facts": [[kind, key, file,
// line, [values...]], ...]}). Throws std::runtime_error naming the file.
void write_facts_file(const std::string& path, const std::vector<std::string>& files, const std::vector<Fact>& facts);
std::vector<Fact> read_facts_file(const std::string& path);

// Where a run keeps its caches: `given`, else $TORCHLEAK_CACHE_DIR, else
// .torchleak_cache under `project_root`; "" when none applies.
std::string cache_root(const std::string& given, const std::string& project_root);

// Analyzes in-memory sources as one project (tests, the language server).
RunResult run_sources(const std::vector<SourceFile>& files, const Config& config, unsigned jobs = 1,
                      bool report_unused_suppressions = false);
// The same, each file with its own settings (configs[i] for files[i]; the
// language server resolves each file's nearest configuration file).
RunResult run_sources(const std::vector<SourceFile>& files, const std::vector<const Config*>& configs,
                      unsigned jobs = 1);

// Analyzes in-memory `files` (the editor's buffers; configs[i] for files[i])
// in the context of the other files of their project (`context`, read from
// disk, with context_configs[i]): their facts count, from the facts cache at
// `cache_root` when current (core/analysis_cache.h; "" for none), and only the
// findings of `files` are reported.
RunResult run_in_context(const std::vector<SourceFile>& files, const std::vector<const Config*>& configs,
                         const std::vector<std::string>& context, const std::vector<const Config*>& context_configs,
                         const std::string& cache_root, unsigned jobs = 0);

// Runs `work(i)` for i in [0, n) on `jobs` threads (the calling thread is
// one of them), each taking the next index as it finishes the previous one.
// The scheme both phases use; the benchmark's floor uses it too.
void parallel_for(size_t n, unsigned jobs, const std::function<void(size_t)>& work,
                  const std::atomic<bool>* cancel = nullptr);

// The line that holds byte `byte` of `text`, without its terminator (\n, \r\n):
// a view into `text`.
std::string_view line_containing(std::string_view text, size_t byte);

// Why `bytes` cannot be analyzed as source text, or "" when it can.
std::string unreadable_reason(std::string_view bytes);

}  // namespace torchleak
