// TL008 hidden-state-not-detached: a recurrent state (a tensor, or a
// std::tuple / c10::optional of them, such as an LSTM's (h, c)) declared
// before a loop whose iteration calls backward(), passed to a module call and
// bound again from its result on every iteration, and never detached or
// started afresh in the loop: each batch's graph is chained to the previous
// one, so memory and backward time grow with every batch.
//
//   std::tie(output, state) = lstm->forward(x, state);
//   auto r = gru->forward(x, h);  h = std::get<1>(r);
//   h = cell(x, h);
#include <fmt/format.h>

#include <clang/Lex/Lexer.h>

#include <optional>
#include <set>

#include "cpp/check.h"
#include "checks/cpp/fixes.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

constexpr int kMaxDepth = 6;

bool in_namespace(const NamedDecl* d, std::initializer_list<const char*> prefixes) {
  std::string q = d->getQualifiedNameAsString();
  for (const char* p : prefixes)
    if (q.rfind(p, 0) == 0) return true;
  return false;
}

// The template arguments of std::tuple / std::pair / c10::optional, or null.
const ClassTemplateSpecializationDecl* state_container(QualType type) {
  auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(record_of(type));
  if (!spec) return nullptr;
  std::string q = spec->getQualifiedNameAsString();
  if (q == "std::tuple" || q == "std::pair" || q == "c10::optional" || q == "std::optional") return spec;
  return nullptr;
}

// A tensor, or a tuple / pair / optional holding only states.
bool is_state_type(QualType type, int depth = 0) {
  if (depth > kMaxDepth) return false;
  if (is_tensor_type(type)) return true;
  const ClassTemplateSpecializationDecl* spec = state_container(type);
  if (!spec) return false;
  bool any = false;
  for (const TemplateArgument& arg : spec->getTemplateArgs().asArray()) {
    if (arg.getKind() == TemplateArgument::Pack) {
      for (const TemplateArgument& p : arg.pack_elements()) {
        if (p.getKind() != TemplateArgument::Type || !is_state_type(p.getAsType(), depth + 1)) return false;
        any = true;
      }
      continue;
    }
    if (arg.getKind() != TemplateArgument::Type || !is_state_type(arg.getAsType(), depth + 1)) return false;
    any = true;
  }
  return any;
}

// The tensors of a flat std::tuple / std::pair of tensors, or 0.
unsigned flat_tensor_count(QualType type) {
  const ClassTemplateSpecializationDecl* spec = state_container(type);
  if (!spec || spec->getQualifiedNameAsString().find("optional") != std::string::npos) return 0;
  unsigned n = 0;
  for (const TemplateArgument& arg : spec->getTemplateArgs().asArray()) {
    llvm::ArrayRef<TemplateArgument> items = arg.getKind() == TemplateArgument::Pack ? arg.pack_elements()
                                                                                     : llvm::ArrayRef<TemplateArgument>(arg);
    for (const TemplateArgument& a : items) {
      if (a.getKind() != TemplateArgument::Type || !is_tensor_type(a.getAsType())) return 0;
      ++n;
    }
  }
  return n;
}

bool is_std_call(const CallExpr* call, llvm::StringRef name) {
  const FunctionDecl* f = call ? call->getDirectCallee() : nullptr;
  return f && f->isInStdNamespace() && f->getIdentifier() && f->getName() == name;
}

// A function of the program that detaches what it is given (its body calls
// detach), or one the translation unit does not define: assumed to, as a
// repackage_hidden helper in another file usually does.
bool detaching_helper(const CallExpr* e) {
  if (isa<CXXMemberCallExpr>(e) || isa<CXXOperatorCallExpr>(e)) return false;
  const FunctionDecl* f = e->getDirectCallee();
  if (!f || isa<CXXMethodDecl>(f) || in_namespace(f, {"std::", "at::", "torch::", "c10::"})) return false;
  const FunctionDecl* definition = nullptr;
  if (!f->hasBody(definition) || !definition->getBody()) return true;
  auto calls = match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("detach", "detach_")))).bind("d")),
                     *definition->getBody(), definition->getASTContext());
  return !calls.empty();
}

// Whether `e` hands `d`'s history on: it mentions `d` other than through
// `.detach()`, `.detach_()`, `.data()` or a detaching helper.
bool mentions_live(const Stmt* e, const ValueDecl* d) {
  return Semantics::mentions(e, d, [](const Stmt* s) {
    if (auto* m = dyn_cast<CXXMemberCallExpr>(s)) {
      const CXXMethodDecl* method = m->getMethodDecl();
      return method && method->getIdentifier() && is_tensor_type(m->getImplicitObjectArgument()->getType()) &&
             (method->getName() == "detach" || method->getName() == "detach_" || method->getName() == "data");
    }
    auto* call = dyn_cast<CallExpr>(s);
    return call && detaching_helper(call);
  });
}

// A write of the state in the loop: `d = e`, `std::tie(.., d, ..) = e`, or an
// in-place call on it.
struct Write {
  const Stmt* statement;
  const Expr* value;
  bool detaches_in_place = false;
};

class HiddenStateNotDetached final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    auto loop = stmt(anyOf(forStmt(), cxxForRangeStmt(), whileStmt(), doStmt()));
    finder.addMatcher(cxxOperatorCallExpr(hasOverloadedOperatorName("="), hasAncestor(loop)).bind("assign"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* assign = result.Nodes.getNodeAs<CXXOperatorCallExpr>("assign");
    if (!assign || assign->getNumArgs() != 2) return;
    std::vector<const Expr*> targets = assigned(assign->getArg(0));
    if (targets.empty()) return;
    Semantics sem(*result.Context, options);
    const Stmt* loop = training_loop(sem, assign);
    if (!loop || sem.grad_state(assign) == GradState::Disabled) return;
    std::vector<const Expr*> fed;  // the targets that are states fed back
    const Expr* module_call = nullptr;
    for (const Expr* target : targets) {
      const ValueDecl* d = named_decl(target);
      if (!d || !is_state_type(d->getType()) || !sem.outlives_iteration(d, loop)) continue;
      const Expr* call = feedback_call(sem, assign->getArg(1), d, loop, 0);
      if (!call || cached_by_own_forward(sem, assign, d)) continue;
      if (breaks_chain(sem, d, loop)) continue;
      fed.push_back(target);
      module_call = call;
    }
    if (fed.empty()) return;
    report(sem, result, assign, loop, fed, module_call, sink);
  }

 private:
  // The targets of `d = ...` or `std::tie(a, b) = ...`.
  static std::vector<const Expr*> assigned(const Expr* lhs) {
    if (named_decl(lhs)) return {lhs};
    auto* tie = dyn_cast_or_null<CallExpr>(strip(lhs));
    if (!is_std_call(tie, "tie")) return {};
    std::vector<const Expr*> out;
    for (const Expr* arg : tie->arguments())
      if (named_decl(arg)) out.push_back(arg);
    return out;
  }

  // The innermost loop around `s` whose body calls backward().
  static const Stmt* training_loop(const Semantics& sem, const Stmt* s) {
    for (const Stmt* loop = sem.enclosing_loop(s); loop; loop = sem.enclosing_loop(loop))
      if (!sem.backward_calls(loop).empty()) return loop;
    return nullptr;
  }

  // The module call in `loop` that `value` comes from, through std::get,
  // locals of the loop and structured bindings, when its arguments carry `d`
  // undetached; null otherwise.
  static const Expr* feedback_call(const Semantics& sem, const Expr* value, const ValueDecl* d, const Stmt* loop,
                                   int depth) {
    value = strip(value);
    if (!value || depth > kMaxDepth) return nullptr;
    if (sem.is_module_call(value)) {
      auto* call = cast<CallExpr>(value);
      unsigned first = isa<CXXOperatorCallExpr>(call) ? 1 : 0;  // (*model)(x, h): the module is argument 0
      for (unsigned i = first; i < call->getNumArgs(); ++i)
        if (carries(sem, call->getArg(i), d, loop, 0)) return value;
      return nullptr;
    }
    if (auto* call = dyn_cast<CallExpr>(value); call && is_std_call(call, "get") && call->getNumArgs() == 1)
      return feedback_call(sem, call->getArg(0), d, loop, depth + 1);
    if (auto* ref = dyn_cast<DeclRefExpr>(value)) {
      if (auto* binding = dyn_cast<BindingDecl>(ref->getDecl()))
        if (auto* whole = dyn_cast_or_null<VarDecl>(binding->getDecomposedDecl()); whole && whole->getInit())
          return feedback_call(sem, whole->getInit(), d, loop, depth + 1);
      auto* local = dyn_cast<VarDecl>(ref->getDecl());
      if (!local || local == d || !local->isLocalVarDecl() || !sem.within(local, loop)) return nullptr;
      const Expr* found = nullptr;
      for (const Semantics::Definition& def : sem.definitions(local, loop))
        if (def.op == "init" || def.op == "=")
          if (const Expr* c = feedback_call(sem, def.value, d, loop, depth + 1)) found = c;
      return found;
    }
    return nullptr;
  }

  // Whether an argument passes `d` on undetached: directly, or through a
  // local of the loop built from it (`auto hc = std::make_tuple(h, c);`).
  static bool carries(const Semantics& sem, const Expr* arg, const ValueDecl* d, const Stmt* loop, int depth) {
    if (mentions_live(arg, d)) return true;
    if (depth > 2) return false;
    auto* ref = dyn_cast_or_null<DeclRefExpr>(strip(arg));
    auto* local = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
    if (!local || local == d || !local->isLocalVarDecl() || !sem.within(local, loop)) return false;
    for (const Semantics::Definition& def : sem.definitions(local, loop))
      if (carries(sem, def.value, d, loop, depth + 1)) return true;
    return false;
  }

  // A state kept on the module in its own forward: TL003's finding.
  static bool cached_by_own_forward(const Semantics& sem, const Stmt* s, const ValueDecl* d) {
    auto* fn = dyn_cast_or_null<CXXMethodDecl>(sem.enclosing_function(s));
    return isa<FieldDecl>(d) && fn && fn->getIdentifier() && fn->getName() == "forward" &&
           is_module_class(fn->getParent());
  }

  // Every write of `d` in the loop.
  static std::vector<Write> writes(const Semantics& sem, const ValueDecl* d, const Stmt* loop) {
    std::vector<Write> out;
    for (const Semantics::Definition& def : sem.definitions(d, loop))
      out.push_back({def.statement, def.value, def.op == "detach_"});
    for (const auto& node : match(findAll(cxxOperatorCallExpr(hasOverloadedOperatorName("=")).bind("a")), *loop,
                                  sem.context())) {
      auto* a = node.getNodeAs<CXXOperatorCallExpr>("a");
      if (!a || a->getNumArgs() != 2 || named_decl(a->getArg(0))) continue;
      for (const Expr* t : assigned(a->getArg(0)))
        if (named_decl(t) == d) out.push_back({a, a->getArg(1)});
    }
    // std::get<0>(state).detach_(): an element detached in place.
    for (const auto& node :
         match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("detach_")))).bind("m")), *loop, sem.context())) {
      auto* m = node.getNodeAs<CXXMemberCallExpr>("m");
      if (m && Semantics::mentions(m->getImplicitObjectArgument(), d)) out.push_back({m, m, true});
    }
    return out;
  }

  // Whether the loop detaches the state or starts it afresh: a write whose
  // value does not hand the old state's history on.
  static bool breaks_chain(const Semantics& sem, const ValueDecl* d, const Stmt* loop) {
    for (const Write& w : writes(sem, d, loop)) {
      if (w.detaches_in_place) return true;
      if (w.value && !mentions_live(w.value, d) && !feeds_back_through_locals(sem, w.value, d, loop)) return true;
    }
    return false;
  }

  // `h = std::get<1>(r)` with `auto r = gru->forward(x, h)`: not a fresh start.
  static bool feeds_back_through_locals(const Semantics& sem, const Expr* value, const ValueDecl* d,
                                        const Stmt* loop) {
    return feedback_call(sem, value, d, loop, 0) != nullptr;
  }

  static std::string quoted_names(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
      if (i) out += i + 1 == names.size() ? " and " : ", ";
      out += "`" + names[i] + "`";
    }
    return out;
  }

  static void report(const Semantics& sem, const MatchFinder::MatchResult& result, const CXXOperatorCallExpr* assign,
                     const Stmt* loop, const std::vector<const Expr*>& fed, const Expr* module_call, Sink& sink) {
    std::vector<std::string> names;
    for (const Expr* t : fed) names.push_back(named_decl(t)->getNameAsString());
    unsigned line = sem.sources().getExpansionLineNumber(loop->getBeginLoc());
    Finding f;
    f.range = assign->getSourceRange();
    f.message = fmt::format(
        fmt::runtime(names.size() == 1 ? messages::TL008::fed_back : messages::TL008::fed_back_several),
        fmt::arg("states", quoted_names(names)), fmt::arg("call", sem.text(module_call)),
        fmt::arg("where", fmt::format(fmt::runtime(messages::TL008::every_iteration), fmt::arg("line", line))));
    std::string statement = detach_statement(sem, fed);
    f.help = statement.empty()
                 ? fmt::format("detach the state once per iteration, before the forward pass: `{0} = {0}.detach();` "
                               "(for a tuple, detach each tensor with std::get)",
                               names.front())
                 : fmt::format("detach the state once per iteration, before the forward pass: `{}`", statement);
    if (!statement.empty()) {
      f.fixes = insert_at_loop_start(loop, sem.sources(), statement);
      if (!f.fixes.empty()) f.fix_title = fmt::format("Insert `{}` at the top of the loop", statement);
    }
    sink.report(result, std::move(f));
  }

  // `h = h.detach();` for tensors, `s = std::make_tuple(std::get<0>(s).detach(), ...);`
  // for flat tuples of tensors; empty when a state has another shape or may
  // be undefined before the loop (an undefined tensor cannot be detached).
  static std::string detach_statement(const Semantics& sem, const std::vector<const Expr*>& fed) {
    std::string out;
    for (const Expr* target : fed) {
      const ValueDecl* d = named_decl(target);
      auto* v = dyn_cast<VarDecl>(d);
      if (!v || !v->getInit() || !v->isLocalVarDecl()) return {};
      auto* construct = dyn_cast<CXXConstructExpr>(strip(v->getInit()));
      if (construct && construct->getNumArgs() == 0) return {};
      std::string name = sem.text(target);
      if (is_tensor_type(d->getType())) {
        out += fmt::format("{0}{1} = {1}.detach();", out.empty() ? "" : " ", name);
        continue;
      }
      unsigned n = flat_tensor_count(d->getType());
      if (n == 0) return {};
      std::string items;
      for (unsigned i = 0; i < n; ++i) items += fmt::format("{}std::get<{}>({}).detach()", i ? ", " : "", i, name);
      out += fmt::format("{}{} = std::make_tuple({});", out.empty() ? "" : " ", name, items);
    }
    return out;
  }

  // Inserts the statement as the first line of the loop's body. Unsafe:
  // gradients stop flowing into earlier batches, which is the point of
  // truncated BPTT but changes what the model learns.
};

}  // namespace

TORCHLEAK_CPP_CHECK(HiddenStateNotDetached, "TL008", "hidden-state-not-detached")

}  // namespace torchleak::cpp
