#include "cpp/compilation.h"

#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/JSONCompilationDatabase.h>
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

namespace fs = std::filesystem;

namespace torchleak::cpp {

namespace {

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
  if (!fs::is_regular_file(file, ec)) return *slot;
  std::string error;
  auto db = clang::tooling::JSONCompilationDatabase::loadFromFile(
      file.string(), error, clang::tooling::JSONCommandLineSyntax::AutoDetect);
  if (!db) {
    slot->error = error.empty() ? "cannot be read" : error;
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
    if (loaded.db) {
      if (auto c = from_database(file, dir, loaded)) return c;
      break;
    }
    if (dir == dir.parent_path()) break;
  }
  return fallback_command(file, env);
}

}  // namespace torchleak::cpp
