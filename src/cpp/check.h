// The interface every C++ (LibTorch) check implements (it lives in src/cpp so
// that the engine never includes checks/), shared by torchleak's
// Clang frontend (src/cpp) and the clang-tidy module (checks/tidy). A check is
// one class in one file, named after its rule:
//
//   class AccumulateUndetached final : public Check { ... };
//   TORCHLEAK_CPP_CHECK(AccumulateUndetached, "TL001", "accumulate-undetached")
//
// `register_matchers` declares the AST matchers the check needs; `run`
// receives each match and hands findings to a Sink, which is torchleak's
// diagnostic list or clang-tidy's diagnostic engine. Nothing here depends on
// torchleak's core but its dependency-free vocabulary (core/vocabulary.h), so
// the clang-tidy module carries only these sources.
#pragma once

#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/Basic/Diagnostic.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/vocabulary.h"

namespace torchleak::cpp {

// The knobs checks read: from torchleak's configuration, or from clang-tidy's
// check options (torchleak-oversized-layer.ThresholdBytes, ...).
struct Options {
  uint64_t oversized_layer_bytes = uint64_t{8} << 30;  // TL011: half of the default 16 GiB device-memory
  std::vector<std::string> extra_models;               // in-house module classes
  std::vector<std::string> extra_losses;               // in-house loss functions
  std::vector<std::string> extra_optimizers;
  std::vector<std::string> extra_data_parallel;
};

struct Finding {
  clang::SourceRange range;  // token range of the code the finding is about
  std::string message;
  std::string help;       // a one-line hint specific to this finding
  std::string fix_title;  // empty when there is no fix
  std::vector<clang::FixItHint> fixes;
  // Decided by the check for this finding: Safe only when the fix cannot
  // change what a correct program computes.
  FixSafety fix_safety = FixSafety::Unsafe;
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void report(const clang::ast_matchers::MatchFinder::MatchResult& result, Finding finding) = 0;
};

class Check {
 public:
  virtual ~Check() = default;
  // Adds this check's matchers to `finder`, each answered through `callback`.
  virtual void register_matchers(clang::ast_matchers::MatchFinder& finder,
                                 clang::ast_matchers::MatchFinder::MatchCallback* callback) const = 0;
  virtual void run(const clang::ast_matchers::MatchFinder::MatchResult& result, const Options& options,
                   Sink& sink) const = 0;
};

struct RegisteredCheck {
  std::string rule_id;  // "TL001"
  std::string name;     // "accumulate-undetached"; clang-tidy's torchleak-accumulate-undetached
  std::unique_ptr<Check> check;
};

// Every C++ check, sorted by rule id.
const std::vector<RegisteredCheck>& registered_checks();
bool register_check(std::string rule_id, std::string name, std::unique_ptr<Check> check);

}  // namespace torchleak::cpp

#define TORCHLEAK_CPP_CHECK(ClassName, RuleId, Name)                                       \
  namespace {                                                                              \
  [[maybe_unused]] const bool registered_##ClassName =                                     \
      ::torchleak::cpp::register_check(RuleId, Name, std::make_unique<ClassName>());       \
  }
