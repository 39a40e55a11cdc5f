// TL006 eval-without-no-grad: a loop that runs a module after `->eval()` (or
// in a function named like test, evaluate, validate, infer) with autograd
// enabled and no backward() from the loop on (a training loop before it is
// another phase): every forward records a graph that nothing frees until its
// outputs die. A module's own method, or a function returning tensors, is
// not taken for an evaluation by its name: its caller may differentiate what
// it computes (`evaluate_actions` of a policy).
#include <fmt/format.h>

#include <set>

#include "cpp/check.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class EvalWithoutNoGrad final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(functionDecl(isDefinition(), hasBody(compoundStmt())).bind("fn"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* fn = result.Nodes.getNodeAs<FunctionDecl>("fn");
    if (!analyzed_body(fn)) return;
    Semantics sem(*result.Context, options);
    const Stmt* body = fn->getBody();
    std::vector<const CallExpr*> backwards = sem.backward_calls(body);
    auto* method = dyn_cast<CXXMethodDecl>(fn);
    bool named_for_evaluation = evaluation_name(fn) && backwards.empty() &&
                                !(method && is_module_class(method->getParent())) &&
                                !is_tensor_type(fn->getReturnType()) && !holds_tensors(fn->getReturnType());
    std::vector<const CXXMemberCallExpr*> mode_calls;  // eval() and train(), in source order
    for (const auto& node :
         match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("eval", "train")))).bind("m")), *body,
               *result.Context))
      if (auto* m = node.getNodeAs<CXXMemberCallExpr>("m"); m && is_module_value_type(m->getImplicitObjectArgument()->getType(), options))
        mode_calls.push_back(m);
    std::set<const Stmt*> reported;
    for (const auto& node : match(findAll(callExpr().bind("call")), *body, *result.Context)) {
      auto* call = node.getNodeAs<CallExpr>("call");
      if (!call) continue;
      // The module runs here, or in a per-batch helper this call runs
      // (`evaluate_batch(batch, stats)`).
      bool direct = sem.is_module_call(call);
      if (!direct && !sem.runs_module_through(call)) continue;
      const Stmt* loop = outermost_loop(sem, call);
      if (!loop || reported.count(loop)) continue;
      // A backward pass in the loop or after it: the loop's graphs are used.
      bool backpropagated = false;
      for (const CallExpr* b : backwards)
        if (!sem.before(b->getBeginLoc(), loop->getBeginLoc())) backpropagated = true;
      if (backpropagated) continue;
      if (sem.grad_state(call) != GradState::Enabled) continue;
      // The last eval() / train() before the loop sets the mode.
      const CXXMemberCallExpr* mode = nullptr;
      for (const CXXMemberCallExpr* m : mode_calls)
        if (sem.before(m->getBeginLoc(), loop->getBeginLoc())) mode = m;
      bool eval_mode = mode && mode->getMethodDecl()->getName() == "eval";
      if (mode && !eval_mode) continue;
      if (!eval_mode && !named_for_evaluation) continue;
      reported.insert(loop);
      std::string module = direct ? sem.text(sem.called_module(call))
                                  : call->getDirectCallee()->getNameAsString() + "()";
      Finding f;
      f.range = call->getSourceRange();
      std::string reason = eval_mode ? fmt::format("after `{}`", sem.text(mode))
                                     : fmt::format("in `{}`", fn->getQualifiedNameAsString());
      f.message = fmt::format(fmt::runtime(messages::TL006::evaluates), fmt::arg("module", module),
                              fmt::arg("reason", reason));
      f.help = "declare `torch::NoGradGuard no_grad;` (or `c10::InferenceMode guard;`) before the loop";
      sink.report(result, std::move(f));
    }
  }

 private:
  static bool evaluation_name(const FunctionDecl* fn) {
    if (!fn->getIdentifier()) return false;
    std::string name = fn->getName().lower();
    for (const char* word : {"test", "eval", "valid", "infer"})
      if (name.find(word) != std::string::npos) return true;
    return false;
  }

  static const Stmt* outermost_loop(const Semantics& sem, const Stmt* s) {
    const Stmt* loop = sem.enclosing_loop(s);
    while (loop)
      if (const Stmt* outer = sem.enclosing_loop(loop)) loop = outer;
      else break;
    return loop;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(EvalWithoutNoGrad, "TL006", "eval-without-no-grad")

}  // namespace torchleak::cpp
