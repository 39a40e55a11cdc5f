#include "core/analysis.h"

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

const LanguageFrontend* frontend_for(std::string_view path) {
  for (const auto& f : registry())
    if (f->handles(path)) return f.get();
  return nullptr;
}

}  // namespace torchleak
