// A cache of precompiled LibTorch headers. Parsing <torch/torch.h> dominates
// the cost of a LibTorch translation unit; a precompiled header built with
// -fpch-instantiate-templates removes most of it. One is kept per flag set
// (keyed by the Clang version, the resource directory, the working directory
// and the arguments), and rebuilt when a header it was built from changed
// (size or modification time, recorded in a manifest beside it).
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <cstdint>
#include <string>
#include <vector>

namespace torchleak::cpp {

class PchCache {
 public:
  // `max_bytes`: the bound on the directory's precompiled headers; past it,
  // those used least recently are removed after a build.
  explicit PchCache(std::string directory, uint64_t max_bytes = default_max_bytes());

  struct Result {
    std::string path;   // the precompiled header; empty when it could not be built
    bool built = false; // built by this call
    std::string error;  // why it could not be built
  };

  // The precompiled header for driver arguments `args` (a syntax-only
  // command whose input file is `file`), built when missing or stale. Safe
  // to call from several threads and several processes at once.
  Result get(const std::vector<std::string>& args, const std::string& file, const std::string& directory);

  const std::string& directory() const { return directory_; }
  size_t builds() const { return builds_.load(); }

  // $TORCHLEAK_CACHE_DIR, else $XDG_CACHE_HOME/torchleak, else ~/.cache/torchleak.
  static std::string default_directory();
  // $TORCHLEAK_PCH_CACHE_SIZE ("4GiB", a number of bytes), else 2 GiB.
  static uint64_t default_max_bytes();
  // Removes the precompiled headers used least recently (and their
  // manifests) until those left take at most `max_bytes`; never `keep`.
  // The number removed.
  size_t trim(const std::string& keep = {}) const;
  // The header a precompiled header is made of.
  static constexpr const char* kUmbrella = "torch/torch.h";

 private:
  struct Entry {
    std::mutex mutex;
    bool checked = false;
    Result result;
  };
  Result build_or_reuse(const std::vector<std::string>& pch_args, const std::string& directory,
                        const std::string& key);

  std::string directory_;
  uint64_t max_bytes_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  std::atomic<size_t> builds_{0};
};

// Whether a source includes LibTorch's headers directly (torch/, ATen/, c10/),
// so that the precompiled header applies.
bool includes_libtorch(const std::string& text);

}  // namespace torchleak::cpp
