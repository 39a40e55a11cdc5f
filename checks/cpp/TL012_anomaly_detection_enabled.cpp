// TL012 anomaly-detection-enabled: anomaly mode switched on for a training
// run, as in Python: torch::autograd::AnomalyMode::set_enabled(true)
// executed unconditionally, or a torch::autograd::DetectAnomalyGuard whose
// scope holds a loop over batches. Silent under a condition (a debug flag),
// with a non-literal argument, for set_enabled(false), in a function named
// for debugging or testing, and in test files.
#include <fmt/format.h>

#include "core/vocabulary.h"
#include "cpp/check.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class AnomalyDetectionEnabled final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(
        callExpr(callee(functionDecl(hasName("::torch::autograd::AnomalyMode::set_enabled")))).bind("set"), callback);
    finder.addMatcher(
        declStmt(has(varDecl(hasType(cxxRecordDecl(hasName("::torch::autograd::DetectAnomalyGuard")))).bind("guard")))
            .bind("decl"),
        callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    const SourceManager& sm = *result.SourceManager;
    Semantics sem(*result.Context, options);
    if (auto* set = result.Nodes.getNodeAs<CallExpr>("set")) {
      if (set->getNumArgs() < 1 || !literal_true(set->getArg(0))) return;
      if (!applies(sem, sm, set)) return;
      Finding f;
      f.range = set->getSourceRange();
      f.message =
          fmt::format(fmt::runtime(messages::TL012::switched_on), fmt::arg("call", "AnomalyMode::set_enabled(true)"));
      f.help = "enable it only while debugging: `torch::autograd::AnomalyMode::set_enabled(debug)`";
      sink.report(result, std::move(f));
      return;
    }
    auto* decl = result.Nodes.getNodeAs<DeclStmt>("decl");
    auto* guard = result.Nodes.getNodeAs<VarDecl>("guard");
    if (!decl || !guard || !guard->isLocalVarDecl() || !applies(sem, sm, decl)) return;
    // DetectAnomalyGuard(check_nan) turns anomaly mode on whatever check_nan says.
    // The guard's scope: the statements after it in its block.
    auto* block = dyn_cast_or_null<CompoundStmt>(parent_of(*result.Context, decl));
    if (!block || !holds_batch_loop_after(sem, block, decl)) return;
    Finding f;
    f.range = decl->getSourceRange();
    f.message = std::string(messages::TL012::around_loop);
    f.help = "declare the guard only while debugging, around the one step that produces the NaN";
    sink.report(result, std::move(f));
  }

 private:
  static bool literal_true(const Expr* e) {
    auto* b = dyn_cast<CXXBoolLiteralExpr>(e->IgnoreImplicit());
    return b && b->getValue();
  }

  // Not in a test file, not under a condition, not in a function named for
  // debugging or testing.
  static bool applies(const Semantics& sem, const SourceManager& sm, const Stmt* s) {
    if (is_test_file(sm.getFilename(sm.getExpansionLoc(s->getBeginLoc())).str())) return false;
    if (sem.under_condition(s)) return false;
    const FunctionDecl* fn = sem.enclosing_function(s);
    if (fn && fn->getIdentifier()) {
      std::string name = fn->getName().lower();
      if (name.find("debug") != std::string::npos || name.rfind("test", 0) == 0) return false;
    }
    return true;
  }

  static const Stmt* parent_of(ASTContext& ctx, const Stmt* s) {
    auto parents = ctx.getParents(*s);
    return parents.empty() ? nullptr : parents[0].get<Stmt>();
  }

  static bool holds_batch_loop_after(const Semantics& sem, const CompoundStmt* block, const DeclStmt* decl) {
    bool after = false;
    for (const Stmt* s : block->body()) {
      if (s == decl) {
        after = true;
        continue;
      }
      if (!after) continue;
      auto loops = match(findAll(stmt(anyOf(forStmt(), cxxForRangeStmt(), whileStmt(), doStmt())).bind("loop")), *s,
                         sem.context());
      for (const auto& node : loops)
        if (const Stmt* loop = node.getNodeAs<Stmt>("loop"); loop && sem.is_batch_loop(loop)) return true;
    }
    return false;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(AnomalyDetectionEnabled, "TL012", "anomaly-detection-enabled")

}  // namespace torchleak::cpp
