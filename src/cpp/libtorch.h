// Where LibTorch's headers are, when no compilation database says so: from
// Torch_DIR, CMAKE_PREFIX_PATH or TORCH_INSTALL_PREFIX (the variables a CMake
// LibTorch project sets), else the system install (Debian's libtorch-dev puts
// the headers under the system include directory).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace torchleak::cpp {

struct LibTorchInstall {
  std::string prefix;                     // the install prefix: <prefix>/include/torch/...
  std::vector<std::string> include_dirs;  // what to pass with -isystem, in order
  std::string origin;                     // how it was found: "Torch_DIR", "the system install", ...
};

using EnvLookup = std::function<const char*(const char*)>;

// The first LibTorch install found. `system_roots` are the prefixes tried
// last (by default /usr/local and /usr).
std::optional<LibTorchInstall> find_libtorch(const EnvLookup& env,
                                             const std::vector<std::string>& system_roots = {"/usr/local", "/usr"});

// One sentence for an error message: where torchleak looked.
std::string libtorch_search_description(const EnvLookup& env);

}  // namespace torchleak::cpp
