// Integer and boolean constants folded from the source: what a layer's size
// or a flag evaluates to before the program runs. Literals, + - * // ** and
// parentheses, `int(...)`, names bound once at module level or once in the
// enclosing function, default values of the enclosing function's
// parameters, and module-level constants of the project's other files,
// imported by name. Anything else does not fold.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/model.h"

namespace torchleak::python {

class Folder {
 public:
  // Folds expressions of `function` (-1: module level) of `m`.
  Folder(const Model& m, int function) : m_(m), function_(function) {}

  // Names given a value for this fold (a loop's target, one element at a time).
  void give(std::string name, int64_t value) { given_.emplace_back(std::move(name), value); }

  std::optional<int64_t> integer(TSNode n, int depth = 0) const;
  std::optional<bool> boolean(TSNode n, int depth = 0) const;
  // The integers of a list or tuple display, or of a name bound once to one
  // (up to 4096 elements); nullopt when one element does not fold.
  std::optional<std::vector<int64_t>> integers(TSNode n, int depth = 0) const;

 private:
  std::optional<int64_t> binary(TSNode n, int depth) const;
  std::optional<int64_t> name(TSNode n, int depth) const;
  // The value a name holds at `n`, and the model and function that hold it.
  struct Bound {
    const Model* model = nullptr;
    int function = -1;
    TSNode value{};
  };
  Bound bound_value(TSNode n) const;
  bool is_declared_global(std::string_view id) const;
  TSNode parameter_default(const Function& f, std::string_view id) const;

  const Model& m_;
  int function_;
  std::vector<std::pair<std::string, int64_t>> given_;
};

}  // namespace torchleak::python
