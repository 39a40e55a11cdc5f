// TL009 empty-cache-in-loop: c10::cuda::CUDACachingAllocator::emptyCache()
// on every iteration of a loop over batches. It frees no live tensor; it
// makes the caching allocator hand its free blocks back to the driver, only
// to ask for them again at the next forward.
//
// A loop is over batches when it iterates a LibTorch data loader
// (torch::data::DataLoaderBase) or steps an optimizer, and no loop nested in
// it does (an epoch loop around the loader loop runs once per epoch). The
// call is silent under a condition between it and that loop (if, switch,
// ?:, && and ||, a catch handler, a lambda), and after a `continue` of the
// loop earlier in its body: both make it periodic.
#include <fmt/format.h>

#include <vector>

#include "cpp/check.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class EmptyCacheInLoop final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(
        callExpr(callee(functionDecl(hasName("::c10::cuda::CUDACachingAllocator::emptyCache"))),
                 unless(isInTemplateInstantiation()))
            .bind("call"),
        callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* call = result.Nodes.getNodeAs<CallExpr>("call");
    if (!call) return;
    Semantics sem(*result.Context, options);
    if (!every_iteration_loop(sem, call)) return;
    Finding f;
    f.range = call->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL009::runs), fmt::arg("call", sem.text(call)),
                            fmt::arg("when", "on every iteration"));
    f.help = "remove it, or make it periodic (`if (step % 1000 == 0)`); a leak is a live reference, not cache";
    sink.report(result, std::move(f));
  }

 private:
  // The innermost loop over batches that runs `call` on each of its
  // iterations, or null.
  static const Stmt* every_iteration_loop(const Semantics& sem, const CallExpr* call) {
    std::vector<const Stmt*> passed;  // the loops between the call and the one examined
    for (const Stmt* loop = sem.enclosing_loop(call); loop; loop = sem.enclosing_loop(loop)) {
      passed.push_back(loop);
      if (conditional_between(sem.context(), call, loop)) return nullptr;
      if (continues_before(sem, call, passed)) return nullptr;
      if (sem.is_batch_loop(loop)) return sem.batch_level(loop) ? loop : nullptr;
    }
    return nullptr;
  }

  // Whether an if, a switch, a conditional operator, a short-circuit
  // operand, a catch handler or a lambda stands between `s` and `loop`.
  static bool conditional_between(ASTContext& ctx, const Stmt* s, const Stmt* loop) {
    DynTypedNodeList parents = ctx.getParents(*s);
    while (!parents.empty()) {
      const Stmt* p = parents[0].get<Stmt>();
      if (!p) {
        parents = ctx.getParents(parents[0]);  // a declaration inside the loop: keep climbing
        continue;
      }
      if (p == loop) return false;
      if (isa<IfStmt>(p) || isa<SwitchStmt>(p) || isa<AbstractConditionalOperator>(p) || isa<CXXCatchStmt>(p) ||
          isa<LambdaExpr>(p))
        return true;
      if (auto* b = dyn_cast<BinaryOperator>(p); b && b->isLogicalOp()) return true;
      parents = ctx.getParents(*p);
    }
    return true;  // not inside `loop` after all
  }

  // Whether a `continue` of one of `loops` comes before `call` in it: the
  // iterations it skips do not reach the call.
  static bool continues_before(const Semantics& sem, const CallExpr* call, const std::vector<const Stmt*>& loops) {
    const Stmt* outer = loops.back();
    for (const auto& node : match(findAll(continueStmt().bind("c")), *outer, sem.context())) {
      auto* c = node.getNodeAs<ContinueStmt>("c");
      if (!c || !sem.before(c->getBeginLoc(), call->getBeginLoc())) continue;
      const Stmt* target = sem.enclosing_loop(c);
      for (const Stmt* l : loops)
        if (l == target) return true;
    }
    return false;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(EmptyCacheInLoop, "TL009", "empty-cache-in-loop")

}  // namespace torchleak::cpp
