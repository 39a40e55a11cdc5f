#include "cpp/pch.h"

#include "core/config_file.h"
#include "core/analysis_cache.h"

#include <clang/Basic/SourceManager.h>
#include <clang/Basic/Version.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Tooling/Tooling.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <llvm/Support/xxhash.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "cpp/driver.h"

namespace fs = std::filesystem;

namespace torchleak::cpp {

namespace {

struct InputFile {
  std::string path;
  long long size = 0;
  long long mtime = 0;
};

bool stat_file(const std::string& path, long long& size, long long& mtime) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  size = static_cast<long long>(st.st_size);
  mtime = static_cast<long long>(st.st_mtim.tv_sec);
  return true;
}

// Builds the precompiled header and records every file it read.
class RecordingPchAction final : public clang::GeneratePCHAction {
 public:
  explicit RecordingPchAction(std::vector<InputFile>& inputs) : inputs_(inputs) {}

 protected:
  void EndSourceFileAction() override {
    const clang::SourceManager& sm = getCompilerInstance().getSourceManager();
    for (auto it = sm.fileinfo_begin(); it != sm.fileinfo_end(); ++it) {
      InputFile f;
      f.path = it->first->tryGetRealPathName().str();
      if (f.path.empty()) f.path = it->first->getName().str();
      if (stat_file(f.path, f.size, f.mtime)) inputs_.push_back(std::move(f));
    }
    GeneratePCHAction::EndSourceFileAction();
  }

 private:
  std::vector<InputFile>& inputs_;
};

bool write_file_atomically(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += fmt::format(".tmp.{}.{}", ::getpid(), std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether every file of the manifest is unchanged.
bool manifest_current(const fs::path& manifest) {
  std::ifstream in(manifest);
  if (!in) return false;
  std::string line;
  size_t count = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    long long size = 0, mtime = 0;
    std::string path;
    if (!(ls >> size >> mtime) || !std::getline(ls >> std::ws, path)) return false;
    long long now_size = 0, now_mtime = 0;
    if (!stat_file(path, now_size, now_mtime) || now_size != size || now_mtime != mtime) return false;
    ++count;
  }
  return count > 0;
}

// An exclusive lock on a file, held for the object's lifetime: other
// processes building the same header wait instead of building it twice.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

bool includes_libtorch(const std::string& text) {
  static const std::regex include(R"(^[ \t]*#[ \t]*include[ \t]*[<"](torch|ATen|c10)/)", std::regex::multiline);
  return std::regex_search(text, include);
}

PchCache::PchCache(std::string directory, uint64_t max_bytes)
    : directory_(std::move(directory)), max_bytes_(max_bytes) {}

uint64_t PchCache::default_max_bytes() {
  if (const char* s = std::getenv("TORCHLEAK_PCH_CACHE_SIZE"); s && *s)
    if (auto n = parse_size(s)) return *n;
  return uint64_t{2} << 30;
}

size_t PchCache::trim(const std::string& keep) const {
  return trim_least_recently_used(directory_, ".pch", false, max_bytes_, max_bytes_, [&](const std::string& path) {
    std::string key = fs::path(path).stem().string();
    if (key == keep) return false;
    FileLock lock(fs::path(directory_) / (key + ".lock"));  // not while another run builds it
    std::error_code ec;
    fs::remove(fs::path(directory_) / (key + ".inputs"), ec);
    return fs::remove(path, ec);
  });
}

std::string PchCache::default_directory() {
  if (const char* d = std::getenv("TORCHLEAK_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return (fs::path(d) / "torchleak").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "torchleak").string();
  return (fs::temp_directory_path() / "torchleak-cache").string();
}

PchCache::Result PchCache::get(const std::vector<std::string>& args, const std::string& file,
                               const std::string& directory) {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  fs::path umbrella = fs::path(directory_) / "torchleak-libtorch.h";
  const std::string umbrella_text = fmt::format("#include <{}>\n", kUmbrella);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (read_file(umbrella) != umbrella_text && !write_file_atomically(umbrella, umbrella_text))
      return {{}, false, fmt::format("cannot write to the cache directory {}", directory_)};
  }
  // The same command, precompiling the umbrella header instead of the file.
  std::vector<std::string> pch_args;
  bool replaced = false;
  for (const std::string& a : args) {
    if (a == "-fsyntax-only") continue;
    bool is_input = a == file || (!directory.empty() && fs::path(a).is_relative() &&
                                  (fs::path(directory) / a).lexically_normal() == fs::path(file));
    if (is_input && !replaced) {
      pch_args.insert(pch_args.end(), {"-x", "c++-header", umbrella.string()});
      replaced = true;
      continue;
    }
    pch_args.push_back(a);
  }
  if (!replaced) return {{}, false, "the compile command does not name the file"};
  pch_args.push_back("-fpch-instantiate-templates");

  // The working directory matters only when a path argument is relative.
  static const char* const kPathOptions[] = {"-I", "-iquote", "-isystem", "-idirafter", "-include", "-imacros",
                                             "-F", "-isysroot", "--sysroot"};
  bool relative = false;
  for (size_t i = 1; i < pch_args.size(); ++i) {
    const std::string& a = pch_args[i];
    for (const char* opt : kPathOptions) {
      size_t n = std::strlen(opt);
      if (a == opt && i + 1 < pch_args.size() && !pch_args[i + 1].empty() && pch_args[i + 1][0] != '/')
        relative = true;
      if (a.size() > n && a.compare(0, n, opt) == 0 && a[n] != '/' && a[n] != '=') relative = true;
    }
  }
  std::string key_text = fmt::format("{}\n{}\n{}\n", CLANG_VERSION_STRING, resource_dir(),
                                     relative ? directory : std::string());
  for (size_t i = 1; i < pch_args.size(); ++i) key_text += pch_args[i] + '\0';
  std::string key = fmt::format("{:016x}", llvm::xxHash64(key_text));

  Entry* entry;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_unique<Entry>();
    entry = slot.get();
  }
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (entry->checked) {
    Result r = entry->result;
    r.built = false;
    return r;
  }
  entry->result = build_or_reuse(pch_args, directory, key);
  entry->checked = true;
  return entry->result;
}

PchCache::Result PchCache::build_or_reuse(const std::vector<std::string>& pch_args, const std::string& directory,
                                          const std::string& key) {
  fs::path dir(directory_);
  fs::path pch = dir / (key + ".pch"), manifest = dir / (key + ".inputs");
  FileLock lock(dir / (key + ".lock"));
  std::error_code ec;
  if (fs::is_regular_file(pch, ec) && manifest_current(manifest)) {
    fs::last_write_time(pch, fs::file_time_type::clock::now(), ec);  // used: kept longest
    return {pch.string(), false, {}};
  }

  fs::path tmp = pch;
  tmp += fmt::format(".tmp.{}", ::getpid());
  std::vector<std::string> argv = pch_args;
  argv.insert(argv.end(), {"-o", tmp.string()});
  std::vector<InputFile> inputs;
  auto files = file_manager(directory, {}, {});
  clang::tooling::ToolInvocation invocation(argv, std::make_unique<RecordingPchAction>(inputs), files.get());
  ErrorCollector errors;
  invocation.setDiagnosticConsumer(&errors);
  bool ok = invocation.run() && errors.errors().empty() && fs::is_regular_file(tmp, ec);
  if (!ok) {
    fs::remove(tmp, ec);
    std::string why = errors.errors().empty() ? "the compiler failed" : errors.summary();
    return {{}, false, fmt::format("precompiling <{}> failed: {}", kUmbrella, why)};
  }
  std::string listing;
  for (const InputFile& f : inputs) listing += fmt::format("{} {} {}\n", f.size, f.mtime, f.path);
  fs::remove(manifest, ec);
  fs::rename(tmp, pch, ec);
  if (ec || !write_file_atomically(manifest, listing)) {
    fs::remove(tmp, ec);
    return {{}, false, fmt::format("cannot write to the cache directory {}", directory_)};
  }
  ++builds_;
  trim(key);
  return {pch.string(), true, {}};
}

}  // namespace torchleak::cpp
