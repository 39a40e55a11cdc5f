// TL007 retain-graph-in-loop: backward() with retain_graph = true (or
// torch::autograd::backward / grad with retain_graph) inside a step loop (one
// over a data loader, or one that steps an optimizer: Semantics::is_batch_loop):
// every step's graph, with its saved activations, is kept. Silent in loops
// over heads or losses within a step, and when a later
// backward() in the same loop runs without retain_graph: the pattern
// retain_graph exists for (several passes through one graph, the last one
// releasing it).
#include <fmt/format.h>

#include "cpp/check.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

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
    if (!call || retain_argument(call) < 0 || !retains_graph(call, *result.Context)) return;
    Semantics sem(*result.Context, options);
    // The innermost loop must be a step loop, as in Python: a loop over
    // heads or losses inside one step is how several passes share a graph.
    const Stmt* loop = sem.enclosing_loop(call);
    if (!loop || !sem.is_batch_loop(loop)) return;
    for (const CallExpr* later : sem.backward_calls(loop))
      if (later != call && sem.before(call->getBeginLoc(), later->getBeginLoc()) && retain_argument(later) >= 0 &&
          !retains_graph(later, *result.Context))
        return;  // a later pass in the iteration releases the graph
    Finding finding;
    finding.range = call->getSourceRange();
    finding.message = fmt::format(fmt::runtime(messages::TL007::retained), fmt::arg("call", sem.text(call)));
    finding.help = "drop retain_graph (call backward() once per graph), or detach what the next iteration reuses";
    sink.report(result, std::move(finding));
  }

 private:
  // The position of retain_graph in the signature `call` calls, or -1 when it
  // is not a backward pass.
  static int retain_argument(const CallExpr* call) {
    const FunctionDecl* f = call->getDirectCallee();
    if (!f) return -1;
    if (auto* m = dyn_cast<CXXMemberCallExpr>(call)) {
      if (f->getName() != "backward" || !is_tensor_type(m->getImplicitObjectArgument()->getType())) return -1;
      return 1;  // Tensor::backward(gradient, retain_graph, create_graph, inputs)
    }
    std::string q = f->getQualifiedNameAsString();
    if (q == "torch::autograd::backward") return 2;  // backward(tensors, grad_tensors, retain_graph, ...)
    if (q == "torch::autograd::grad") return 3;      // grad(outputs, inputs, grad_outputs, retain_graph, ...)
    return -1;
  }

  // Whether the call passes retain_graph = true (not the default).
  static bool retains_graph(const CallExpr* call, ASTContext& ctx) {
    int index = retain_argument(call);
    if (index < 0 || call->getNumArgs() <= static_cast<unsigned>(index)) return false;
    const Expr* arg = call->getArg(static_cast<unsigned>(index));
    if (isa<CXXDefaultArgExpr>(arg->IgnoreImplicit())) return false;
    return retains(arg, ctx);
  }

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
