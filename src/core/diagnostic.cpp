#include "core/diagnostic.h"

#include <tuple>

namespace torchleak {

bool diagnostic_less(const Diagnostic& a, const Diagnostic& b) {
  return std::tie(a.path, a.start, a.rule_id, a.message) <
         std::tie(b.path, b.start, b.rule_id, b.message);
}

}  // namespace torchleak
