// TL010 missing-zero-grad: a loop that calls backward() and an optimizer's
// step() but never a zero_grad() that clears that optimizer's parameters:
// gradients add up across iterations.
#include <fmt/format.h>

#include "cpp/check.h"
#include "checks/cpp/semantics.h"

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
    const Stmt* loop = sem.enclosing_loop(step);
    if (!loop) return;
    // The outermost loop around the step: zero_grad() anywhere in it counts
    // (gradient accumulation clears every k iterations).
    while (const Stmt* outer = sem.enclosing_loop(loop)) loop = outer;
    if (sem.backward_calls(loop).empty()) return;
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
    auto* member = dyn_cast<MemberExpr>(step->getCallee()->IgnoreParenImpCasts());
    std::string optimizer = sem.text(step->getImplicitObjectArgument()) + (member && member->isArrow() ? "->" : ".");
    Finding f;
    f.range = step->getSourceRange();
    f.message = fmt::format(
        "`{}` steps in a loop that calls backward() but never zero_grad(): each iteration's gradients are added "
        "to the previous ones",
        sem.text(step));
    f.help = fmt::format("call `{}zero_grad()` at the start of each iteration (before backward())", optimizer);
    sink.report(result, std::move(f));
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(MissingZeroGrad, "TL010", "missing-zero-grad")

}  // namespace torchleak::cpp
