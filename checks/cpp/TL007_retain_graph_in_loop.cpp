// TL007 retain-graph-in-loop: backward() with retain_graph = true (or
// torch::autograd::backward / grad with retain_graph) inside a loop: every
// iteration's graph, with its saved activations, is kept.
#include <fmt/format.h>

#include "checks/cpp/check.h"
#include "checks/cpp/semantics.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class RetainGraphInLoop final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(callExpr(callee(functionDecl(hasAnyName("backward", "grad")))).bind("call"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* call = result.Nodes.getNodeAs<CallExpr>("call");
    if (!call) return;
    const FunctionDecl* f = call->getDirectCallee();
    if (!f) return;
    // The position of retain_graph in each signature.
    unsigned index = 0;
    std::string q = f->getQualifiedNameAsString();
    if (auto* m = dyn_cast<CXXMemberCallExpr>(call)) {
      if (f->getName() != "backward" || !is_tensor_type(m->getImplicitObjectArgument()->getType())) return;
      index = 1;  // Tensor::backward(gradient, retain_graph, create_graph, inputs)
    } else if (q == "torch::autograd::backward") {
      index = 2;  // backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    } else if (q == "torch::autograd::grad") {
      index = 3;  // grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)
    } else {
      return;
    }
    if (call->getNumArgs() <= index) return;
    const Expr* arg = call->getArg(index);
    if (isa<CXXDefaultArgExpr>(arg->IgnoreImplicit())) return;
    if (!retains(arg, *result.Context)) return;
    Semantics sem(*result.Context, options);
    if (!sem.enclosing_loop(call)) return;
    Finding finding;
    finding.range = call->getSourceRange();
    finding.message = fmt::format(
        "`{}` retains the graph inside a loop: every iteration's graph and saved activations stay alive",
        sem.text(call));
    finding.help = "drop retain_graph (call backward() once per graph), or detach what the next iteration reuses";
    sink.report(result, std::move(finding));
  }

 private:
  // A constant true, through c10::optional<bool>'s constructor.
  static bool retains(const Expr* arg, ASTContext& ctx) {
    const Expr* e = strip(arg);
    for (int depth = 0; depth < 4; ++depth) {
      auto* construct = dyn_cast<CXXConstructExpr>(e);
      if (!construct || construct->getNumArgs() != 1) break;
      e = strip(construct->getArg(0));
    }
    if (e->isValueDependent() || !e->getType()->isBooleanType()) return false;
    bool value = false;
    return e->EvaluateAsBooleanCondition(value, ctx) && value;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(RetainGraphInLoop, "TL007", "retain-graph-in-loop")

}  // namespace torchleak::cpp
