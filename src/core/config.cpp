#include "core/config.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace torchleak {

bool rule_listed(const RuleInfo& rule, const std::vector<std::string>& list) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& entry) {
    if (entry == "ALL" || entry == rule.name) return true;
    if (entry.size() > rule.id.size()) return false;
    return std::equal(entry.begin(), entry.end(), rule.id.begin(),
                      [](char a, char b) { return std::toupper(a) == std::toupper(b); });
  });
}

bool Config::rule_enabled(const RuleInfo& rule) const {
  if (!select.empty() && !rule_listed(rule, select) && !rule_listed(rule, extend_select)) return false;
  return !rule_listed(rule, ignore);
}

bool Config::rule_ignored_for(const RuleInfo& rule, std::string_view path) const {
  if (per_file_ignores.empty()) return false;
  std::string rel(path);
  if (!root.empty()) {
    std::error_code ec;
    auto r = std::filesystem::relative(std::filesystem::absolute(std::string(path), ec), root, ec);
    if (!ec && !r.empty() && r.native().rfind("..", 0) != 0) rel = r.generic_string();
  }
  for (const auto& pfi : per_file_ignores) {
    bool match = fnmatch(pfi.pattern.c_str(), rel.c_str(), 0) == 0 ||
                 fnmatch(pfi.pattern.c_str(), std::filesystem::path(rel).filename().c_str(), 0) == 0;
    if (match && rule_listed(rule, pfi.rules)) return true;
  }
  return false;
}

std::pair<int, int> Config::torch_version() const {
  int major = 2, minor = 5;
  if (!target_torch_version.empty() && target_torch_version != "current")
    std::sscanf(target_torch_version.c_str(), "%d.%d", &major, &minor);
  return {major, minor};
}

}  // namespace torchleak
