#include "core/project_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

namespace torchleak {

std::string_view last_component(std::string_view dotted) {
  auto dot = dotted.rfind('.');
  return dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
}

std::string ProjectIndex::slot(std::string_view kind, std::string_view key) {
  std::string s;
  s.reserve(kind.size() + 1 + key.size());
  s.append(kind).push_back('\0');
  s.append(key);
  return s;
}

void ProjectIndex::add(Fact fact) {
  finalized_ = false;
  facts_[slot(fact.kind, fact.key)].push_back(std::move(fact));
}

void ProjectIndex::add_all(std::vector<Fact> facts) {
  for (auto& f : facts) add(std::move(f));
}

void ProjectIndex::finalize() {
  children_.clear();
  for (auto& [slot, list] : facts_) {
    std::sort(list.begin(), list.end(), [](const Fact& a, const Fact& b) {
      return std::tie(a.file, a.line, a.values) < std::tie(b.file, b.line, b.values);
    });
    if (list.front().kind != "class") continue;
    for (const auto& f : list)
      for (const auto& base : f.values) children_[std::string(last_component(base))].push_back(f.key);
  }
  for (auto& [base, kids] : children_) {
    std::sort(kids.begin(), kids.end());
    kids.erase(std::unique(kids.begin(), kids.end()), kids.end());
  }
  finalized_ = true;
}

std::vector<std::string> ProjectIndex::direct_subclasses(std::string_view base) const {
  if (finalized_) {
    auto it = children_.find(base);
    return it == children_.end() ? std::vector<std::string>{} : it->second;
  }
  std::vector<std::string> out;
  for (const auto& [slot, list] : facts_) {
    if (list.front().kind != "class") continue;
    bool child = std::any_of(list.begin(), list.end(), [&](const Fact& f) {
      return std::any_of(f.values.begin(), f.values.end(),
                         [&](const std::string& b) { return last_component(b) == base; });
    });
    if (child) out.push_back(list.front().key);
  }
  std::sort(out.begin(), out.end());  // the map's order is not alphabetical
  return out;
}

std::vector<const Fact*> ProjectIndex::find(std::string_view kind, std::string_view key) const {
  std::vector<const Fact*> out;
  auto it = facts_.find(slot(kind, key));
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
    for (auto& child : direct_subclasses(out[i]))
      if (seen.insert(child).second) out.push_back(std::move(child));
  }
  return out;
}

void ProjectIndex::add_notebook_cells(const std::string& file, std::vector<std::pair<uint32_t, uint32_t>> cells) {
  notebook_cells_[file] = std::move(cells);
}

std::string ProjectIndex::location(const std::string& file, uint32_t line) const {
  auto it = notebook_cells_.find(file);
  if (it != notebook_cells_.end()) {
    const std::pair<uint32_t, uint32_t>* cell = nullptr;
    for (const auto& c : it->second)
      if (c.second <= line) cell = &c;
    if (cell) return fmt::format("{}:cell {}:{}", file, cell->first, line - cell->second + 1);
  }
  return fmt::format("{}:{}", file, line);
}

}  // namespace torchleak
