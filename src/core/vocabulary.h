// The words both frontends' checks share, so that a rule's Python and C++
// halves say the same thing: whether a value carries autograd history,
// where a tensor lives, whether autograd records at a point, and whether a
// fix is safe. Dependency-free: the clang-tidy module, which carries no core
// library, includes it too (as it does checks/size_format.h).
#pragma once

#include <cstdint>

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

}  // namespace torchleak
