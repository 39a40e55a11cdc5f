#include "core/analysis_cache.h"

#include <cereal/archives/binary.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <elf.h>
#include <link.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <ctime>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "version.h"

namespace fs = std::filesystem;

namespace torchleak {

// How entries are encoded: cereal's binary archives of these (non-intrusive
// serialization, found by argument-dependent lookup in this namespace).
template <class Archive>
void serialize(Archive& ar, Position& p) {
  ar(p.line, p.column);
}
template <class Archive>
void serialize(Archive& ar, Edit& e) {
  ar(e.start_byte, e.end_byte, e.replacement);
}
template <class Archive>
void serialize(Archive& ar, Fix& f) {
  ar(f.title, f.safety, f.edits);
}
template <class Archive>
void serialize(Archive& ar, CellLocation& c) {
  ar(c.cell, c.start, c.end, c.file_start, c.file_end, c.file_start_line, c.file_end_line, c.edits);
}
template <class Archive>
void serialize(Archive& ar, Diagnostic& d) {
  ar(d.rule_id, d.start, d.end, d.start_byte, d.end_byte, d.message, d.help, d.source_line, d.end_source_line,
     d.context, d.snippet, d.fix, d.notebook);
}
template <class Archive>
void serialize(Archive& ar, CachedFindings& f) {
  ar(f.project, f.circumstances, f.lines, f.notes, f.diagnostics);
}
template <class Archive>
void serialize(Archive& ar, FileStamp& s) {
  ar(s.mtime_ns, s.ctime_ns, s.size, s.inode, s.device, s.taken_ns);
}
template <class Archive>
void serialize(Archive& ar, FileRead& r) {
  ar(r.path, r.content, r.stamp, r.directory);
}

namespace {

constexpr std::string_view kSegmentSuffix = ".seg";
constexpr std::string_view kSegmentMagic = "TLSEGMT1";
constexpr size_t kKeySize = 32;     // an entry's key: 128 bits in hexadecimal
constexpr size_t kMaxSegments = 8;  // more, and the next run that writes merges them
constexpr std::string_view kMagic = "TLCACHE4";  // changed with the entries' layout
constexpr int64_t kStampTrustNs = 2'000'000'000;  // see "racily clean" in the header (FAT's times: 2 s)

thread_local FileReads* t_reads = nullptr;

std::string hex128(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }

std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(buffer).str();
}

int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A stamp that can be trusted next time: neither of the file's times within
// the margin before the stamp was taken (a change in the same tick of the
// file system's clock would not show in the times).
std::optional<FileStamp> trusted(const std::optional<FileStamp>& stamp) {
  if (!stamp) return std::nullopt;
  if (stamp->taken_ns - stamp->mtime_ns < kStampTrustNs || stamp->taken_ns - stamp->ctime_ns < kStampTrustNs)
    return std::nullopt;
  return stamp;
}

// A read-only stream over bytes held elsewhere.
struct MemoryBuffer : std::streambuf {
  MemoryBuffer(const char* begin, size_t size) {
    char* b = const_cast<char*>(begin);
    setg(b, b, b + size);
  }
};

template <class T>
std::string encode(T& value) {
  std::ostringstream out(std::ios::binary);
  {
    cereal::BinaryOutputArchive ar(out);
    ar(value);
  }
  return std::move(out).str();
}

template <class T>
bool decode(std::string_view bytes, T& value) {
  MemoryBuffer buffer(bytes.data(), bytes.size());
  std::istream in(&buffer);
  try {
    cereal::BinaryInputArchive ar(in);
    ar(value);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// A fact as an entry holds it: its file is the entry's.
struct StoredFact {
  std::string kind, key;
  uint32_t line = 0;
  std::vector<std::string> values;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(kind, key, line, values);
  }
};

std::vector<StoredFact> stored_facts(const std::vector<Fact>& facts) {
  std::vector<StoredFact> out;
  out.reserve(facts.size());
  for (const auto& f : facts) out.push_back({f.kind, f.key, f.line, f.values});
  return out;
}

struct Header {
  uint64_t content = 0;
  std::optional<FileStamp> stamp;
  std::vector<FileRead> reads;
  uint64_t facts_digest = 0;
  uint64_t facts_size = 0;  // bytes of the encoded facts after the header
  template <class Archive>
  void serialize(Archive& ar) {
    ar(content, stamp, reads, facts_digest, facts_size);
  }
};

// The GNU build ID of the running executable (a hash the linker computes
// over what it linked), as hex; "" when it has none.
std::string build_id() {
  std::string id;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        auto* out = static_cast<std::string*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* at = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = at + ph.p_memsz;
          while (at + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
            const char* name = at + sizeof(ElfW(Nhdr));
            const char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (desc + note->n_descsz > end) break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              for (uint32_t k = 0; k < note->n_descsz; ++k)
                *out += fmt::format("{:02x}", static_cast<unsigned char>(desc[k]));
              return 1;
            }
            at = desc + ((note->n_descsz + 3) & ~3u);
          }
        }
        return 1;  // the first object is the executable: stop there
      },
      &id);
  return id;
}

// The tool's version and this build: an entry written by another build of
// the same version (a rule changed) is not used. The build is known by its
// build ID, so that the same executable installed again (a CI job's fresh
// install, a restored cache) still uses the entries; without one, by the
// executable's path, size and time.
std::string build_identity() {
  std::string id = kVersion;
  if (std::string linked = build_id(); !linked.empty()) return id + ":" + linked;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto size = fs::file_size(exe, ec);
    auto time = fs::last_write_time(exe, ec).time_since_epoch().count();
    if (!ec) id += fmt::format(":{}:{}:{}", exe.string(), size, time);
  }
  return id;
}

// Whether a file read through an import still has the content it had, or a
// directory the names it held.
bool unchanged(const FileRead& read) {
  if (read.directory) {
    std::optional<FileStamp> now = directory_stamp_of(read.path);
    if (!now) return read.content == 0;
    if (read.stamp && *read.stamp == *now) return true;
    return listing_hash(read.path) == read.content;
  }
  std::optional<FileStamp> now = stamp_of(read.path);
  if (!now) return read.content == 0;
  if (read.stamp && *read.stamp == *now) return true;
  auto text = read_whole(read.path);
  return text ? content_hash(*text) == read.content : read.content == 0;
}

}  // namespace

namespace {

std::optional<FileStamp> stamp_if(const std::string& path, bool directory) {
  int64_t now = now_ns();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !(directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
    return std::nullopt;
  FileStamp s;
  s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  s.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  s.size = static_cast<uint64_t>(st.st_size);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.device = static_cast<uint64_t>(st.st_dev);
  s.taken_ns = now;
  return s;
}

}  // namespace

std::optional<FileStamp> stamp_of(const std::string& path) { return stamp_if(path, false); }
std::optional<FileStamp> directory_stamp_of(const std::string& path) { return stamp_if(path, true); }

namespace {

// Whether an entry of a directory can change what an import finds: a module
// file (`x.py`, not an editor's `.#x.py`), a package (a directory holding
// `__init__.py`), or a project root's marker. Not a run's output directory
// (`wandb/`, `lightning_logs/`), the cache's own, `__pycache__`, an editor's
// backup or swap file.
bool matters_to_imports(const fs::directory_entry& entry) {
  std::string name = entry.path().filename().string();
  for (std::string_view marker : kProjectRootMarkers)
    if (name == marker) return true;
  if (name.empty() || name[0] == '.') return false;
  std::error_code ec;
  if (name.size() > 3 && name.substr(name.size() - 3) == ".py") return !entry.is_directory(ec);
  return entry.is_directory(ec) && fs::is_regular_file(entry.path() / "__init__.py", ec);
}

}  // namespace

uint64_t listing_hash(const std::string& path) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (matters_to_imports(*it)) names.push_back(it->path().filename().string());
  }
  if (ec) return 0;
  std::sort(names.begin(), names.end());
  std::string all;
  for (const auto& n : names) {
    all += n;
    all += '\0';
  }
  return content_hash(all);
}

uint64_t content_hash(std::string_view text) {
  uint64_t h = XXH3_64bits(text.data(), text.size());
  return h ? h : 1;  // 0 stands for "no such file"
}

EncodedFacts encode_facts(const std::vector<Fact>& facts) {
  std::vector<StoredFact> stored = stored_facts(facts);
  EncodedFacts out;
  out.bytes = encode(stored);
  out.digest = XXH3_64bits(out.bytes.data(), out.bytes.size());
  return out;
}

// The settings that change a file's facts or findings: which rules run and
// where they are silenced, the library models (and the text of the user's
// model files), the in-house names, the thresholds.
const std::string& AnalysisCache::fingerprint(const Config& c) const {
  std::lock_guard<std::mutex> guard(lock_);
  auto it = fingerprints_.find(&c);
  if (it != fingerprints_.end()) return it->second;
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
  list("extend-select", c.extend_select);
  list("ignore", c.ignore);
  list("extra-models", c.extra_models);
  list("extra-losses", c.extra_losses);
  list("extra-optimizers", c.extra_optimizers);
  list("extra-data-parallel", c.extra_data_parallel);
  s += "root=" + c.root + "\n";
  for (const auto& p : c.per_file_ignores) list("per-file-ignores:" + p.pattern, p.rules);
  s += fmt::format("torch={}\ndevice-memory={}\noversized={}:{}\n", c.target_torch_version, c.device_memory_bytes,
                   c.oversized_layer_bytes, c.oversized_layer_set);
  // The model files as the configuration reads them: relative to its own
  // directory (that of `source`; the working directory for the command line).
  fs::path base = c.source.empty() ? cwd_ : fs::path(c.source).parent_path();
  if (base.is_relative()) base = cwd_ / base;
  for (const auto& f : c.model_files) {
    fs::path file = fs::path(f).is_absolute() ? fs::path(f) : base / f;
    s += "model-file=" + file.lexically_normal().string() + ":";
    if (auto text = read_whole(file.string())) s += std::to_string(content_hash(*text));
    s += '\n';
  }
  return fingerprints_.emplace(&c, std::move(s)).first->second;
}

void note_file_read(const std::string& path, const std::optional<FileStamp>& stamp, const std::string* text) {
  if (!t_reads) return;
  auto& files = t_reads->files_;
  if (std::any_of(files.begin(), files.end(), [&](const FileRead& r) { return r.path == path; })) return;
  files.push_back(FileRead{path, text ? content_hash(*text) : 0, stamp});
}

void note_directory_listed(const std::string& path) {
  if (!t_reads) return;
  auto& files = t_reads->files_;
  if (std::any_of(files.begin(), files.end(), [&](const FileRead& r) { return r.directory && r.path == path; }))
    return;
  // Many files look in the same directories: their listing is hashed again
  // only when their stamp changed, or could not be trusted.
  struct Listed {
    std::optional<FileStamp> stamp;
    uint64_t hash = 0;
  };
  thread_local std::unordered_map<std::string, Listed> listed;
  std::optional<FileStamp> stamp = directory_stamp_of(path);
  auto it = listed.find(path);
  uint64_t hash;
  if (stamp && it != listed.end() && it->second.stamp && *it->second.stamp == *stamp && trusted(it->second.stamp)) {
    hash = it->second.hash;
  } else {
    hash = stamp ? listing_hash(path) : 0;
    if (listed.size() > 4096) listed.clear();
    listed[path] = Listed{stamp, hash};
  }
  files.push_back(FileRead{path, hash, stamp, true});
}

FileReads::FileReads() : previous_(t_reads) { t_reads = this; }
FileReads::~FileReads() { t_reads = previous_; }

AnalysisCache::AnalysisCache(const std::string& root, uint64_t max_bytes)
    : root_(root),
      dir_(root.empty() ? std::string() : (fs::path(root) / "facts").string()),
      max_bytes_(max_bytes),
      build_(root.empty() ? std::string() : build_identity()) {
  std::error_code ec;
  cwd_ = fs::current_path(ec);
}

std::string AnalysisCache::entry_key(const std::string& path, const Config& config) const {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  auto add = [&](std::string_view part) {
    XXH3_128bits_update(state, part.data(), part.size());
    XXH3_128bits_update(state, "\0", 1);
  };
  add(kMagic);
  add(build_);
  add(fingerprint(config));
  fs::path p(path);
  add((p.is_absolute() ? p : cwd_ / p).lexically_normal().string());
  std::string name = hex128(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return name;
}

// The segments of the cache directory, oldest first (their names start
// with the time they were written), each read whole and indexed: the last
// record of a key wins. A record cut short ends its segment's reading.
void AnalysisCache::open_segments() const {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == kSegmentSuffix) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string path = (fs::path(dir_) / name).string();
    auto bytes = read_whole(path);
    if (!bytes) continue;
    size_t segment = segments_.size();
    segments_.push_back(Segment{path, std::move(*bytes)});
    std::string_view data = segments_.back().bytes;
    if (data.substr(0, kSegmentMagic.size()) != kSegmentMagic) continue;
    size_t at = kSegmentMagic.size();
    while (at + kKeySize + 8 <= data.size()) {
      std::string key(data.substr(at, kKeySize));
      uint64_t size;
      std::memcpy(&size, data.data() + at + kKeySize, 8);
      size_t begin = at + kKeySize + 8;
      if (size > data.size() - begin) break;
      auto [it, fresh] = index_.try_emplace(std::move(key), records_.size());
      if (!fresh) it->second = records_.size();
      records_.push_back(Record{segment, begin, static_cast<size_t>(size)});
      at = begin + static_cast<size_t>(size);
    }
  }
  used_ = std::make_unique<std::atomic<bool>[]>(records_.size());
}

std::optional<AnalysisCache::Entry> AnalysisCache::load(const std::string& path,
                                                         const std::optional<FileStamp>& stamp,
                                                         const std::function<const std::string*()>& text,
                                                         const Config& config) const {
  if (dir_.empty()) return std::nullopt;
  std::call_once(opened_, [this] { open_segments(); });
  auto found = index_.find(entry_key(path, config));
  if (found == index_.end()) return std::nullopt;
  const Record& record = records_[found->second];
  std::string_view bytes = std::string_view(segments_[record.segment].bytes).substr(record.offset, record.size);
  // magic, checksum of the rest, the header's size, the header
  constexpr size_t kFixed = kMagic.size() + 8 + 4;
  if (bytes.size() < kFixed || bytes.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  uint64_t checksum;
  uint32_t header_size;
  std::memcpy(&checksum, bytes.data() + kMagic.size(), 8);
  std::memcpy(&header_size, bytes.data() + kMagic.size() + 8, 4);
  std::string_view rest = bytes.substr(kMagic.size() + 8);
  if (XXH3_64bits(rest.data(), rest.size()) != checksum || header_size > rest.size() - 4) return std::nullopt;
  Header header;
  if (!decode(rest.substr(4, header_size), header)) return std::nullopt;
  Entry entry;
  entry.facts_at_ = kFixed + header_size;
  entry.findings_at_ = entry.facts_at_ + header.facts_size;
  if (entry.findings_at_ > bytes.size()) return std::nullopt;
  // The file: unchanged by its stamp, else by its content.
  if (!(stamp && header.stamp && *stamp == *header.stamp)) {
    const std::string* now = text();
    if (!now || content_hash(*now) != header.content) return std::nullopt;
    entry.restamp_ = true;
  }
  for (const auto& read : header.reads) {
    if (!read.directory) {
      if (!unchanged(read)) return std::nullopt;  // an imported file changed
      continue;
    }
    std::string key = fmt::format("{}:{}", read.content, read.path);  // entries may have seen other names
    std::unique_lock<std::mutex> guard(lock_);
    auto known = directories_.find(key);
    if (known == directories_.end()) {
      guard.unlock();
      bool same = unchanged(read);
      guard.lock();
      known = directories_.emplace(std::move(key), same).first;
    }
    if (!known->second) return std::nullopt;  // a file was created or removed where an import looked
  }
  entry.reads_ = std::move(header.reads);
  used_[found->second] = true;  // kept first when the cache is trimmed
  entry.path_ = path;
  entry.bytes_ = std::string(bytes);
  entry.content_ = header.content;
  entry.facts_digest_ = header.facts_digest;
  return entry;
}

std::vector<Fact> AnalysisCache::Entry::facts() const {
  std::vector<StoredFact> stored;
  if (!decode(std::string_view(bytes_).substr(facts_at_, findings_at_ - facts_at_), stored)) return {};
  std::vector<Fact> out;
  out.reserve(stored.size());
  for (auto& f : stored) out.push_back(Fact{std::move(f.kind), std::move(f.key), path_, f.line, std::move(f.values)});
  return out;
}

EncodedFacts AnalysisCache::Entry::encoded_facts() const {
  return EncodedFacts{bytes_.substr(facts_at_, findings_at_ - facts_at_), facts_digest_};
}

std::optional<CachedFindings> AnalysisCache::Entry::findings() const {
  std::optional<CachedFindings> out;
  if (!decode(std::string_view(bytes_).substr(findings_at_), out)) return std::nullopt;
  if (out)
    for (auto& d : out->diagnostics) d.path = path_;
  return out;
}

void AnalysisCache::store(const std::string& path, const std::optional<FileStamp>& stamp, uint64_t content,
                          const Config& config, const EncodedFacts& facts,
                          const std::vector<FileRead>& reads, const CachedFindings* findings) const {
  if (dir_.empty()) return;
  Header header;
  header.content = content;
  header.stamp = trusted(stamp);
  for (const auto& r : reads) header.reads.push_back(FileRead{r.path, r.content, trusted(r.stamp), r.directory});
  const std::string& facts_bytes = facts.bytes;
  header.facts_digest = facts.digest;
  header.facts_size = facts_bytes.size();
  std::optional<CachedFindings> kept;
  if (findings) kept = *findings;
  std::string findings_bytes = encode(kept);
  std::string header_bytes = encode(header);
  std::string rest;
  uint32_t header_size = static_cast<uint32_t>(header_bytes.size());
  rest.append(reinterpret_cast<const char*>(&header_size), 4);
  rest += header_bytes;
  rest += facts_bytes;
  rest += findings_bytes;
  uint64_t checksum = XXH3_64bits(rest.data(), rest.size());
  std::string entry_bytes(kMagic);
  entry_bytes.append(reinterpret_cast<const char*>(&checksum), 8);
  entry_bytes += rest;

  std::string key = entry_key(path, config);
  std::lock_guard<std::mutex> guard(lock_);
  pending_.emplace_back(std::move(key), std::move(entry_bytes));
  ++writes_;
}

// Writes `records` (key, entry) as one new segment, atomically (a temporary
// file renamed into place); false when it cannot.
bool AnalysisCache::write_segment(const std::vector<std::pair<std::string_view, std::string_view>>& records) const {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) {
    fs::create_directories(dir_, ec);
    if (ec) return false;
    // The cache is never part of the project.
    if (!fs::exists(fs::path(root_) / ".gitignore", ec))
      std::ofstream(fs::path(root_) / ".gitignore") << "# Automatically created by torchleak.\n*\n";
  }
  static std::atomic<unsigned> counter{0};
  std::string name = fmt::format("{:020}-{}-{}", now_ns(), ::getpid(), counter++);
  std::string tmp = (fs::path(dir_) / (".tmp-" + name)).string();
  std::string target = (fs::path(dir_) / (name + std::string(kSegmentSuffix))).string();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kSegmentMagic;
    for (const auto& [key, bytes] : records) {
      uint64_t size = bytes.size();
      out << key;
      out.write(reinterpret_cast<const char*>(&size), 8);
      out << bytes;
    }
    if (!out) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, target, ec);  // atomic: a reader sees the whole segment or none
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

void AnalysisCache::flush() const {
  if (dir_.empty() || pending_.empty()) return;
  std::call_once(opened_, [this] { open_segments(); });
  uint64_t total = 0;
  for (const auto& s : segments_) total += s.bytes.size();
  for (const auto& [key, bytes] : pending_) total += kKeySize + 8 + bytes.size();
  bool over = max_bytes_ && total > max_bytes_;
  if (segments_.size() + 1 <= kMaxSegments && !over) {
    std::vector<std::pair<std::string_view, std::string_view>> records;
    for (const auto& [key, bytes] : pending_) records.emplace_back(key, bytes);
    write_segment(records);
    return;
  }
  // Merged into one segment: this run's entries, then those it used, then
  // the others from the newest segment back, while they fit under three
  // quarters of the bound (when there is one).
  uint64_t target = max_bytes_ ? max_bytes_ - max_bytes_ / 4 : UINT64_MAX;
  std::vector<std::pair<std::string_view, std::string_view>> records;
  std::set<std::string_view> taken;
  uint64_t size = kSegmentMagic.size();
  auto take = [&](std::string_view key, std::string_view bytes) {
    if (taken.count(key) || size + kKeySize + 8 + bytes.size() > target) return;
    taken.insert(key);
    records.emplace_back(key, bytes);
    size += kKeySize + 8 + bytes.size();
  };
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) take(it->first, it->second);
  std::vector<std::pair<size_t, std::string_view>> live;  // record, key: the latest of each key
  for (const auto& [key, i] : index_) live.emplace_back(i, key);
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [i, key] : live) {
      if ((pass == 0) != used_[i].load()) continue;
      const Record& r = records_[i];
      take(key, std::string_view(segments_[r.segment].bytes).substr(r.offset, r.size));
    }
  if (!write_segment(records)) return;
  std::error_code ec;
  for (const auto& s : segments_) fs::remove(s.path, ec);  // another run's newer segments stay
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

size_t clean_analysis_cache(const std::string& root) {
  size_t removed = 0;
  std::error_code ec;
  std::string dir = root.empty() ? std::string() : (fs::path(root) / "facts").string();
  if (dir.empty() || !fs::is_directory(dir, ec)) return 0;
  std::vector<fs::path> entries;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) &&
        (it->path().extension() == kSegmentSuffix || it->path().extension() == ".entry" ||
         it->path().extension() == ".facts"))  // the layouts of earlier versions too
      entries.push_back(it->path());
  for (const auto& p : entries) removed += fs::remove(p, ec) ? 1 : 0;
  return removed;
}

}  // namespace torchleak
