#include "cpp/driver.h"

#include <clang/Basic/DiagnosticLex.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <fmt/format.h>
#include <llvm/Support/VirtualFileSystem.h>

#include <cstdlib>

namespace torchleak::cpp {

std::string resource_dir() {
  if (const char* dir = std::getenv("TORCHLEAK_CLANG_RESOURCE_DIR"); dir && *dir) return dir;
  return TORCHLEAK_CLANG_RESOURCE_DIR;
}

std::vector<std::string> syntax_only_arguments(const std::vector<std::string>& argv, const std::string& file,
                                               const std::vector<std::string>& before,
                                               const std::vector<std::string>& after) {
  using namespace clang::tooling;
  std::vector<std::string> args = argv;
  args = getClangStripOutputAdjuster()(args, file);
  args = getClangStripDependencyFileAdjuster()(args, file);
  args = getClangSyntaxOnlyAdjuster()(args, file);
  // -fno-caret-diagnostics also keeps Clang from printing "N errors generated".
  std::vector<std::string> head = {"-resource-dir=" + resource_dir(), "-Wno-unknown-warning-option",
                                   "-fno-caret-diagnostics"};
  head.insert(head.end(), before.begin(), before.end());
  args = getInsertArgumentAdjuster(head, ArgumentInsertPosition::BEGIN)(args, file);
  args = getInsertArgumentAdjuster(after, ArgumentInsertPosition::END)(args, file);
  return args;
}

llvm::IntrusiveRefCntPtr<clang::FileManager> file_manager(const std::string& directory, const std::string& path,
                                                          const std::string& text) {
  auto overlay = llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(llvm::vfs::createPhysicalFileSystem());
  if (!path.empty()) {
    auto memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    memory->addFile(path, 0, llvm::MemoryBuffer::getMemBufferCopy(text, path));
    overlay->pushOverlay(memory);
  }
  if (!directory.empty()) overlay->setCurrentWorkingDirectory(directory);
  clang::FileSystemOptions options;
  options.WorkingDir = directory;
  return llvm::makeIntrusiveRefCnt<clang::FileManager>(options, overlay);
}

void ErrorCollector::HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) {
  DiagnosticConsumer::HandleDiagnostic(level, info);
  if (level < clang::DiagnosticsEngine::Error) return;
  CompileError e;
  llvm::SmallString<256> message;
  info.FormatDiagnostic(message);
  e.message = message.str().str();
  if (info.hasSourceManager() && info.getLocation().isValid()) {
    clang::PresumedLoc p = info.getSourceManager().getPresumedLoc(info.getLocation());
    if (p.isValid()) {
      e.file = p.getFilename();
      e.line = p.getLine();
    }
  }
  if (info.getID() == clang::diag::err_pp_file_not_found && info.getNumArgs() > 0 &&
      info.getArgKind(0) == clang::DiagnosticsEngine::ak_std_string)
    e.missing_header = info.getArgStdStr(0);
  errors_.push_back(std::move(e));
}

std::string ErrorCollector::summary(size_t limit) const {
  std::string out;
  for (size_t i = 0; i < errors_.size() && i < limit; ++i) {
    if (!out.empty()) out += "; ";
    const CompileError& e = errors_[i];
    out += e.file.empty() ? e.message : fmt::format("{}:{}: {}", e.file, e.line, e.message);
  }
  if (errors_.size() > limit) out += fmt::format("; and {} more", errors_.size() - limit);
  return out;
}

}  // namespace torchleak::cpp
