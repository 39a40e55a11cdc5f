// What running Clang in-process needs, shared by the precompiled-header cache
// and the translation-unit analysis: the driver arguments, a file system that
// serves unsaved buffers, and a diagnostic consumer that keeps errors for the
// report instead of printing them.
#pragma once

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/FileManager.h>

#include <string>
#include <vector>

namespace torchleak::cpp {

// Clang's resource directory (stddef.h and the other compiler headers), as
// the build found it; TORCHLEAK_CLANG_RESOURCE_DIR in the environment overrides it.
std::string resource_dir();

// The driver arguments for a syntax-only run of `argv` (a compile command):
// outputs and dependency files stripped, `before` inserted after the
// compiler, `after` appended, the resource directory set.
std::vector<std::string> syntax_only_arguments(const std::vector<std::string>& argv, const std::string& file,
                                               const std::vector<std::string>& before,
                                               const std::vector<std::string>& after);

// A file manager working in `directory`, serving `text` as the contents of
// `path` when `path` is not empty.
llvm::IntrusiveRefCntPtr<clang::FileManager> file_manager(const std::string& directory, const std::string& path,
                                                          const std::string& text);

struct CompileError {
  std::string file;  // as Clang names it
  unsigned line = 0;
  std::string message;
  std::string missing_header;  // for "'x.h' file not found"
};

class ErrorCollector : public clang::DiagnosticConsumer {
 public:
  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override;
  const std::vector<CompileError>& errors() const { return errors_; }
  // "file:line: message" for the first `limit` errors, joined with "; ".
  std::string summary(size_t limit = 3) const;

 private:
  std::vector<CompileError> errors_;
};

}  // namespace torchleak::cpp
