#include "core/analysis.h"

#include "core/notebook.h"

namespace torchleak {

namespace {
std::vector<std::unique_ptr<LanguageFrontend>>& registry() {
  static std::vector<std::unique_ptr<LanguageFrontend>> r;
  return r;
}
}  // namespace

void register_frontend(std::unique_ptr<LanguageFrontend> frontend) {
  registry().push_back(std::move(frontend));
}

const std::vector<std::unique_ptr<LanguageFrontend>>& frontends() { return registry(); }

bool is_cpp_source_path(std::string_view path) {
  size_t dot = path.rfind('.');
  size_t slash = path.find_last_of("/\\");
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash)) return false;
  std::string_view ext = path.substr(dot);
  for (std::string_view e : {".cpp", ".cc", ".cxx", ".c++", ".h", ".hpp", ".hh", ".hxx"})
    if (ext == e) return true;
  return false;
}

const LanguageFrontend* frontend_for(std::string_view path) {
  // A notebook's code cells are one Python program (core/notebook.h).
  if (is_notebook_path(path)) {
    for (const auto& f : registry())
      if (f->language() == "python") return f.get();
    return nullptr;
  }
  for (const auto& f : registry())
    if (f->handles(path)) return f.get();
  return nullptr;
}

}  // namespace torchleak
