// The registry of C++ checks, filled at static-initialisation time by
// TORCHLEAK_CPP_CHECK in each check's file.
#include <algorithm>

#include "cpp/check.h"

namespace torchleak::cpp {

namespace {
std::vector<RegisteredCheck>& storage() {
  static std::vector<RegisteredCheck> checks;
  return checks;
}
}  // namespace

const std::vector<RegisteredCheck>& registered_checks() { return storage(); }

bool register_check(std::string rule_id, std::string name, std::unique_ptr<Check> check) {
  auto& checks = storage();
  checks.push_back({std::move(rule_id), std::move(name), std::move(check)});
  std::sort(checks.begin(), checks.end(),
            [](const RegisteredCheck& a, const RegisteredCheck& b) { return a.rule_id < b.rule_id; });
  return true;
}

}  // namespace torchleak::cpp
