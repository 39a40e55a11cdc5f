// TL001 accumulate-undetached: `total += loss` (or `total = total + loss`,
// `total.add_(loss)`) inside a loop, on an at::Tensor that outlives the
// iteration, where `loss` carries autograd history.
#include <fmt/format.h>

#include "cpp/check.h"
#include "checks/cpp/fixes.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class AccumulateUndetached final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(cxxOperatorCallExpr(hasAnyOverloadedOperatorName("+=", "-=", "=")).bind("op"), callback);
    finder.addMatcher(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("add_", "sub_")))).bind("method"),
                      callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    Semantics sem(*result.Context, options);
    const Expr* statement = nullptr;
    const Expr* target = nullptr;
    const Expr* added = nullptr;
    if (auto* op = result.Nodes.getNodeAs<CXXOperatorCallExpr>("op")) {
      if (op->getNumArgs() != 2) return;
      statement = op;
      target = op->getArg(0);
      added = accumulated_value(op);
    } else if (auto* call = result.Nodes.getNodeAs<CXXMemberCallExpr>("method")) {
      if (call->getNumArgs() < 1) return;
      statement = call;
      target = call->getImplicitObjectArgument();
      added = call->getArg(0);
    }
    if (!statement || !added || !is_tensor_type(target->getType())) return;
    const ValueDecl* acc = named_decl(target);
    if (!acc) return;
    // As in Python: the total must survive a step over data, the iteration
    // of a loop over batches (one that iterates a data loader or steps an
    // optimizer) around the statement. A loop over a module's blocks in
    // `forward` (`x = x + block->forward(x)`), over time steps or over the
    // parts of one loss is no such loop.
    const Stmt* loop = sem.enclosing_loop(statement);
    const Stmt* data_loop = nullptr;
    for (const Stmt* l = loop; l && !data_loop; l = sem.enclosing_loop(l))
      if (sem.is_batch_loop(l) && sem.outlives_iteration(acc, l)) data_loop = l;
    if (!data_loop) return;
    if (sem.grad_state(statement) != GradState::Enabled) return;
    if (sem.provenance(added) != Provenance::Attached) return;
    if (reset_in_loop(sem, acc, data_loop, statement)) return;
    if (sem.feeds_backward(acc, sem.enclosing_body(statement))) return;

    std::string name = sem.text(target), value = sem.text(added);
    Finding f;
    f.range = statement->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL001::accumulates), fmt::arg("total", name), fmt::arg("value", value));
    std::string detached = is_primary(added) ? value + ".detach()" : "(" + value + ").detach()";
    f.help = fmt::format("accumulate `{}` instead (or a `double` with `.item<double>()`)", detached);
    f.fixes = append_call_fixes(added, *result.Context, ".detach()");
    if (!f.fixes.empty()) f.fix_title = "Use `.detach()` on the accumulated value";
    // As in Python: safe when the total is a local of this function that no
    // backward() reads (feeds_backward above), so only this function sees the
    // history the fix drops. A field, a global, a static, or a reference or
    // pointer parameter is shared state read elsewhere: unsafe there.
    f.fix_safety = private_total(acc) ? FixSafety::Safe : FixSafety::Unsafe;
    sink.report(result, std::move(f));
  }

 private:
  // The value added by `total += v`, `total = total + v` or `total = v + total`.
  static const Expr* accumulated_value(const CXXOperatorCallExpr* op) {
    OverloadedOperatorKind kind = op->getOperator();
    if (kind == OO_PlusEqual || kind == OO_MinusEqual) return op->getArg(1);
    const ValueDecl* acc = named_decl(op->getArg(0));
    auto* sum = dyn_cast_or_null<CXXOperatorCallExpr>(strip(op->getArg(1)));
    if (!acc || !sum || sum->getNumArgs() != 2) return nullptr;
    if (sum->getOperator() != OO_Plus && sum->getOperator() != OO_Minus) return nullptr;
    if (named_decl(sum->getArg(0)) == acc) return sum->getArg(1);
    if (sum->getOperator() == OO_Plus && named_decl(sum->getArg(1)) == acc) return sum->getArg(0);
    return nullptr;
  }

  static bool private_total(const ValueDecl* acc) {
    auto* v = dyn_cast<VarDecl>(acc);
    if (!v || !v->isLocalVarDecl() || v->isStaticLocal()) return false;
    return !v->getType()->isReferenceType() && !v->getType()->isPointerType();
  }

  // `total = torch::zeros({})`, `total.zero_()` or `total.detach_()` in the
  // loop: each iteration starts afresh.
  static bool reset_in_loop(const Semantics& sem, const ValueDecl* acc, const Stmt* loop, const Expr* statement) {
    for (const auto& def : sem.definitions(acc, loop)) {
      if (def.statement == statement) continue;
      if (def.op == "zero_" || def.op == "detach_") return true;
      if ((def.op == "=" || def.op == "init") && !Semantics::mentions(def.value, acc)) return true;
    }
    return false;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(AccumulateUndetached, "TL001", "accumulate-undetached")

}  // namespace torchleak::cpp
