// TL002 append-undetached: `losses.push_back(loss)` (emplace_back, insert)
// into a container that outlives the loop iteration, or `acc =
// torch::cat({acc, out})`, or a write into a tensor that outlives the loop
// (`history[step] = loss`, `history.narrow(0, i, n).copy_(out)`,
// `history.index_put_({i}, loss)`, `index_copy_`), where the value carries
// autograd history. A write into a preallocated tensor chains every
// iteration's graph to the buffer's history, as a growing list keeps them.
#include <fmt/format.h>

#include <set>
#include <string>

#include "cpp/check.h"
#include "checks/cpp/fixes.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class AppendUndetached final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("push_back", "emplace_back", "insert",
                                                                        "push_front", "emplace_front", "emplace"))))
                          .bind("append"),
                      callback);
    finder.addMatcher(cxxOperatorCallExpr(hasOverloadedOperatorName("=")).bind("assign"), callback);
    finder.addMatcher(
        cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("copy_", "index_put_", "index_copy_")))).bind("write"),
        callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    Semantics sem(*result.Context, options);
    if (auto* call = result.Nodes.getNodeAs<CXXMemberCallExpr>("append")) return appended(sem, result, call, sink);
    if (auto* op = result.Nodes.getNodeAs<CXXOperatorCallExpr>("assign")) {
      if (op->getNumArgs() == 2 && view_base(op->getArg(0)) != strip(op->getArg(0)))
        return written(sem, result, op, op->getArg(0), op->getArg(1), sink);  // `history[step] = loss`
      return concatenated(sem, result, op, sink);
    }
    if (auto* call = result.Nodes.getNodeAs<CXXMemberCallExpr>("write")) {
      // copy_(src), index_put_(indices, values), index_copy_(dim, index, source)
      std::string method = call->getMethodDecl()->getIdentifier() ? call->getMethodDecl()->getName().str() : "";
      unsigned position = method == "copy_" ? 0 : method == "index_put_" ? 1 : 2;
      if (call->getNumArgs() <= position) return;
      return written(sem, result, call, call->getImplicitObjectArgument(), call->getArg(position), sink);
    }
  }

 private:
  static void appended(const Semantics& sem, const MatchFinder::MatchResult& result, const CXXMemberCallExpr* call,
                       Sink& sink) {
    const Expr* object = call->getImplicitObjectArgument();
    if (!object || is_tensor_type(object->getType())) return;
    const ValueDecl* container = named_decl(object);
    if (!container || !record_of(container->getType())) return;
    // The value stored: the tensor argument that carries history.
    const Expr* value = nullptr;
    for (const Expr* arg : call->arguments()) {
      const Expr* a = strip(arg);
      if (!is_tensor_type(a->getType())) continue;
      if (sem.provenance(a) == Provenance::Attached) {
        value = arg;
        break;
      }
    }
    if (!value || !kept_across_iterations(sem, container, call)) return;
    std::string name = sem.text(object), text = sem.text(value);
    Finding f;
    f.range = call->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL002::stores), fmt::arg("container", name), fmt::arg("value", text));
    finish(f, value, text, result);
    sink.report(result, std::move(f));
  }

  static void concatenated(const Semantics& sem, const MatchFinder::MatchResult& result,
                           const CXXOperatorCallExpr* op, Sink& sink) {
    if (op->getNumArgs() != 2 || !is_tensor_type(op->getArg(0)->getType())) return;
    const ValueDecl* acc = named_decl(op->getArg(0));
    auto* cat = dyn_cast_or_null<CallExpr>(strip(op->getArg(1)));
    if (!acc || !cat || !cat->getDirectCallee() || cat->getNumArgs() < 1) return;
    std::string callee = cat->getDirectCallee()->getQualifiedNameAsString();
    if (callee != "at::cat" && callee != "at::concat" && callee != "at::concatenate" && callee != "at::stack" &&
        callee != "at::vstack" && callee != "at::hstack" && callee != "at::row_stack")
      return;
    // The list must hold the accumulator and a value with history.
    std::vector<const Expr*> items;
    collect_items(cat->getArg(0), items);
    bool has_acc = false;
    const Expr* value = nullptr;
    for (const Expr* item : items) {
      if (named_decl(item) == acc) has_acc = true;
      else if (!value && sem.provenance(item) == Provenance::Attached) value = item;
    }
    if (!has_acc || !value || !kept_across_iterations(sem, acc, op)) return;
    std::string name = sem.text(op->getArg(0)), text = sem.text(value);
    Finding f;
    f.range = op->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL002::stores), fmt::arg("container", name), fmt::arg("value", text));
    finish(f, value, text, result);
    sink.report(result, std::move(f));
  }

  // The tensor a view of which `e` is: `history` in `history[i]`,
  // `history.narrow(0, i, n)`, `history.select(0, i).view({-1})`; `e` itself
  // (stripped) when it is no view.
  static const Expr* view_base(const Expr* e) {
    e = strip(e);
    for (int depth = 0; e && depth < 8; ++depth) {
      if (auto* op = dyn_cast<CXXOperatorCallExpr>(e); op && op->getOperator() == OO_Subscript && op->getNumArgs() == 2 &&
                                                      is_tensor_type(op->getArg(0)->getType())) {
        e = strip(op->getArg(0));
        continue;
      }
      auto* call = dyn_cast<CXXMemberCallExpr>(e);
      const CXXMethodDecl* method = call ? call->getMethodDecl() : nullptr;
      if (!method || !method->getIdentifier() || !call->getImplicitObjectArgument() ||
          !is_tensor_type(call->getImplicitObjectArgument()->getType()))
        break;
      static const std::set<std::string> kViews = {"narrow", "select", "slice", "index", "view", "squeeze",
                                                   "unsqueeze", "t", "transpose", "diagonal", "expand", "as_strided"};
      if (!kViews.count(method->getName().str())) break;
      e = strip(call->getImplicitObjectArgument());
    }
    return e;
  }

  // `target` (a tensor, or a view of one) receives `value`'s elements in
  // place: a tensor of the enclosing scope that the loop keeps writing into.
  static void written(const Semantics& sem, const MatchFinder::MatchResult& result, const Expr* at,
                      const Expr* target, const Expr* value, Sink& sink) {
    if (!target || !value || !is_tensor_type(target->getType()) || !is_tensor_type(strip(value)->getType())) return;
    const Expr* base = view_base(target);
    const ValueDecl* buffer = named_decl(base);
    if (!buffer || !is_tensor_type(buffer->getType())) return;
    if (sem.provenance(value) != Provenance::Attached) return;
    if (!kept_across_iterations(sem, buffer, at)) return;
    std::string name = sem.text(base), text = sem.text(value);
    Finding f;
    f.range = at->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL002::stores), fmt::arg("container", name), fmt::arg("value", text));
    finish(f, value, text, result);
    sink.report(result, std::move(f));
  }

  static void collect_items(const Expr* e, std::vector<const Expr*>& out, int depth = 0) {
    if (!e || depth > 6) return;
    const Expr* s = strip(e);
    if (is_tensor_type(s->getType())) {
      out.push_back(s);
      return;
    }
    for (const Stmt* child : s->children())
      if (auto* ce = dyn_cast_or_null<Expr>(child)) collect_items(ce, out, depth + 1);
  }

  // In a loop over data (one over batches, or one that runs the same module
  // every iteration; not a loop over the tables or heads of one forward)
  // whose iterations the container outlives, with autograd on, never
  // emptied in that loop and never backpropagated through.
  static bool kept_across_iterations(const Semantics& sem, const ValueDecl* container, const Expr* at) {
    const Stmt* loop = nullptr;
    for (const Stmt* l = sem.enclosing_loop(at); l && !loop; l = sem.enclosing_loop(l))
      if (sem.outlives_iteration(container, l) && sem.is_data_loop(l)) loop = l;
    if (!loop) return false;
    if (sem.grad_state(at) != GradState::Enabled) return false;
    if (sem.emptied_in(container, loop, at)) return false;
    return !sem.feeds_backward(container, sem.enclosing_body(at));
  }

  static void finish(Finding& f, const Expr* value, const std::string& text,
                     const MatchFinder::MatchResult& result) {
    std::string detached = is_primary(value) ? text + ".detach()" : "(" + text + ").detach()";
    f.help = fmt::format("store `{}` instead (or a number with `.item<double>()`)", detached);
    f.fixes = append_call_fixes(value, *result.Context, ".detach()");
    if (!f.fixes.empty()) f.fix_title = "Use `.detach()` on the stored value";
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(AppendUndetached, "TL002", "append-undetached")

}  // namespace torchleak::cpp
