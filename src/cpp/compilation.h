// The command a C++ file is compiled with: from a compilation database (the
// one `-p` names, else a compile_commands.json found walking up from the
// file), else fallback flags (-std=c++17 and LibTorch's include directories).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cpp/libtorch.h"
#include "cpp/settings.h"

namespace torchleak::cpp {

struct CompileCommand {
  std::string directory;          // where the command runs; relative paths are from here
  std::vector<std::string> argv;  // the compiler, its arguments, and the file
  std::string origin;             // "compile_commands.json in build/", "fallback flags"
  bool fallback = false;
};

// The compile command for `file` (an absolute path). Fails (with `error` set)
// when `-p` names a directory without a usable compile_commands.json, or when
// the closest compile_commands.json above the file cannot be read or parsed.
std::optional<CompileCommand> compile_command_for(const std::string& file, const Settings& settings,
                                                  const EnvLookup& env, std::string& error);

// The flags used when no database lists a file.
CompileCommand fallback_command(const std::string& file, const EnvLookup& env);

// Whether `path` names a header by its extension (.h, .hh, .hpp, .hxx, .cuh).
bool is_header(const std::string& path);

}  // namespace torchleak::cpp
