#include "core/project_index.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace torchleak {

std::string_view last_component(std::string_view dotted) {
  auto dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

void ProjectIndex::add(Fact fact) {
  auto key = std::make_pair(fact.kind, fact.key);
  facts_[std::move(key)].push_back(std::move(fact));
}

void ProjectIndex::add_all(std::vector<Fact> facts) {
  for (auto& f : facts) add(std::move(f));
}

void ProjectIndex::finalize() {
  for (auto& [key, list] : facts_) {
    std::sort(list.begin(), list.end(), [](const Fact& a, const Fact& b) {
      return std::tie(a.file, a.line, a.values) < std::tie(b.file, b.line, b.values);
    });
  }
}

std::vector<const Fact*> ProjectIndex::find(std::string_view kind, std::string_view key) const {
  std::vector<const Fact*> out;
  auto it = facts_.find(std::make_pair(std::string(kind), std::string(key)));
  if (it == facts_.end()) return out;
  for (const auto& f : it->second) out.push_back(&f);
  return out;
}

bool ProjectIndex::derives_from(std::string_view class_name,
                                const std::vector<std::string>& roots) const {
  return derives_from(class_name, [&](std::string_view base) {
    return std::find(roots.begin(), roots.end(), base) != roots.end();
  });
}

bool ProjectIndex::derives_from(std::string_view class_name,
                                const std::function<bool(std::string_view)>& is_root) const {
  std::set<std::string, std::less<>> seen;
  std::vector<std::string> work{std::string(class_name)};
  while (!work.empty()) {
    std::string name = std::move(work.back());
    work.pop_back();
    if (!seen.insert(name).second) continue;
    for (const Fact* f : find("class", name)) {
      for (const auto& base : f->values) {
        if (is_root(base)) return true;
        work.emplace_back(last_component(base));
      }
    }
  }
  return false;
}

std::vector<std::string> ProjectIndex::subclasses_of(std::string_view class_name) const {
  std::vector<std::string> out{std::string(class_name)};
  std::set<std::string, std::less<>> seen{std::string(class_name)};
  for (size_t i = 0; i < out.size(); ++i) {
    for (const auto& [key, list] : facts_) {
      if (key.first != "class" || seen.count(key.second)) continue;
      for (const auto& f : list) {
        bool child = std::any_of(f.values.begin(), f.values.end(), [&](const std::string& b) {
          return last_component(b) == out[i];
        });
        if (child) {
          seen.insert(key.second);
          out.push_back(key.second);
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace torchleak
