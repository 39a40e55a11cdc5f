// What a language frontend returns for one file, and the registry of
// frontends the engine dispatches to. The engine knows nothing of rules or
// of any language: it reads files, hands them to the frontend that claims
// them, merges facts into the project index and resolves deferred findings.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "core/project_index.h"

namespace torchleak {

struct SourceFile {
  std::string path;  // as it will be reported
  std::string text;  // the bytes of the file (an unsaved buffer in the editor)
};

// A finding that depends on facts from other files. `resolve` runs after the
// first phase; it may complete the message and returns false to drop it.
struct DeferredDiagnostic {
  Diagnostic diagnostic;
  std::function<bool(const ProjectIndex&, Diagnostic&)> resolve;
};

struct FileResult {
  std::string path;
  std::vector<Diagnostic> diagnostics;
  std::vector<DeferredDiagnostic> deferred;
  std::vector<Fact> facts;
  std::optional<std::string> error;  // the file could not be analyzed: why
  std::vector<std::string> notes;    // analyzed, but with a caveat (syntax errors)
};

class LanguageFrontend {
 public:
  virtual ~LanguageFrontend() = default;
  virtual std::string_view language() const = 0;
  virtual bool handles(std::string_view path) const = 0;
  // Analyzes one file with the rules `config` enables.
  virtual void analyze(const SourceFile& file, const Config& config, FileResult& out) const = 0;
};

// Frontends register themselves at static-initialisation time.
void register_frontend(std::unique_ptr<LanguageFrontend> frontend);
const std::vector<std::unique_ptr<LanguageFrontend>>& frontends();
const LanguageFrontend* frontend_for(std::string_view path);

}  // namespace torchleak
