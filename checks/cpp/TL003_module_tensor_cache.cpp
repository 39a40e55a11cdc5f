// TL003 module-tensor-cache: in `forward` of a class deriving from
// torch::nn::Module, a member tensor assigned (or accumulated, updated in
// place, appended to a member container) from the input or from a
// computation that carries autograd history, without `.detach()`.
#include <fmt/format.h>

#include "cpp/check.h"
#include "checks/cpp/fixes.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

enum class StoreKind { Assign, Accumulate, InPlace, Container };

class ModuleTensorCache final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    auto in_forward = hasAncestor(
        cxxMethodDecl(hasName("forward"), ofClass(cxxRecordDecl(isDerivedFrom("::torch::nn::Module")))));
    finder.addMatcher(cxxOperatorCallExpr(isAssignmentOperator(), in_forward).bind("assign"), callback);
    finder.addMatcher(cxxMemberCallExpr(in_forward).bind("call"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    Semantics sem(*result.Context, options);
    const Expr* at = nullptr;
    const Expr* member = nullptr;
    const Expr* value = nullptr;
    StoreKind kind = StoreKind::Assign;
    if (auto* op = result.Nodes.getNodeAs<CXXOperatorCallExpr>("assign")) {
      if (op->getNumArgs() != 2) return;
      at = op;
      member = op->getArg(0);
      value = op->getArg(1);
      kind = op->getOperator() == OO_Equal ? StoreKind::Assign : StoreKind::Accumulate;
      // A tensor, or a tuple of them (an LSTM's (h, c) kept on the module).
      if (!is_tensor_type(member->getType()) && !(kind == StoreKind::Assign && holds_tensors(member->getType())))
        return;
    } else if (auto* call = result.Nodes.getNodeAs<CXXMemberCallExpr>("call")) {
      const CXXMethodDecl* method = call->getMethodDecl();
      if (!method || !method->getIdentifier() || call->getNumArgs() < 1) return;
      llvm::StringRef name = method->getName();
      at = call;
      member = in_place_root(call->getImplicitObjectArgument());
      if (is_tensor_type(member->getType()) && name.endswith("_") && name != "detach_" && name != "zero_") {
        kind = StoreKind::InPlace;
      } else if (!is_tensor_type(member->getType()) &&
                 (name == "push_back" || name == "emplace_back" || name == "insert" || name == "push_front" ||
                  name == "emplace_front")) {
        kind = StoreKind::Container;
      } else {
        return;
      }
      for (const Expr* arg : call->arguments())
        if (is_tensor_type(strip(arg)->getType())) {
          value = arg;
          break;
        }
    }
    if (!at || !value) return;
    auto* field = dyn_cast_or_null<FieldDecl>(named_decl(member));
    if (!field || meant_for_backward(field->getName())) return;
    const FunctionDecl* fn = sem.enclosing_function(at);
    auto* forward = dyn_cast_or_null<CXXMethodDecl>(fn);
    if (!forward || !forward->getIdentifier() || forward->getName() != "forward" ||
        !is_module_class(forward->getParent()))
      return;
    if (sem.grad_state(at) != GradState::Enabled) return;
    if (!carries_history(sem, value, forward)) return;
    report(sem, result, at, member, value, kind, sink);
  }

 private:
  // `buf.mul_(m).add_(x)`: the tensor an in-place chain updates.
  static const Expr* in_place_root(const Expr* e) {
    for (int depth = 0; depth < 8; ++depth) {
      auto* call = dyn_cast_or_null<CXXMemberCallExpr>(strip(e));
      const CXXMethodDecl* m = call ? call->getMethodDecl() : nullptr;
      if (!m || !m->getIdentifier() || !m->getName().endswith("_") ||
          !is_tensor_type(call->getImplicitObjectArgument()->getType()))
        return e;
      e = call->getImplicitObjectArgument();
    }
    return e;
  }

  // Losses and penalties are kept on the module to be backpropagated.
  static bool meant_for_backward(llvm::StringRef name) {
    std::string lower = name.lower();
    return lower.find("loss") != std::string::npos || lower.find("penalty") != std::string::npos ||
           lower.find("kl") != std::string::npos;
  }

  // Attached, or computed from a tensor parameter of forward (the input, which
  // carries the graph of the layers before this one) and not detached.
  static bool carries_history(const Semantics& sem, const Expr* value, const CXXMethodDecl* forward) {
    Provenance p = sem.provenance(value);
    if (p == Provenance::Attached) return true;
    if (p == Provenance::Detached) return false;
    for (const ParmVarDecl* param : forward->parameters()) {
      if (!is_tensor_type(param->getType())) continue;
      if (Semantics::mentions(value, param) || mentions_through_locals(sem, value, param, 0)) return true;
    }
    return false;
  }

  // `auto h = x * 2; cache_ = h;`: a local computed from the parameter.
  static bool mentions_through_locals(const Semantics& sem, const Expr* value, const ParmVarDecl* param, int depth) {
    if (depth > 4) return false;
    auto* ref = dyn_cast_or_null<DeclRefExpr>(strip(value));
    auto* local = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
    if (!local || isa<ParmVarDecl>(local)) return false;
    for (const auto& def : sem.definitions(local, sem.enclosing_body(ref))) {
      if (def.op == "detach_") return false;
      if (Semantics::mentions(def.value, param) || mentions_through_locals(sem, def.value, param, depth + 1))
        return true;
    }
    return false;
  }

  static void report(const Semantics& sem, const MatchFinder::MatchResult& result, const Expr* at,
                     const Expr* member, const Expr* value, StoreKind kind, Sink& sink) {
    std::string attr = sem.text(member), text = sem.text(value);
    Finding f;
    f.range = at->getSourceRange();
    std::string_view tmpl = kind == StoreKind::Container    ? messages::TL003::container
                            : kind == StoreKind::InPlace    ? messages::TL003::in_place
                            : kind == StoreKind::Accumulate ? messages::TL003::accumulates
                                                            : messages::TL003::assigned;
    f.message = fmt::format(fmt::runtime(tmpl), fmt::arg("member", attr), fmt::arg("value", text),
                            fmt::arg("where", ""));
    if (!is_tensor_type(strip(value)->getType())) {
      // A tuple of tensors: each part is detached on its own.
      f.help = fmt::format("store `{}` with each tensor detached (`.detach()`), or compute it under "
                           "`torch::NoGradGuard`",
                           text);
      sink.report(result, std::move(f));
      return;
    }
    f.help = fmt::format("store `{}` detached (`.detach()`), or compute it under `torch::NoGradGuard`", text);
    f.fixes = append_call_fixes(value, *result.Context, ".detach()");
    if (!f.fixes.empty()) f.fix_title = "Detach the value stored on the module";
    sink.report(result, std::move(f));
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(ModuleTensorCache, "TL003", "module-tensor-cache")

}  // namespace torchleak::cpp
