// The interface every Python check implements, and its registration.
// A check is one class in one file, named after its rule:
//
//   class AccumulateUndetached final : public Check { ... };
//   TORCHLEAK_PYTHON_CHECK(AccumulateUndetached, "TL001")
//
// `collect` records facts other files need (first phase); `check` reports
// findings, deferring the ones that depend on the project index.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis.h"
#include "core/catalogue.h"
#include "python/model.h"

namespace torchleak::python {

class CheckContext {
 public:
  CheckContext(const Model& model, const RuleInfo& rule, const SourceFile& file, FileResult& out)
      : model_(model), rule_(rule), file_(file), out_(out) {}

  const Model& model() const { return model_; }
  const RuleInfo& rule() const { return rule_; }
  const Config& config() const { return model_.config(); }
  const std::string& path() const { return file_.path; }

  // A diagnostic of this rule spanning `node`, with the enclosing function
  // as its context. Fill in `help` and `fix` before reporting it.
  Diagnostic diagnostic(TSNode node, std::string message) const;
  void report(Diagnostic d);
  // Reported only if `resolve` returns true once every file's facts are in.
  void defer(Diagnostic d, std::function<bool(const ProjectIndex&, Diagnostic&)> resolve);
  void fact(std::string kind, std::string key, TSNode where, std::vector<std::string> values);

 private:
  const Model& model_;
  const RuleInfo& rule_;
  const SourceFile& file_;
  FileResult& out_;
};

class Check {
 public:
  virtual ~Check() = default;
  virtual void collect(CheckContext&) const {}
  virtual void check(CheckContext& ctx) const = 0;
};

struct RegisteredCheck {
  std::string rule_id;
  std::unique_ptr<Check> check;
};

const std::vector<RegisteredCheck>& registered_checks();
bool register_check(std::string rule_id, std::unique_ptr<Check> check);

// Shared helpers for fixes.
// An edit that appends `suffix` to `expr`, parenthesizing it when needed:
// `loss` -> `loss.item()`, `a + b` -> `(a + b).item()`.
std::vector<Edit> append_call_edits(const Model& model, TSNode expr, std::string_view suffix);

}  // namespace torchleak::python

#define TORCHLEAK_PYTHON_CHECK(ClassName, RuleId)                                    \
  namespace {                                                                        \
  [[maybe_unused]] const bool registered_##ClassName =                               \
      ::torchleak::python::register_check(RuleId, std::make_unique<ClassName>());    \
  }
