#include "core/facts_cache.h"

#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "version.h"

namespace fs = std::filesystem;

namespace torchleak {

namespace {

constexpr std::string_view kEntrySuffix = ".facts";
constexpr int kFormat = 1;  // bumped when an entry's layout changes

thread_local FileReads* t_reads = nullptr;

std::string hex128(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }

std::string content_hash(std::string_view text) {
  return fmt::format("{:016x}", static_cast<uint64_t>(XXH3_64bits(text.data(), text.size())));
}

std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return buffer.str();
}

// The tool's version and this build: an entry written by another build of
// the same version (a rule changed) is not used.
std::string build_identity() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::string id = kVersion;
  if (!ec) {
    auto size = fs::file_size(exe, ec);
    auto time = fs::last_write_time(exe, ec).time_since_epoch().count();
    if (!ec) id += fmt::format(":{}:{}:{}", exe.string(), size, time);
  }
  return id;
}

// The settings that change a file's facts: which rules run, the library
// models (and the text of the user's model files), the in-house names.
std::string settings_fingerprint(const Config& c) {
  std::string s;
  auto list = [&](std::string_view name, const std::vector<std::string>& v) {
    s += name;
    s += '=';
    for (const auto& x : v) {
      s += x;
      s += '\x1f';
    }
    s += '\n';
  };
  list("select", c.select);
  list("ignore", c.ignore);
  list("extra-models", c.extra_models);
  list("extra-losses", c.extra_losses);
  list("extra-optimizers", c.extra_optimizers);
  list("extra-data-parallel", c.extra_data_parallel);
  s += fmt::format("torch={}\ndevice-memory={}\noversized={}:{}\n", c.target_torch_version, c.device_memory_bytes,
                   c.oversized_layer_bytes, c.oversized_layer_set);
  for (const auto& f : c.model_files) {
    s += "model-file=" + f + ":";
    if (auto text = read_whole(f)) s += content_hash(*text);
    s += '\n';
  }
  return s;
}

}  // namespace

void note_file_read(const std::string& path) {
  if (!t_reads) return;
  auto& files = t_reads->files_;
  if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
}

FileReads::FileReads() : previous_(t_reads) { t_reads = this; }
FileReads::~FileReads() { t_reads = previous_; }

FactsCache::FactsCache(const std::string& root, uint64_t max_bytes)
    : root_(root),
      dir_(root.empty() ? std::string() : (fs::path(root) / "facts").string()),
      max_bytes_(max_bytes),
      build_(build_identity()) {}

std::string FactsCache::entry_path(const std::string& path, std::string_view text, const Config& config) const {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  auto add = [&](std::string_view part) {
    XXH3_128bits_update(state, part.data(), part.size());
    XXH3_128bits_update(state, "\0", 1);
  };
  add(std::to_string(kFormat));
  add(build_);
  add(settings_fingerprint(config));
  std::error_code ec;
  add(fs::absolute(path, ec).lexically_normal().string());
  add(text);
  std::string name = hex128(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return (fs::path(dir_) / name.substr(0, 2) / (name + std::string(kEntrySuffix))).string();
}

std::optional<std::vector<Fact>> FactsCache::load(const std::string& path, std::string_view text,
                                                  const Config& config) const {
  if (dir_.empty()) return std::nullopt;
  std::string entry = entry_path(path, text, config);
  auto stored = read_whole(entry);
  if (!stored) return std::nullopt;
  std::vector<Fact> facts;
  try {
    nlohmann::json j = nlohmann::json::parse(*stored);
    for (const auto& read : j.at("reads")) {
      auto now = read_whole(read.at(0).get<std::string>());
      std::string was = read.at(1).get<std::string>();
      if (now ? content_hash(*now) != was : !was.empty()) return std::nullopt;  // an imported file changed
    }
    for (const auto& f : j.at("facts")) {
      Fact fact;
      fact.kind = f.at(0).get<std::string>();
      fact.key = f.at(1).get<std::string>();
      fact.line = f.at(2).get<uint32_t>();
      fact.values = f.at(3).get<std::vector<std::string>>();
      fact.file = path;
      facts.push_back(std::move(fact));
    }
  } catch (const std::exception&) {
    return std::nullopt;  // damaged: analyzed again and rewritten
  }
  std::error_code ec;
  fs::last_write_time(entry, fs::file_time_type::clock::now(), ec);  // used: kept longest
  return facts;
}

void FactsCache::store(const std::string& path, std::string_view text, const Config& config,
                       const std::vector<Fact>& facts, const std::vector<std::string>& reads) const {
  if (dir_.empty()) return;
  nlohmann::json j;
  j["reads"] = nlohmann::json::array();
  for (const auto& r : reads) {
    auto now = read_whole(r);
    j["reads"].push_back({r, now ? content_hash(*now) : std::string()});
  }
  j["facts"] = nlohmann::json::array();
  for (const auto& f : facts) j["facts"].push_back({f.kind, f.key, f.line, f.values});
  std::string entry = entry_path(path, text, config);
  std::error_code ec;
  fs::path dir = fs::path(entry).parent_path();
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) return;
    // The cache is never part of the project.
    if (!fs::exists(fs::path(root_) / ".gitignore", ec))
      std::ofstream(fs::path(root_) / ".gitignore") << "# Automatically created by torchleak.\n*\n";
  }
  fs::create_directories(dir, ec);
  if (ec) return;
  static std::atomic<unsigned> counter{0};
  fs::path tmp = dir / fmt::format(".tmp-{}-{}-{}", ::getpid(),
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()), counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump();
    if (!out) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, entry, ec);  // atomic: a reader sees the old entry or the new one
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  ++writes_;
}

void FactsCache::trim() const {
  if (dir_.empty() || !max_bytes_) return;
  // Down to three quarters of the bound: not every run trims.
  trim_least_recently_used(dir_, kEntrySuffix, true, max_bytes_, max_bytes_ - max_bytes_ / 4,
                           [](const std::string& path) {
                             std::error_code ec;
                             return fs::remove(path, ec);
                           });
}

size_t trim_least_recently_used(const std::string& dir, std::string_view extension, bool recursive,
                                uint64_t max_bytes, uint64_t target,
                                const std::function<bool(const std::string& path)>& remove) {
  struct Entry {
    std::string path;
    uint64_t size;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  auto consider = [&](const fs::directory_entry& e) {
    if (e.path().extension() != extension || !e.is_regular_file(ec)) return;
    uint64_t size = e.file_size(ec);
    auto used = e.last_write_time(ec);
    if (ec) {
      ec.clear();
      return;
    }
    total += size;
    entries.push_back({e.path().string(), size, used});
  };
  if (recursive) {
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) consider(*it);
  } else {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) consider(*it);
  }
  if (total <= max_bytes) return 0;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  size_t removed = 0;
  for (const Entry& e : entries) {
    if (total <= target) break;
    if (remove(e.path)) {
      total -= e.size;
      ++removed;
    }
  }
  return removed;
}

size_t clean_facts_cache(const std::string& root) {
  size_t removed = 0;
  std::error_code ec;
  std::string dir = root.empty() ? std::string() : (fs::path(root) / "facts").string();
  if (dir.empty() || !fs::is_directory(dir, ec)) return 0;
  std::vector<fs::path> entries;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == kEntrySuffix) entries.push_back(it->path());
  for (const auto& p : entries) removed += fs::remove(p, ec) ? 1 : 0;
  return removed;
}

}  // namespace torchleak
