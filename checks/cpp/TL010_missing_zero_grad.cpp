// TL010 missing-zero-grad: a loop that calls backward() and an optimizer's
// step() but never a zero_grad() that clears that optimizer's parameters:
// gradients add up across iterations.
#include <fmt/format.h>

#include "cpp/check.h"
#include "checks/cpp/fixes.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class MissingZeroGrad final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("step")))).bind("step"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* step = result.Nodes.getNodeAs<CXXMemberCallExpr>("step");
    if (!step || !is_optimizer_type(step->getImplicitObjectArgument()->getType(), options)) return;
    Semantics sem(*result.Context, options);
    const Stmt* step_loop = sem.enclosing_loop(step);
    if (!step_loop) return;
    const Stmt* loop = step_loop;
    // The outermost loop around the step: zero_grad() anywhere in it counts
    // (gradient accumulation clears every k iterations).
    while (const Stmt* outer = sem.enclosing_loop(loop)) loop = outer;
    std::vector<const CallExpr*> backwards = sem.backward_calls(loop);
    if (backwards.empty()) return;
    // A zero_grad() that clears this optimizer's parameters: its own, or a
    // module's whose parameters it owns (not another model's of a GAN).
    const ValueDecl* optimizer_decl = named_decl(step->getImplicitObjectArgument());
    for (const auto& node : match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("zero_grad")))).bind("z")),
                                  *loop, *result.Context))
      if (auto* z = node.getNodeAs<CXXMemberCallExpr>("z"); z && sem.clears_gradients_of(z, optimizer_decl)) return;
    // Parameters' gradients reset by hand: p.grad().zero_() or .mutable_grad().
    auto by_hand = match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("grad", "mutable_grad")))).bind("g")),
                         *loop, *result.Context);
    if (!by_hand.empty()) return;
    // The finding sits on the backward pass that adds to the gradients, as in
    // Python: the last one before the step, else the first.
    const CallExpr* backward = backwards.front();
    for (const CallExpr* b : backwards)
      if (sem.before(b->getBeginLoc(), step->getBeginLoc())) backward = b;
    // The optimizer as written: `optimizer.`, `optimizer->` (a pointer, or a
    // shared_ptr whose operator-> is the member's base).
    auto* member = dyn_cast<MemberExpr>(step->getCallee()->IgnoreParenImpCasts());
    const Expr* base = member ? member->getBase()->IgnoreParenImpCasts() : step->getImplicitObjectArgument();
    if (auto* arrow = dyn_cast<CXXOperatorCallExpr>(base); arrow && arrow->getOperator() == OO_Arrow)
      base = arrow->getArg(0);
    std::string clear = sem.text(base) + (member && member->isArrow() ? "->" : ".") + "zero_grad()";
    Finding f;
    f.range = backward->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL010::accumulates), fmt::arg("backward", sem.text(backward)),
                            fmt::arg("step", sem.text(step)));
    f.help = fmt::format(fmt::runtime(messages::TL010::help), fmt::arg("clear", clear));
    // Unsafe: a loop that accumulates on purpose over several iterations
    // (clearing elsewhere, by a hook) trains differently once cleared.
    // Into the innermost loop around both the backward pass and the step:
    // the epoch loop around a loop over batches would clear once per epoch.
    const Stmt* fix_loop = step_loop;
    while (fix_loop && !sem.within(backward, fix_loop)) fix_loop = sem.enclosing_loop(fix_loop);
    if (fix_loop) f.fixes = insert_at_loop_start(fix_loop, sem.sources(), clear + ";");
    if (!f.fixes.empty()) f.fix_title = fmt::format("Insert `{};` at the start of the loop body", clear);
    sink.report(result, std::move(f));
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(MissingZeroGrad, "TL010", "missing-zero-grad")

}  // namespace torchleak::cpp
