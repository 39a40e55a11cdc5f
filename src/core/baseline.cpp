#include "core/baseline.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

namespace fs = std::filesystem;

namespace torchleak {

namespace {

constexpr int kVersion = 1;

using Key = std::tuple<std::string, std::string, std::string, std::string>;  // rule, path, context, fingerprint

std::string absolute_directory_of(const std::string& file) {
  std::error_code ec;
  return fs::absolute(fs::path(file), ec).lexically_normal().parent_path().string();
}

// A finding's path as the baseline records it.
std::string relative_path(const std::string& path, const std::string& directory) {
  std::error_code ec;
  fs::path abs = fs::absolute(fs::path(path), ec).lexically_normal();
  fs::path rel = abs.lexically_relative(directory);
  return rel.empty() ? abs.generic_string() : rel.generic_string();
}

Key key_of(const Diagnostic& d, const std::string& directory) {
  return {d.rule_id, relative_path(d.path, directory), d.context, finding_fingerprint(d)};
}

}  // namespace

std::string finding_fingerprint(const Diagnostic& d) {
  const std::string& text = d.snippet.empty() ? d.source_line : d.snippet;
  std::string normalized;
  normalized.reserve(text.size());
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) normalized += c;
  return fmt::format("{:016x}", static_cast<uint64_t>(XXH3_64bits(normalized.data(), normalized.size())));
}

Baseline Baseline::record(const std::vector<Diagnostic>& diagnostics, const std::string& baseline_path) {
  Baseline b;
  b.directory_ = absolute_directory_of(baseline_path);
  std::map<Key, uint32_t> counts;
  for (const auto& d : diagnostics) ++counts[key_of(d, b.directory_)];
  for (const auto& [k, n] : counts) {
    auto& [rule, path, context, fingerprint] = k;
    b.entries_.push_back({rule, path, context, fingerprint, n});
  }
  std::sort(b.entries_.begin(), b.entries_.end(), [](const BaselineEntry& x, const BaselineEntry& y) {
    return std::tie(x.path, x.rule, x.context, x.fingerprint) < std::tie(y.path, y.rule, y.context, y.fingerprint);
  });
  return b;
}

Baseline Baseline::load(const std::string& baseline_path) {
  errno = 0;
  std::ifstream in(baseline_path, std::ios::binary);
  if (!in)
    throw BaselineError(fmt::format("{}: cannot read the baseline: {}", baseline_path,
                                    errno ? std::strerror(errno) : "cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), baseline_path, baseline_path);
}

Baseline Baseline::parse(const std::string& text, const std::string& display_path, const std::string& baseline_path) {
  auto fail = [&](const std::string& why) -> BaselineError {
    return BaselineError(fmt::format("{}: not a torchleak baseline: {}", display_path, why));
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> from "parse error".
    size_t at = what.find("] ");
    throw fail(at == std::string::npos ? what : what.substr(at + 2));
  }
  if (!j.is_object()) throw fail("expected a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer())
    throw fail("no \"version\" (write one with --write-baseline)");
  if (j["version"].get<int64_t>() != kVersion)
    throw fail(fmt::format("version {} is not supported (this torchleak reads version {}; rewrite it with "
                           "--write-baseline)",
                           j["version"].dump(), kVersion));
  if (!j.contains("findings") || !j["findings"].is_array()) throw fail("\"findings\" must be an array");
  Baseline b;
  b.directory_ = absolute_directory_of(baseline_path);
  size_t index = 0;
  for (const auto& item : j["findings"]) {
    ++index;
    if (!item.is_object()) throw fail(fmt::format("finding {} is not an object", index));
    BaselineEntry e;
    for (auto [field, target] : {std::pair{"rule", &e.rule}, std::pair{"path", &e.path},
                                 std::pair{"context", &e.context}, std::pair{"fingerprint", &e.fingerprint}}) {
      if (!item.contains(field) || !item[field].is_string())
        throw fail(fmt::format("finding {} has no string \"{}\"", index, field));
      *target = item[field].get<std::string>();
    }
    if (!item.contains("count") || !item["count"].is_number_unsigned() || item["count"].get<uint64_t>() == 0 ||
        item["count"].get<uint64_t>() > UINT32_MAX)
      throw fail(fmt::format("finding {} has no positive integer \"count\"", index));
    e.count = static_cast<uint32_t>(item["count"].get<uint64_t>());
    b.entries_.push_back(std::move(e));
  }
  return b;
}

std::string Baseline::serialize() const {
  std::string out = fmt::format("{{\n  \"version\": {},\n  \"tool\": \"torchleak\",\n  \"findings\": [", kVersion);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    nlohmann::ordered_json j;
    j["rule"] = e.rule;
    j["path"] = e.path;
    j["context"] = e.context;
    j["fingerprint"] = e.fingerprint;
    j["count"] = e.count;
    out += fmt::format("{}\n    {}", i ? "," : "", j.dump());
  }
  out += entries_.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

size_t Baseline::filter(std::vector<Diagnostic>& diagnostics) const {
  std::map<Key, uint32_t> remaining;
  for (const auto& e : entries_) remaining[{e.rule, e.path, e.context, e.fingerprint}] += e.count;
  std::erase_if(diagnostics, [&](const Diagnostic& d) {
    auto it = remaining.find(key_of(d, directory_));
    if (it == remaining.end() || it->second == 0) return false;
    --it->second;
    return true;
  });
  size_t unseen = 0;
  for (const auto& [k, n] : remaining) unseen += n;
  return unseen;
}

size_t Baseline::findings() const {
  size_t n = 0;
  for (const auto& e : entries_) n += e.count;
  return n;
}

}  // namespace torchleak
