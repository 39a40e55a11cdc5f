// How C++ sources are compiled for analysis, from the command line and the
// configuration (plain data; no Clang type).
#pragma once

#include <string>
#include <vector>

namespace torchleak::cpp {

struct Settings {
  // The directory holding compile_commands.json (`-p`); empty: look for one
  // in each file's directory and its parents, as clangd does.
  std::string database_dir;
  std::vector<std::string> extra_args;         // appended to every compile command
  std::vector<std::string> extra_args_before;  // inserted after the compiler
  // Where precompiled headers are kept; empty: $TORCHLEAK_CACHE_DIR, else
  // $XDG_CACHE_HOME/torchleak, else ~/.cache/torchleak.
  std::string cache_dir;
  bool use_pch = true;
};

}  // namespace torchleak::cpp
