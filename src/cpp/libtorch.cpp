#include "cpp/libtorch.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace torchleak::cpp {

namespace {

constexpr const char* kApiInclude = "include/torch/csrc/api/include";

bool has_headers(const fs::path& prefix) {
  std::error_code ec;
  return fs::is_regular_file(prefix / kApiInclude / "torch" / "torch.h", ec);
}

LibTorchInstall install_at(const fs::path& prefix, std::string origin, bool system) {
  LibTorchInstall out;
  out.prefix = prefix.lexically_normal().string();
  // A system prefix's include directory is searched already, and must stay
  // after the compiler's own (#include_next in the C++ library).
  if (!system) out.include_dirs.push_back((prefix / "include").lexically_normal().string());
  out.include_dirs.push_back((prefix / kApiInclude).lexically_normal().string());
  out.origin = std::move(origin);
  return out;
}

std::vector<std::string> split_paths(const char* value) {
  std::vector<std::string> out;
  if (!value) return out;
  std::stringstream ss(value);
  for (std::string item; std::getline(ss, item, ':');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Torch_DIR names the directory of TorchConfig.cmake: <prefix>/share/cmake/Torch
// (the LibTorch archive) or <prefix>/lib/<arch>/cmake/Torch (Debian).
std::optional<fs::path> prefix_from_config_dir(const fs::path& dir) {
  fs::path p = dir;
  for (int up = 0; up < 5 && !p.empty(); ++up) {
    if (has_headers(p)) return p;
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return std::nullopt;
}

}  // namespace

std::optional<LibTorchInstall> find_libtorch(const EnvLookup& env, const std::vector<std::string>& system_roots) {
  if (const char* torch_dir = env("Torch_DIR"); torch_dir && *torch_dir)
    if (auto prefix = prefix_from_config_dir(torch_dir)) return install_at(*prefix, "Torch_DIR", false);
  for (const std::string& p : split_paths(env("CMAKE_PREFIX_PATH"))) {
    if (has_headers(p)) return install_at(p, "CMAKE_PREFIX_PATH", false);
    // A prefix path may name the config directory itself.
    if (auto prefix = prefix_from_config_dir(p)) return install_at(*prefix, "CMAKE_PREFIX_PATH", false);
  }
  if (const char* prefix = env("TORCH_INSTALL_PREFIX"); prefix && *prefix && has_headers(prefix))
    return install_at(prefix, "TORCH_INSTALL_PREFIX", false);
  for (const std::string& root : system_roots)
    if (has_headers(root)) return install_at(root, "the system install", true);
  return std::nullopt;
}

std::string libtorch_search_description(const EnvLookup& env) {
  std::vector<std::string> parts;
  for (const char* var : {"Torch_DIR", "CMAKE_PREFIX_PATH", "TORCH_INSTALL_PREFIX"}) {
    const char* v = env(var);
    parts.push_back(v && *v ? fmt::format("{}={}", var, v) : fmt::format("{} (unset)", var));
  }
  std::string out = "looked in ";
  for (const auto& p : parts) out += p + ", ";
  return out + "and the system include directories";
}

}  // namespace torchleak::cpp
