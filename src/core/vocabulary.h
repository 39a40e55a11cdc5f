// The words both frontends' checks share, so that a rule's Python and C++
// halves say the same thing: whether a value carries autograd history,
// where a tensor lives, whether autograd records at a point, and whether a
// fix is safe. Dependency-free: the clang-tidy module, which carries no core
// library, includes it too (as it does checks/size_format.h).
#pragma once

#include <cstdint>
#include <string_view>

namespace torchleak {

// Whether a value carries autograd history. Unknown never produces a finding.
enum class Provenance : uint8_t { Unknown, Detached, Attached };

// Where a tensor lives.
enum class Device : uint8_t { Unknown, Host, Accelerator };

enum class GradState : uint8_t {
  Enabled,   // autograd records operations
  Disabled,  // no_grad, inference_mode, set_grad_enabled(False), NoGradGuard, a decorator
  Maybe,     // set_grad_enabled(<expression>): depends on a runtime value
};

// Decided per finding, in both languages: a fix is Safe only when it cannot
// change what a correct program computes (docs/fixes.md); `--fix` applies
// only those, `--unsafe-fixes` the others too.
enum class FixSafety : uint8_t { Safe, Unsafe };

// A test of the project rather than a training run: `test_*.py`,
// `*_test.py`, `conftest.py`, `test_*.cpp`, `*_test.cpp` (any C++
// extension), or a file under a `tests/` or `test/` directory. Rules about
// how a run is configured (TL012) stay silent there.
inline bool is_test_file(std::string_view path) {
  size_t slash = path.find_last_of("/\\");
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  std::string_view dir = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
  size_t dot = name.rfind('.');
  std::string_view stem = dot == std::string_view::npos ? name : name.substr(0, dot);
  if (name == "conftest.py" || stem.substr(0, 5) == "test_" ||
      (stem.size() > 5 && stem.substr(stem.size() - 5) == "_test"))
    return true;
  while (!dir.empty()) {
    size_t cut = dir.find_last_of("/\\");
    std::string_view part = cut == std::string_view::npos ? dir : dir.substr(cut + 1);
    if (part == "tests" || part == "test") return true;
    dir = cut == std::string_view::npos ? std::string_view() : dir.substr(0, cut);
  }
  return false;
}

}  // namespace torchleak
