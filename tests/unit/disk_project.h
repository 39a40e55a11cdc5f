// A project's files on disk, in a fresh directory made the working directory
// for the test: the engine reads another file of the project from disk when
// an import names it, so cross-file tests cannot keep their files in memory.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/engine.h"

namespace torchleak::testing {

class DiskProject : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = std::filesystem::current_path();
    std::string tmpl = (std::filesystem::temp_directory_path() / "torchleak-project-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    std::filesystem::current_path(root_);
  }
  void TearDown() override {
    std::filesystem::current_path(previous_);
    std::filesystem::remove_all(root_);
  }
  // Writes the files (relative paths) and analyzes them as a project.
  RunResult run(const std::vector<SourceFile>& files, const Config& config) {
    for (const SourceFile& f : files) {
      std::filesystem::path parent = std::filesystem::path(f.path).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent);
      std::ofstream(f.path) << f.text;
    }
    return run_sources(files, config);
  }

 private:
  std::filesystem::path previous_, root_;
};

}  // namespace torchleak::testing
