// Facts that cross files, collected in the first phase and read when the
// deferred findings are resolved. A fact is plain data; each check decides
// which kinds it records and reads, so adding a rule touches nothing here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace torchleak {

struct Fact {
  std::string kind;  // "class", "dataparallel-wrap", ...
  std::string key;   // usually a simple class or function name
  std::string file;
  uint32_t line = 0;
  std::vector<std::string> values;
};

class ProjectIndex {
 public:
  void add(Fact fact);
  void add_all(std::vector<Fact> facts);

  // Every fact of `kind` recorded under `key`, in a deterministic order.
  std::vector<const Fact*> find(std::string_view kind, std::string_view key) const;

  // Whether the class named `class_name` (simple name) derives, through the
  // "class" facts of any analyzed file, from one of `roots` (qualified names
  // such as "torch.nn.Module"). Bases that are not roots are followed by
  // their last dotted component.
  bool derives_from(std::string_view class_name, const std::vector<std::string>& roots) const;
  // The same, with the roots given by a predicate over qualified base names
  // (a family of roots: every torch.nn class, the config's in-house models).
  bool derives_from(std::string_view class_name, const std::function<bool(std::string_view)>& is_root) const;

  // Simple names of every class deriving from `class_name`, itself included:
  // breadth first, each level's new names in alphabetical order.
  std::vector<std::string> subclasses_of(std::string_view class_name) const;

  // Where line `line` of `file` is, for a message: "train.py:12", or in a
  // notebook "train.ipynb:cell 3:4" (facts carry the line of the program its
  // code cells make; the engine registers each notebook's cells).
  std::string location(const std::string& file, uint32_t line) const;
  // A notebook's cells: for each code cell, its number and its first line in
  // the program, in order.
  void add_notebook_cells(const std::string& file, std::vector<std::pair<uint32_t, uint32_t>> cells);

  // Sorts facts so lookups are deterministic, and indexes the "class" facts
  // by base so that subclasses_of costs the size of its answer.
  void finalize();

 private:
  // Classes whose bases name `base` (by last component), without duplicates.
  std::vector<std::string> direct_subclasses(std::string_view base) const;

  // Facts by "kind\0key": one hash lookup per query, and no ordered tree of
  // string pairs to build and tear down for tens of thousands of facts.
  static std::string slot(std::string_view kind, std::string_view key);
  std::unordered_map<std::string, std::vector<Fact>> facts_;
  std::map<std::string, std::vector<std::string>, std::less<>> children_;  // built by finalize()
  bool finalized_ = false;
  std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>, std::less<>> notebook_cells_;
};

// Last component of a dotted name: "torch.nn.Module" -> "Module".
std::string_view last_component(std::string_view dotted);

}  // namespace torchleak
