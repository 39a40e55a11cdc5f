#include "cpp/compilation.h"

#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/JSONCompilationDatabase.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

namespace fs = std::filesystem;

namespace torchleak::cpp {

namespace {

// Clang reads a compilation database as YAML, a superset of JSON: on a syntax
// error it prints to standard error and keeps the entries before it. So the
// text is checked as JSON first, without building a document.
class JsonSyntaxCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string error;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 7: ..." without its prefix.
    error = e.what();
    if (size_t at = error.find("parse error at "); at != std::string::npos) error.erase(0, at + 15);
    return false;
  }
};

// Why `text` is not JSON ("not valid JSON at line L, column C: ..."), or "".
// The parser quotes what it last read: bytes that are not printable ASCII
// are written as \xNN, so that the message itself is valid text.
std::string json_syntax_error(const std::string& text) {
  JsonSyntaxCheck check;
  if (nlohmann::json::sax_parse(text, &check)) return "";
  std::string out = "not valid JSON at ";
  for (unsigned char c : check.error) {
    if (c >= 0x20 && c < 0x7F)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02X}", c);
  }
  return out;
}

struct LoadedDatabase {
  std::unique_ptr<clang::tooling::CompilationDatabase> db;  // null: none, or unreadable
  std::string error;
};

// Databases are loaded once per directory and shared by every thread.
const LoadedDatabase& database_in(const fs::path& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<LoadedDatabase>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[dir.string()];
  if (slot) return *slot;
  slot = std::make_unique<LoadedDatabase>();
  fs::path file = dir / "compile_commands.json";
  std::error_code ec;
  fs::file_status status = fs::status(file, ec);
  if (!fs::exists(status)) return *slot;
  if (!fs::is_regular_file(status)) {
    slot->error = "not a regular file";
    return *slot;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    slot->error = fmt::format("cannot be read: {}", std::strerror(errno));
    return *slot;
  }
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) {
    slot->error = "cannot be read";
    return *slot;
  }
  if (std::string why = json_syntax_error(text); !why.empty()) {
    slot->error = why;
    return *slot;
  }
  std::string error;
  auto db = clang::tooling::JSONCompilationDatabase::loadFromBuffer(
      text, error, clang::tooling::JSONCommandLineSyntax::AutoDetect);
  if (!db) {
    // Clang quotes key names twice: Unknown key: ""commmand"".
    for (size_t at; (at = error.find("\"\"")) != std::string::npos;) error.erase(at, 1);
    slot->error = error.empty() ? "not a compilation database" : error;
    return *slot;
  }
  // Files the database does not list (headers, new files) borrow the command
  // of the closest listed file, as clangd does.
  slot->db = clang::tooling::inferMissingCompileCommands(std::move(db));
  return *slot;
}

std::optional<CompileCommand> from_database(const std::string& file, const fs::path& dir,
                                            const LoadedDatabase& loaded) {
  std::vector<clang::tooling::CompileCommand> commands = loaded.db->getCompileCommands(file);
  if (commands.empty() || commands.front().CommandLine.empty()) return std::nullopt;
  const clang::tooling::CompileCommand& c = commands.front();
  CompileCommand out;
  out.directory = c.Directory;
  out.argv = c.CommandLine;
  out.origin = fmt::format("compile_commands.json in {}", dir.string());
  if (!c.Heuristic.empty()) out.origin += fmt::format(" ({})", c.Heuristic);
  return out;
}

}  // namespace

bool is_header(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  return ext == ".h" || ext == ".hh" || ext == ".hpp" || ext == ".hxx" || ext == ".cuh";
}

CompileCommand fallback_command(const std::string& file, const EnvLookup& env) {
  CompileCommand out;
  out.directory = fs::path(file).parent_path().string();
  out.argv = {"clang++", "-std=c++17"};
  if (auto install = find_libtorch(env)) {
    for (const auto& dir : install->include_dirs) {
      out.argv.push_back("-isystem");
      out.argv.push_back(dir);
    }
    out.origin = fmt::format("fallback flags: -std=c++17 and LibTorch from {} ({})", install->origin,
                             install->prefix);
  } else {
    out.origin = "fallback flags: -std=c++17, and no LibTorch install found";
  }
  out.argv.insert(out.argv.end(), {"-x", is_header(file) ? "c++-header" : "c++", file});
  out.fallback = true;
  return out;
}

std::optional<CompileCommand> compile_command_for(const std::string& file, const Settings& settings,
                                                  const EnvLookup& env, std::string& error) {
  if (!settings.database_dir.empty()) {
    fs::path dir = fs::absolute(settings.database_dir).lexically_normal();
    const LoadedDatabase& loaded = database_in(dir);
    if (!loaded.db) {
      error = loaded.error.empty()
                  ? fmt::format("-p {}: no compile_commands.json there (configure the project with "
                                "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON)",
                                settings.database_dir)
                  : fmt::format("-p {}: compile_commands.json: {}", settings.database_dir, loaded.error);
      return std::nullopt;
    }
    if (auto c = from_database(file, dir, loaded)) return c;
    return fallback_command(file, env);
  }
  for (fs::path dir = fs::path(file).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const LoadedDatabase& loaded = database_in(dir);
    // A broken database is the project's, not a reason to look elsewhere:
    // compiling with another directory's flags, or none, would only mislead.
    if (!loaded.error.empty()) {
      error = fmt::format("{}: {} (the compilation database found above the file; fix it, or name "
                          "another build directory with -p)",
                          (dir / "compile_commands.json").string(), loaded.error);
      return std::nullopt;
    }
    if (loaded.db) {
      if (auto c = from_database(file, dir, loaded)) return c;
      break;
    }
    if (dir == dir.parent_path()) break;
  }
  return fallback_command(file, env);
}

}  // namespace torchleak::cpp
