// Settings that shape one run: which rules, which files, and the knobs rules
// read. Loaded from pyproject.toml ([tool.torchleak]), torchleak.toml or
// .torchleak.toml, and overridden by the command line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/catalogue.h"
#include "core/library_models.h"

namespace torchleak {

struct PerFileIgnore {
  std::string pattern;             // a glob matched against the path relative to the config
  std::vector<std::string> rules;  // codes or names
};

struct Config {
  std::string source;  // the file this came from, empty for defaults
  std::string root;    // the directory of `source`; per-file-ignores are relative to it
  std::vector<std::string> select;  // codes or names; empty means every rule
  std::vector<std::string> extend_select;  // added to `select` (when it is not every rule)
  std::vector<std::string> ignore;
  std::vector<std::string> exclude;  // globs
  // `extend`: another configuration file this one builds on (its settings
  // first, this file's keys on top), as written: relative to this file.
  std::string extend;
  // The keys the file (or `--config KEY=VALUE`) set, for layering one
  // configuration on another key by key.
  std::vector<std::string> keys_set;
  std::vector<PerFileIgnore> per_file_ignores;
  // The PyTorch version the code runs on, "major.minor"; empty means current.
  std::string target_torch_version;
  // The memory of the accelerator the code trains on (`device-memory`).
  uint64_t device_memory_bytes = uint64_t{16} << 30;
  // TL011's threshold: half of device-memory unless `oversized-layer-threshold` sets it.
  uint64_t oversized_layer_bytes = uint64_t{8} << 30;
  bool oversized_layer_set = false;  // whether `oversized-layer-threshold` was given
  std::vector<std::string> extra_models;        // names of in-house model classes or factories
  std::vector<std::string> extra_losses;        // names of in-house loss functions
  std::vector<std::string> extra_optimizers;    // names of in-house optimizers
  std::vector<std::string> extra_data_parallel; // names of in-house DataParallel wrappers
  // The user's model files (`models`), as written: relative to the configuration's directory.
  std::vector<std::string> model_files;
  // The library models: the shipped ones and `model_files`; null means the shipped ones.
  std::shared_ptr<const LibraryModels> models;
  const LibraryModels& library() const { return models ? *models : *LibraryModels::builtin(); }
  // C++ (LibTorch) sources: the directory of compile_commands.json (`-p`;
  // empty: searched upward from each file), arguments added to each compile
  // command (`--extra-arg`, `--extra-arg-before`), and where precompiled
  // headers are cached (empty: $TORCHLEAK_CACHE_DIR or $XDG_CACHE_HOME/torchleak).
  std::string cpp_database_dir;
  std::vector<std::string> cpp_extra_args;
  std::vector<std::string> cpp_extra_args_before;
  std::string cpp_cache_dir;

  bool rule_enabled(const RuleInfo& rule) const;
  bool rule_ignored_for(const RuleInfo& rule, std::string_view path) const;
  // target-torch-version as (major, minor); the newest known release when unset.
  std::pair<int, int> torch_version() const;
};

// Whether `rule` is named by an entry of `list` (by code, by name, or by a
// code prefix such as "TL0" and "ALL").
bool rule_listed(const RuleInfo& rule, const std::vector<std::string>& list);

}  // namespace torchleak
