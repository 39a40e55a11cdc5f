#include "checks/cpp/semantics.h"

#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Lex/Lexer.h>

#include <algorithm>
#include <optional>
#include <set>

namespace torchleak::cpp {

using namespace clang;

namespace {

constexpr int kMaxDepth = 8;

// Defined with the provenance below: Attached wins, then Unknown.
Provenance merge(Provenance a, Provenance b);

// The index of the argument `call` passes for `fn`'s first parameter: 1 when
// argument 0 is the object (a member operator, a lambda's or a
// std::function's operator()), else 0.
unsigned first_argument(const CallExpr* call, const FunctionDecl* fn) {
  auto* op = dyn_cast<CXXOperatorCallExpr>(call);
  return op && (isa<CXXMethodDecl>(fn) || op->getOperator() == OO_Call) ? 1 : 0;
}

// The matches of `matcher` in the declarations written in the main file
// (not in the headers it includes).
template <typename Matcher>
std::vector<clang::ast_matchers::BoundNodes> match_in_main_file(const Matcher& matcher, ASTContext& ctx) {
  std::vector<clang::ast_matchers::BoundNodes> out;
  const SourceManager& sm = ctx.getSourceManager();
  for (Decl* d : ctx.getTranslationUnitDecl()->decls()) {
    if (!sm.isWrittenInMainFile(sm.getExpansionLoc(d->getBeginLoc()))) continue;
    auto found = clang::ast_matchers::match(clang::ast_matchers::decl(clang::ast_matchers::forEachDescendant(matcher)),
                                            *d, ctx);
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}


bool name_listed(const CXXRecordDecl* r, const std::vector<std::string>& names) {
  if (!r || names.empty()) return false;
  std::string qualified = r->getQualifiedNameAsString();
  std::string plain = r->getNameAsString();
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n == qualified || n == plain; });
}

bool in_torch_namespace(const NamedDecl* d) {
  if (!d) return false;
  std::string q = d->getQualifiedNameAsString();
  return q.rfind("at::", 0) == 0 || q.rfind("torch::", 0) == 0 || q.rfind("c10::", 0) == 0;
}

bool is_loss_name(llvm::StringRef name) {
  static const char* const kLosses[] = {"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                                        "kl_div", "ctc_loss", "nll_loss", "nll_loss2d", "nll_loss_nd"};
  if (name.endswith("_loss")) return true;
  return std::any_of(std::begin(kLosses), std::end(kLosses), [&](const char* l) { return name == l; });
}

// Collects the definitions of one declaration in a body, in source order.
class DefinitionFinder : public RecursiveASTVisitor<DefinitionFinder> {
 public:
  DefinitionFinder(const ValueDecl* d, std::vector<Semantics::Definition>& out) : d_(d), out_(out) {}
  bool shouldVisitTemplateInstantiations() const { return false; }
  bool shouldVisitImplicitCode() const { return false; }

  bool VisitDeclStmt(DeclStmt* s) {
    for (Decl* decl : s->decls())
      if (decl == d_)
        if (auto* v = dyn_cast<VarDecl>(decl); v && v->getInit()) out_.push_back({v->getInit(), s, "init"});
    return true;
  }
  bool VisitCXXOperatorCallExpr(CXXOperatorCallExpr* e) {
    if (!e->isAssignmentOp() || e->getNumArgs() != 2) return true;
    if (named_decl(e->getArg(0)) != d_) return true;
    out_.push_back({e->getArg(1), e, std::string(getOperatorSpelling(e->getOperator()))});
    return true;
  }
  bool VisitBinaryOperator(BinaryOperator* e) {
    if (!e->isAssignmentOp() || named_decl(e->getLHS()) != d_) return true;
    out_.push_back({e->getRHS(), e, std::string(e->getOpcodeStr())});
    return true;
  }
  // In-place tensor operations: total.add_(x), total.copy_(x), total.detach_().
  bool VisitCXXMemberCallExpr(CXXMemberCallExpr* e) {
    const CXXMethodDecl* m = e->getMethodDecl();
    if (!m || !m->getIdentifier() || !m->getName().endswith("_")) return true;
    if (!is_tensor_type(e->getImplicitObjectArgument()->getType())) return true;
    if (named_decl(e->getImplicitObjectArgument()) != d_) return true;
    out_.push_back({e, e, m->getName().str()});
    return true;
  }

 private:
  const ValueDecl* d_;
  std::vector<Semantics::Definition>& out_;
};

class MentionFinder : public RecursiveASTVisitor<MentionFinder> {
 public:
  explicit MentionFinder(const ValueDecl* d, llvm::function_ref<bool(const Stmt*)> skip = {}) : d_(d), skip_(skip) {}
  bool TraverseStmt(Stmt* s) {
    if (s && skip_ && skip_(s)) return true;
    return RecursiveASTVisitor::TraverseStmt(s);
  }
  bool VisitDeclRefExpr(DeclRefExpr* e) {
    found = found || e->getDecl() == d_;
    return !found;
  }
  bool VisitMemberExpr(MemberExpr* e) {
    found = found || e->getMemberDecl() == d_;
    return !found;
  }
  bool found = false;

 private:
  const ValueDecl* d_;
  llvm::function_ref<bool(const Stmt*)> skip_;
};

class NamedDeclCollector : public RecursiveASTVisitor<NamedDeclCollector> {
 public:
  explicit NamedDeclCollector(std::set<const ValueDecl*>& out) : out_(out) {}
  // What a `.detach()` or `.item<T>()` reads reaches no backward pass
  // through it: `targets = torch::stack(values).detach()` does not make
  // `values` feed the loss.
  bool TraverseCXXMemberCallExpr(CXXMemberCallExpr* e) {
    const CXXMethodDecl* m = e ? e->getMethodDecl() : nullptr;
    if (m && m->getIdentifier() && (m->getName() == "detach" || m->getName() == "item")) return true;
    return RecursiveASTVisitor::TraverseCXXMemberCallExpr(e);
  }
  bool VisitDeclRefExpr(DeclRefExpr* e) {
    if (isa<VarDecl>(e->getDecl())) out_.insert(e->getDecl());
    return true;
  }
  bool VisitMemberExpr(MemberExpr* e) {
    if (isa<FieldDecl>(e->getMemberDecl())) out_.insert(e->getMemberDecl());
    return true;
  }

 private:
  std::set<const ValueDecl*>& out_;
};

class BackwardFinder : public RecursiveASTVisitor<BackwardFinder> {
 public:
  bool shouldVisitTemplateInstantiations() const { return false; }
  bool VisitCallExpr(CallExpr* e) {
    if (auto* m = dyn_cast<CXXMemberCallExpr>(e)) {
      const CXXMethodDecl* md = m->getMethodDecl();
      if (md && md->getIdentifier() && md->getName() == "backward" &&
          is_tensor_type(m->getImplicitObjectArgument()->getType()))
        calls.push_back(e);
      return true;
    }
    const FunctionDecl* f = e->getDirectCallee();
    if (!f || !f->getIdentifier()) return true;
    std::string q = f->getQualifiedNameAsString();
    if (q == "torch::autograd::backward" || q == "torch::autograd::grad") calls.push_back(e);
    return true;
  }
  std::vector<const CallExpr*> calls;
};

}  // namespace

// --- types ----------------------------------------------------------------------

const CXXRecordDecl* record_of(QualType type) {
  if (type.isNull()) return nullptr;
  type = type.getNonReferenceType();
  if (type->isPointerType()) type = type->getPointeeType();
  type = type.getCanonicalType();
  const CXXRecordDecl* r = type->getAsCXXRecordDecl();
  return r ? (r->hasDefinition() ? r->getDefinition() : r) : nullptr;
}

bool derives_from(const CXXRecordDecl* record, llvm::StringRef qualified) {
  if (!record) return false;
  if (record->getQualifiedNameAsString() == qualified) return true;
  if (!record->hasDefinition()) return false;
  record = record->getDefinition();
  for (const CXXBaseSpecifier& base : record->bases()) {
    const CXXRecordDecl* b = record_of(base.getType());
    if (!b) {
      // A dependent base such as Cloneable<Derived>: look at the template.
      if (auto* tst = base.getType()->getAs<TemplateSpecializationType>())
        if (auto* td = dyn_cast_or_null<ClassTemplateDecl>(tst->getTemplateName().getAsTemplateDecl()))
          b = td->getTemplatedDecl();
    }
    if (b && b != record && derives_from(b, qualified)) return true;
  }
  return false;
}

bool is_tensor_type(QualType type) {
  const CXXRecordDecl* r = record_of(type.isNull() ? type : type.getNonReferenceType());
  if (!r || type.getNonReferenceType()->isPointerType()) return false;
  return r->getQualifiedNameAsString() == "at::Tensor";
}

// A module: torch::nn::Module and its subclasses, and TorchScript's
// torch::jit::Module (torch::jit::script::Module), whose forward runs the
// scripted graph with autograd recording as any other.
bool is_module_class(const CXXRecordDecl* record) {
  return derives_from(record, "torch::nn::Module") || derives_from(record, "torch::jit::Module");
}

namespace {
const CXXRecordDecl* shared_ptr_pointee(QualType type) {
  const CXXRecordDecl* r = record_of(type);
  auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(r);
  if (!spec || spec->getQualifiedNameAsString() != "std::shared_ptr") return nullptr;
  const TemplateArgumentList& args = spec->getTemplateArgs();
  if (args.size() < 1 || args[0].getKind() != TemplateArgument::Type) return nullptr;
  return record_of(args[0].getAsType());
}

bool is_holder_class(const CXXRecordDecl* r) {
  if (!r) return false;
  if (r->getQualifiedNameAsString() == "torch::nn::AnyModule") return true;
  if (auto* spec = dyn_cast<ClassTemplateSpecializationDecl>(r))
    if (spec->getQualifiedNameAsString() == "torch::nn::ModuleHolder") return true;
  if (!r->hasDefinition()) return false;
  for (const CXXBaseSpecifier& base : r->getDefinition()->bases())
    if (is_holder_class(record_of(base.getType()))) return true;
  return false;
}
}  // namespace

bool holds_tensors(QualType type) {
  auto* spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(record_of(type));
  if (!spec) return false;
  std::string name = spec->getQualifiedNameAsString();
  if (name != "std::tuple" && name != "std::pair" && name != "std::vector" && name != "std::array") return false;
  const TemplateArgumentList& args = spec->getTemplateArgs();
  bool any = false;
  for (unsigned i = 0; i < args.size(); ++i) {
    const TemplateArgument& a = args[i];
    if (a.getKind() == TemplateArgument::Pack) {
      for (const TemplateArgument& p : a.pack_elements())
        if (p.getKind() == TemplateArgument::Type) any = any || is_tensor_type(p.getAsType());
    } else if (a.getKind() == TemplateArgument::Type) {
      any = any || is_tensor_type(a.getAsType());
    }
  }
  return any;
}

bool analyzed_body(const FunctionDecl* fn) {
  if (!fn) return false;
  if (fn->isTemplateInstantiation()) {
    const FunctionTemplateDecl* t = fn->getPrimaryTemplate();
    if (!t) return true;
    for (const FunctionDecl* spec : t->specializations())
      if (spec->isTemplateInstantiation() && spec->hasBody()) return spec == fn;
    return true;
  }
  if (const FunctionTemplateDecl* t = fn->getDescribedFunctionTemplate())
    for (const FunctionDecl* spec : t->specializations())
      if (spec->isTemplateInstantiation() && spec->hasBody()) return false;
  return true;
}

bool is_module_value_type(QualType type, const Options& options) {
  const CXXRecordDecl* r = record_of(type);
  if (!r) return false;
  if (is_module_class(r) || is_holder_class(r) || name_listed(r, options.extra_models)) return true;
  const CXXRecordDecl* p = shared_ptr_pointee(type);
  return p && (is_module_class(p) || name_listed(p, options.extra_models));
}

bool is_optimizer_type(QualType type, const Options& options) {
  const CXXRecordDecl* r = record_of(type);
  if (!r) return false;
  if (derives_from(r, "torch::optim::Optimizer") || name_listed(r, options.extra_optimizers)) return true;
  const CXXRecordDecl* p = shared_ptr_pointee(type);
  return p && derives_from(p, "torch::optim::Optimizer");
}

const Expr* strip(const Expr* e) {
  while (e) {
    const Expr* next = e->IgnoreParenImpCasts();
    if (auto* m = dyn_cast<MaterializeTemporaryExpr>(next)) next = m->getSubExpr();
    else if (auto* c = dyn_cast<ExprWithCleanups>(next)) next = c->getSubExpr();
    else if (auto* b = dyn_cast<CXXBindTemporaryExpr>(next)) next = b->getSubExpr();
    else if (auto* f = dyn_cast<CXXFunctionalCastExpr>(next)) next = f->getSubExpr();
    else if (auto* k = dyn_cast<CXXConstructExpr>(next);
             k && k->getNumArgs() == 1 && k->getConstructor()->isCopyOrMoveConstructor())
      next = k->getArg(0);
    else if (auto* call = dyn_cast<CallExpr>(next); call && call->getNumArgs() == 1 && call->getDirectCallee() &&
                                                    call->getDirectCallee()->isInStdNamespace() &&
                                                    call->getDirectCallee()->getIdentifier() &&
                                                    (call->getDirectCallee()->getName() == "move" ||
                                                     call->getDirectCallee()->getName() == "forward"))
      next = call->getArg(0);
    if (next == e) return e;
    e = next;
  }
  return e;
}

const ValueDecl* named_decl(const Expr* e) {
  e = strip(e);
  if (!e) return nullptr;
  if (auto* r = dyn_cast<DeclRefExpr>(e)) return dyn_cast<VarDecl>(r->getDecl());
  if (auto* m = dyn_cast<MemberExpr>(e)) {
    if (!isa<CXXThisExpr>(m->getBase()->IgnoreParenImpCasts())) return nullptr;
    return dyn_cast<FieldDecl>(m->getMemberDecl());
  }
  return nullptr;
}

// --- structure ------------------------------------------------------------------

const Stmt* Semantics::parent_stmt(const Stmt* s, const Decl** decl_parent) const {
  if (decl_parent) *decl_parent = nullptr;
  DynTypedNodeList parents = ctx_.getParents(*s);
  while (!parents.empty()) {
    const DynTypedNode& p = parents[0];
    if (const Stmt* ps = p.get<Stmt>()) return ps;
    const Decl* d = p.get<Decl>();
    if (!d) return nullptr;
    if (isa<FunctionDecl>(d) || isa<BlockDecl>(d) || isa<RecordDecl>(d) || isa<TranslationUnitDecl>(d) ||
        isa<NamespaceDecl>(d)) {
      if (decl_parent) *decl_parent = d;
      return nullptr;
    }
    parents = ctx_.getParents(p);
  }
  return nullptr;
}

std::optional<Provenance> Semantics::element_provenance(const Expr* tuple, uint64_t index, int depth) const {
  const Expr* s = strip(tuple);
  if (!s || depth > kMaxDepth) return std::nullopt;
  // A local tuple: what it was initialized with, when never reassigned.
  if (auto* ref = dyn_cast<DeclRefExpr>(s)) {
    auto* v = dyn_cast<VarDecl>(ref->getDecl());
    if (!v || !v->isLocalVarDecl() || isa<ParmVarDecl>(v) || !v->getInit()) return std::nullopt;
    for (const Definition& def : definitions(v, enclosing_body(ref)))
      if (def.op != "init") return std::nullopt;
    return element_provenance(v->getInit(), index, depth + 1);
  }
  // make_tuple(a, b) or a tuple built from its elements.
  auto part = [&](const Expr* built) -> const Expr* {
    built = strip(built);
    if (auto* c = dyn_cast<CallExpr>(built)) {
      const FunctionDecl* f = c->getDirectCallee();
      if (f && f->getIdentifier() && f->isInStdNamespace() &&
          (f->getName() == "make_tuple" || f->getName() == "make_pair"))
        return index < c->getNumArgs() ? c->getArg(index) : nullptr;
      return nullptr;
    }
    if (auto* k = dyn_cast<CXXConstructExpr>(built); k && k->getNumArgs() >= 2)
      return index < k->getNumArgs() ? k->getArg(index) : nullptr;
    if (auto* l = dyn_cast<InitListExpr>(built); l && l->getNumInits() >= 2)
      return index < l->getNumInits() ? l->getInit(index) : nullptr;
    return nullptr;
  };
  if (const Expr* e = part(s)) return provenance_at_depth(e, depth + 1);
  auto* call = dyn_cast<CallExpr>(s);
  const FunctionDecl* definition = call ? program_function(call) : nullptr;
  if (!definition || definition->isDependentContext()) return std::nullopt;
  for (const Frame& f : frames_)
    if (f.function == definition) return std::nullopt;  // recursion
  using namespace clang::ast_matchers;
  std::optional<Provenance> out;
  bool every_return_spelled = true;
  frames_.push_back({definition, call});
  for (const auto& node : match(findAll(returnStmt().bind("r")), *definition->getBody(), ctx_)) {
    auto* r = node.getNodeAs<ReturnStmt>("r");
    if (!r || !r->getRetValue() || enclosing_function(r) != definition) continue;
    const Expr* e = part(r->getRetValue());
    if (!e) {
      every_return_spelled = false;
      break;
    }
    Provenance p = provenance_at_depth(e, depth + 1);
    out = out ? merge(*out, p) : p;
  }
  frames_.pop_back();
  if (!every_return_spelled) return std::nullopt;
  return out;
}

bool Semantics::registered_parameter(const FieldDecl* field) const {
  auto* record = dyn_cast<CXXRecordDecl>(field->getParent());
  if (!record || !record->hasDefinition() || !is_module_class(record)) return false;
  // register_parameter(name, tensor, requires_grad = true)
  auto registers = [](const Expr* value) {
    auto* call = dyn_cast_or_null<CXXMemberCallExpr>(strip(value));
    const CXXMethodDecl* m = call ? call->getMethodDecl() : nullptr;
    if (!m || !m->getIdentifier() || m->getName() != "register_parameter") return false;
    if (call->getNumArgs() >= 3 && !isa<CXXDefaultArgExpr>(call->getArg(2)))
      if (auto* b = dyn_cast<CXXBoolLiteralExpr>(call->getArg(2)->IgnoreParenImpCasts()); b && !b->getValue())
        return false;
    return true;
  };
  for (const CXXConstructorDecl* ctor : record->ctors())
    for (const CXXCtorInitializer* init : ctor->inits())
      if (init->getMember() == field && registers(init->getInit())) return true;
  using namespace clang::ast_matchers;
  for (const CXXMethodDecl* method : record->methods()) {
    const Stmt* body = method->hasBody() ? method->getBody() : nullptr;
    if (!body) continue;
    for (const Definition& def : definitions(field, body))
      if ((def.op == "=" || def.op == "init") && registers(def.value)) return true;
  }
  return false;
}

bool Semantics::emptied_in(const ValueDecl* container, const Stmt* loop, const Stmt* except) const {
  for (const auto& def : definitions(container, loop))
    if (def.statement != except && (def.op == "=" || def.op == "init") && !mentions(def.value, container) &&
        !under_condition(def.statement, loop))
      return true;
  using namespace clang::ast_matchers;
  auto calls = match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("clear", "pop_back", "pop_front",
                                                                                "erase", "swap", "resize"))))
                                 .bind("c")),
                     *loop, ctx_);
  for (const auto& node : calls)
    if (auto* c = node.getNodeAs<CXXMemberCallExpr>("c");
        c && named_decl(c->getImplicitObjectArgument()) == container && !under_condition(c, loop))
      return true;
  return false;
}

const FunctionDecl* Semantics::program_definition(const FunctionDecl* callee) const {
  const FunctionDecl* definition = nullptr;
  if (!callee || in_torch_namespace(callee) || !callee->hasBody(definition) || !definition) return nullptr;
  if (in_torch_namespace(definition) || definition->isInStdNamespace() ||
      sources().isInSystemHeader(definition->getLocation()))
    return nullptr;
  return definition;
}

const FunctionDecl* Semantics::program_function(const CallExpr* call) const {
  if (!call) return nullptr;
  if (const FunctionDecl* definition = program_definition(call->getDirectCallee())) return definition;
  // `callback(batch)` on a std::function (its operator() is the standard
  // library's), or through a function pointer (no direct callee).
  const FunctionDecl* callee = call->getDirectCallee();
  if (auto* op = dyn_cast<CXXOperatorCallExpr>(call); op && op->getOperator() == OO_Call && op->getNumArgs() >= 1) {
    if (auto* method = dyn_cast_or_null<CXXMethodDecl>(callee); method && method->getParent()->isInStdNamespace())
      return held_callable(op->getArg(0), 0);
    return nullptr;
  }
  if (!callee && !isa<CXXMemberCallExpr>(call)) return held_callable(call->getCallee(), 0);
  return nullptr;
}

const FunctionDecl* Semantics::held_callable(const Expr* e, int depth) const {
  if (!e || depth > 4) return nullptr;
  e = strip(e);
  // std::function's converting constructor, `&train_step`.
  while (true) {
    if (auto* k = dyn_cast<CXXConstructExpr>(e); k && k->getNumArgs() == 1) e = strip(k->getArg(0));
    else if (auto* u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_AddrOf) e = strip(u->getSubExpr());
    else break;
  }
  if (auto* l = dyn_cast<LambdaExpr>(e)) return program_definition(l->getCallOperator());
  auto* ref = dyn_cast<DeclRefExpr>(e);
  if (!ref) return nullptr;
  if (auto* fn = dyn_cast<FunctionDecl>(ref->getDecl())) return program_definition(fn);
  if (auto* p = dyn_cast<ParmVarDecl>(ref->getDecl())) {
    auto* fn = dyn_cast<FunctionDecl>(p->getDeclContext());
    if (!fn) return nullptr;
    auto argument = [&](const CallExpr* call) -> const Expr* {
      unsigned at = p->getFunctionScopeIndex() + first_argument(call, fn);
      return at < call->getNumArgs() ? call->getArg(at) : nullptr;
    };
    // Bound at a followed call: the argument, read in the caller's frame.
    for (size_t i = frames_.size(); i-- > 0;) {
      if (frames_[i].function != fn) continue;
      std::vector<Frame> inner(frames_.begin() + static_cast<std::ptrdiff_t>(i), frames_.end());
      frames_.resize(i);
      const FunctionDecl* held = held_callable(argument(inner.front().call), depth + 1);
      frames_.insert(frames_.end(), inner.begin(), inner.end());
      return held;
    }
    // Else what the file's callers pass, when they all pass the same one.
    const FunctionDecl* held = nullptr;
    for (const auto& node : match_in_main_file(clang::ast_matchers::callExpr().bind("call"), ctx_)) {
      auto* call = node.getNodeAs<CallExpr>("call");
      const FunctionDecl* callee = call ? call->getDirectCallee() : nullptr;
      if (!callee || callee->getCanonicalDecl() != fn->getCanonicalDecl()) continue;
      const FunctionDecl* passed = held_callable(argument(call), depth + 1);
      if (!passed || (held && held != passed)) return nullptr;
      held = passed;
    }
    return held;
  }
  // A local variable: what it was initialized with, if it is never assigned.
  auto* v = dyn_cast<VarDecl>(ref->getDecl());
  if (!v || !v->isLocalVarDecl() || !v->getInit()) return nullptr;
  if (const Stmt* body = enclosing_body(ref))
    for (const Definition& def : definitions(v, body))
      if (def.op != "init") return nullptr;
  return held_callable(v->getInit(), depth + 1);
}

bool Semantics::is_batch_loop(const Stmt* loop) const {
  using namespace clang::ast_matchers;
  auto over_loader = match(findAll(cxxForRangeStmt().bind("for")), *loop, ctx_);
  for (const auto& node : over_loader)
    if (auto* f = node.getNodeAs<CXXForRangeStmt>("for");
        f && derives_from(record_of(f->getRangeInit()->getType()), "torch::data::DataLoaderBase"))
      return true;
  return steps_optimizer(loop, 0);
}

// An optimizer's step() in `s`, or in a function or lambda of the program
// that `s` calls (a training-step helper), depth-bounded.
bool Semantics::steps_optimizer(const Stmt* s, int depth) const {
  using namespace clang::ast_matchers;
  if (!s || depth > 2) return false;
  auto steps = match(findAll(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("step")))).bind("step")), *s, ctx_);
  for (const auto& node : steps)
    if (auto* m = node.getNodeAs<CXXMemberCallExpr>("step");
        m && is_optimizer_type(m->getImplicitObjectArgument()->getType(), options_))
      return true;
  for (const auto& node : match(findAll(callExpr().bind("c")), *s, ctx_)) {
    const FunctionDecl* definition = program_function(node.getNodeAs<CallExpr>("c"));
    if (definition && steps_optimizer(definition->getBody(), depth + 1)) return true;
  }
  return false;
}

bool Semantics::runs_same_module(const Stmt* loop) const {
  // A loop in a method of a module (its forward, an `evaluate_actions`) runs
  // over the time steps or layers of one forward pass, not over data.
  if (auto* method = dyn_cast_or_null<CXXMethodDecl>(enclosing_function(loop));
      method && is_module_class(method->getParent()))
    return false;
  using namespace clang::ast_matchers;
  for (const auto& node : match(findAll(callExpr().bind("c")), *loop, ctx_)) {
    auto* c = node.getNodeAs<CallExpr>("c");
    if (!c || enclosing_loop(c) == nullptr) continue;
    if (is_module_call(c)) {
      const Expr* module = called_module(c);
      bool chosen_by_loop = false;
      for (const auto& ref : match(findAll(declRefExpr().bind("r")), *module, ctx_))
        if (auto* r = ref.getNodeAs<DeclRefExpr>("r"); r && within(r->getDecl(), loop)) chosen_by_loop = true;
      if (!chosen_by_loop) return true;
    } else if (runs_module_through(c)) {
      return true;
    }
  }
  return false;
}

bool Semantics::batch_level(const Stmt* loop) const {
  using namespace clang::ast_matchers;
  auto nested = match(findAll(stmt(anyOf(forStmt(), cxxForRangeStmt(), whileStmt(), doStmt())).bind("loop")), *loop,
                      ctx_);
  for (const auto& node : nested) {
    const Stmt* inner = node.getNodeAs<Stmt>("loop");
    if (inner && inner != loop && is_batch_loop(inner)) return false;
  }
  return true;
}

const Stmt* Semantics::enclosing_loop(const Stmt* s) const {
  for (const Stmt* p = parent_stmt(s); p; p = parent_stmt(p)) {
    if (isa<ForStmt>(p) || isa<CXXForRangeStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p)) return p;
    if (isa<LambdaExpr>(p)) return nullptr;
  }
  return nullptr;
}

bool Semantics::under_condition(const Stmt* s, const Stmt* within) const {
  const Stmt* child = s;
  for (const Stmt* p = parent_stmt(s); p && child != within; child = p, p = parent_stmt(p)) {
    if (isa<LambdaExpr>(p)) return false;
    if (auto* i = dyn_cast<IfStmt>(p); i && i->getCond() != child && i->getConditionVariableDeclStmt() != child)
      return true;
    if (isa<SwitchCase>(p) || isa<SwitchStmt>(p)) return true;
    if (auto* c = dyn_cast<ConditionalOperator>(p); c && c->getCond() != child) return true;
    if (auto* b = dyn_cast<BinaryOperator>(p); b && b->isLogicalOp() && b->getRHS() == child) return true;
  }
  return false;
}

const Stmt* Semantics::enclosing_body(const Stmt* s) const {
  for (const Stmt* p = s;;) {
    const Decl* d = nullptr;
    const Stmt* next = parent_stmt(p, &d);
    if (!next) {
      auto* f = dyn_cast_or_null<FunctionDecl>(d);
      return f ? f->getBody() : nullptr;
    }
    if (auto* l = dyn_cast<LambdaExpr>(next); l && l->getBody() == p) return p;
    p = next;
  }
}

const FunctionDecl* Semantics::enclosing_function(const Stmt* s) const {
  for (const Stmt* p = s;;) {
    const Decl* d = nullptr;
    const Stmt* next = parent_stmt(p, &d);
    if (!next) return dyn_cast_or_null<FunctionDecl>(d);
    if (auto* l = dyn_cast<LambdaExpr>(next)) return l->getCallOperator();
    p = next;
  }
}

bool Semantics::before(SourceLocation a, SourceLocation b) const {
  const SourceManager& sm = sources();
  return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(a), sm.getExpansionLoc(b));
}

namespace {
bool point_within(const SourceManager& sm, SourceLocation loc, SourceRange range) {
  loc = sm.getExpansionLoc(loc);
  SourceLocation b = sm.getExpansionLoc(range.getBegin()), e = sm.getExpansionLoc(range.getEnd());
  return loc == b || loc == e || (sm.isBeforeInTranslationUnit(b, loc) && sm.isBeforeInTranslationUnit(loc, e));
}
}  // namespace

bool Semantics::within(const Stmt* inner, const Stmt* outer) const {
  return point_within(sources(), inner->getBeginLoc(), outer->getSourceRange());
}

bool Semantics::within(const Decl* inner, const Stmt* outer) const {
  return point_within(sources(), inner->getLocation(), outer->getSourceRange());
}

bool Semantics::outlives_iteration(const ValueDecl* d, const Stmt* loop) const {
  if (isa<FieldDecl>(d)) return true;
  auto* v = dyn_cast<VarDecl>(d);
  if (!v) return false;
  if (!v->isLocalVarDeclOrParm() || v->isStaticLocal() || isa<ParmVarDecl>(v)) return true;
  if (!within(v, loop)) return true;
  if (auto* f = dyn_cast<ForStmt>(loop); f && f->getInit() && within(v, f->getInit())) return true;
  return false;
}

// --- autograd -------------------------------------------------------------------

namespace {

// The grad mode a declaration sets for the rest of its block, if it is a guard.
std::optional<GradState> guard_state(const VarDecl* v, ASTContext& ctx) {
  const CXXRecordDecl* r = record_of(v->getType());
  if (!r) return std::nullopt;
  auto constant_arg = [&](bool absent) -> std::optional<bool> {
    auto* construct = dyn_cast_or_null<CXXConstructExpr>(v->getInit() ? v->getInit()->IgnoreImplicit() : nullptr);
    if (!construct || construct->getNumArgs() == 0 || isa<CXXDefaultArgExpr>(construct->getArg(0))) return absent;
    bool value = false;
    if (construct->getArg(0)->isValueDependent()) return std::nullopt;
    Expr::EvalResult result;
    if (!construct->getArg(0)->EvaluateAsBooleanCondition(value, ctx)) return std::nullopt;
    (void)result;
    return value;
  };
  if (derives_from(r, "c10::NoGradGuard")) return GradState::Disabled;
  if (derives_from(r, "c10::AutoGradMode")) {
    std::optional<bool> enabled = constant_arg(true);
    if (!enabled) return GradState::Maybe;
    return *enabled ? GradState::Enabled : GradState::Disabled;
  }
  if (derives_from(r, "c10::InferenceMode")) {
    std::optional<bool> on = constant_arg(true);
    if (!on) return GradState::Maybe;
    if (*on) return GradState::Disabled;
  }
  return std::nullopt;
}

class SetEnabledFinder : public RecursiveASTVisitor<SetEnabledFinder> {
 public:
  bool VisitCallExpr(CallExpr* e) {
    if (const FunctionDecl* f = e->getDirectCallee())
      if (f->getQualifiedNameAsString() == "c10::GradMode::set_enabled") calls.push_back(e);
    return true;
  }
  std::vector<const CallExpr*> calls;
};

}  // namespace

GradState Semantics::grad_state(const Stmt* s) const {
  const Stmt* child = s;
  for (const Stmt* p = parent_stmt(s); p; child = p, p = parent_stmt(p)) {
    if (auto* block = dyn_cast<CompoundStmt>(p)) {
      std::optional<GradState> state;
      for (const Stmt* item : block->body()) {
        if (item == child) break;
        if (auto* ds = dyn_cast<DeclStmt>(item))
          for (const Decl* d : ds->decls())
            if (auto* v = dyn_cast<VarDecl>(d))
              if (auto g = guard_state(v, ctx_)) state = g;
      }
      if (state) return *state;
    }
    if (isa<LambdaExpr>(p)) break;
  }
  // GradMode::set_enabled earlier in the function: the state depends on the run.
  if (const Stmt* body = enclosing_body(s)) {
    SetEnabledFinder f;
    f.TraverseStmt(const_cast<Stmt*>(body));
    for (const CallExpr* c : f.calls)
      if (before(c->getBeginLoc(), s->getBeginLoc())) return GradState::Maybe;
  }
  return GradState::Enabled;
}

bool Semantics::is_module_call(const Expr* e) const {
  e = strip(e);
  if (auto* m = dyn_cast_or_null<CXXMemberCallExpr>(e)) {
    const CXXMethodDecl* md = m->getMethodDecl();
    if (!md || !md->getIdentifier() || md->getName() != "forward") return false;
    QualType object = m->getImplicitObjectArgument()->getType();
    return is_module_value_type(object, options_);
  }
  if (auto* op = dyn_cast_or_null<CXXOperatorCallExpr>(e)) {
    if (op->getOperator() != OO_Call || op->getNumArgs() < 1) return false;
    return is_module_value_type(op->getArg(0)->getType(), options_);
  }
  return false;
}

bool Semantics::runs_module_through(const CallExpr* call, const CallExpr** inner, int depth) const {
  if (depth > 3) return false;
  const FunctionDecl* definition = program_function(call);
  if (!definition) return false;
  if (isa<CXXMethodDecl>(definition) && definition->getIdentifier() && definition->getName() == "forward")
    return false;  // a module's own forward
  const Stmt* body = definition->getBody();
  if (!backward_calls(body).empty()) return false;
  using namespace clang::ast_matchers;
  for (const auto& node : match(findAll(callExpr().bind("c")), *body, ctx_)) {
    auto* c = node.getNodeAs<CallExpr>("c");
    if (!c || c == call || grad_state(c) != GradState::Enabled) continue;
    if (is_module_call(c) || runs_module_through(c, nullptr, depth + 1)) {
      if (inner) *inner = c;
      return true;
    }
  }
  return false;
}

const Expr* Semantics::called_module(const Expr* e) const {
  e = strip(e);
  const Expr* object = nullptr;
  if (auto* m = dyn_cast_or_null<CXXMemberCallExpr>(e)) object = m->getImplicitObjectArgument();
  else if (auto* op = dyn_cast_or_null<CXXOperatorCallExpr>(e); op && op->getNumArgs() > 0) object = op->getArg(0);
  object = strip(object);
  // model->forward(x): the object is `model.operator->()`.
  if (auto* arrow = dyn_cast_or_null<CXXOperatorCallExpr>(object); arrow && arrow->getOperator() == OO_Arrow)
    object = strip(arrow->getArg(0));
  if (auto* deref = dyn_cast_or_null<UnaryOperator>(object); deref && deref->getOpcode() == UO_Deref)
    object = strip(deref->getSubExpr());
  if (auto* deref = dyn_cast_or_null<CXXOperatorCallExpr>(object); deref && deref->getOperator() == OO_Star &&
                                                                  deref->getNumArgs() == 1)
    object = strip(deref->getArg(0));
  return object;
}

bool Semantics::is_loss_call(const Expr* e) const {
  auto* call = dyn_cast_or_null<CallExpr>(strip(e));
  if (!call || isa<CXXMemberCallExpr>(call) || isa<CXXOperatorCallExpr>(call)) return false;
  const FunctionDecl* f = call->getDirectCallee();
  if (!f || !f->getIdentifier()) return false;
  if (std::find(options_.extra_losses.begin(), options_.extra_losses.end(), f->getName().str()) !=
          options_.extra_losses.end() ||
      std::find(options_.extra_losses.begin(), options_.extra_losses.end(), f->getQualifiedNameAsString()) !=
          options_.extra_losses.end())
    return true;
  return in_torch_namespace(f) && is_loss_name(f->getName());
}

std::vector<const CallExpr*> Semantics::backward_calls(const Stmt* body) const {
  BackwardFinder f;
  if (body) f.TraverseStmt(const_cast<Stmt*>(body));
  return f.calls;
}

bool Semantics::feeds_backward(const ValueDecl* d, const Stmt* body) const {
  if (!body) return false;
  std::set<const ValueDecl*> seen;
  std::vector<const ValueDecl*> work;
  auto add_mentions = [&](const Stmt* e) {
    std::set<const ValueDecl*> found;
    NamedDeclCollector c(found);
    c.TraverseStmt(const_cast<Stmt*>(e));
    for (const ValueDecl* v : found)
      if (seen.insert(v).second) work.push_back(v);
  };
  for (const CallExpr* call : backward_calls(body)) {
    if (auto* m = dyn_cast<CXXMemberCallExpr>(call)) add_mentions(m->getImplicitObjectArgument());
    else if (call->getNumArgs() > 0) add_mentions(call->getArg(0));
  }
  for (size_t i = 0; i < work.size() && i < 256; ++i) {
    if (work[i] == d) return true;
    for (const Definition& def : definitions(work[i], body)) add_mentions(def.value);
  }
  return seen.count(d) > 0;
}

// --- provenance -------------------------------------------------------------------

Provenance Semantics::provenance(const Expr* e) const { return provenance_at_depth(e, 0); }

namespace {
Provenance merge(Provenance a, Provenance b) {
  if (a == Provenance::Attached || b == Provenance::Attached) return Provenance::Attached;
  if (a == Provenance::Unknown || b == Provenance::Unknown) return Provenance::Unknown;
  return Provenance::Detached;
}

// The tensor-valued operands of a call: `a` and `b` of at::cat({a, b}), the
// object of a method call. Scalars and options are not operands.
void tensor_operands(const Expr* e, std::vector<const Expr*>& out, int depth = 0) {
  if (!e || depth > 6) return;
  const Expr* s = strip(e);
  if (is_tensor_type(s->getType())) {
    out.push_back(s);
    return;
  }
  if (isa<InitListExpr>(s) || isa<CXXStdInitializerListExpr>(s) || isa<CXXConstructExpr>(s))
    for (const Stmt* child : s->children())
      if (auto* ce = dyn_cast_or_null<Expr>(child)) tensor_operands(ce, out, depth + 1);
}
}  // namespace

Provenance Semantics::merge_operands(const Expr* e, int depth) const {
  std::vector<const Expr*> operands;
  if (auto* m = dyn_cast<CXXMemberCallExpr>(e)) tensor_operands(m->getImplicitObjectArgument(), operands);
  if (auto* call = dyn_cast<CallExpr>(e))
    for (const Expr* arg : call->arguments()) tensor_operands(arg, operands);
  Provenance p = Provenance::Detached;
  for (const Expr* o : operands) {
    p = merge(p, provenance_at_depth(o, depth + 1));
    if (p == Provenance::Attached) break;
  }
  return p;
}

Provenance Semantics::provenance_at_depth(const Expr* e, int depth) const {
  e = strip(e);
  if (!e || depth > kMaxDepth) return Provenance::Unknown;
  QualType type = e->getType();
  if (!is_tensor_type(type)) {
    QualType t = type.getNonReferenceType();
    if (t->isArithmeticType()) return Provenance::Detached;
    if (const CXXRecordDecl* r = record_of(t); r && r->getQualifiedNameAsString() == "c10::Scalar")
      return Provenance::Detached;
    return holds_tensors(t) ? aggregate(e, depth) : Provenance::Unknown;
  }
  if (auto* ref = dyn_cast<DeclRefExpr>(e)) {
    if (auto* b = dyn_cast<BindingDecl>(ref->getDecl())) {
      auto* holder = dyn_cast_or_null<VarDecl>(b->getDecomposedDecl());
      return holder && holder->getInit() ? aggregate(holder->getInit(), depth + 1) : Provenance::Unknown;
    }
    if (auto* p = dyn_cast<ParmVarDecl>(ref->getDecl())) {
      // Inside a followed call: the argument at the call site, read in the
      // caller's frame.
      for (size_t i = frames_.size(); i-- > 0;) {
        const Frame frame = frames_[i];
        if (frame.function != p->getDeclContext()) continue;
        unsigned index = p->getFunctionScopeIndex();
        // `f(x)` through operator() (a lambda, a functor): argument 0 is the object.
        index += first_argument(frame.call, frame.function);
        if (index >= frame.call->getNumArgs()) return Provenance::Unknown;
        std::vector<Frame> inner(frames_.begin() + static_cast<std::ptrdiff_t>(i), frames_.end());
        frames_.resize(i);
        Provenance at_call = provenance_at_depth(frame.call->getArg(index), depth + 1);
        frames_.insert(frames_.end(), inner.begin(), inner.end());
        return at_call;
      }
      return Provenance::Unknown;
    }
    auto* v = dyn_cast<VarDecl>(ref->getDecl());
    if (!v || !v->isLocalVarDecl()) return Provenance::Unknown;
    const Stmt* body = enclosing_body(ref);
    if (!body) return Provenance::Unknown;
    std::optional<Provenance> state;
    for (const Definition& def : definitions(v, body)) {
      if (!before(def.statement->getBeginLoc(), ref->getBeginLoc()) || within(ref, def.statement)) continue;
      if (def.op == "detach_") state = Provenance::Detached;
      else if (def.op == "init" || def.op == "=") state = provenance_at_depth(def.value, depth + 1);
      else state = merge(state.value_or(Provenance::Detached), provenance_at_depth(def.value, depth + 1));
    }
    if (state) return *state;
    // Declared without an initializer: an undefined tensor until assigned.
    return v->getInit() ? Provenance::Unknown : Provenance::Detached;
  }
  if (auto* cond = dyn_cast<ConditionalOperator>(e)) {
    Provenance a = provenance_at_depth(cond->getTrueExpr(), depth + 1);
    Provenance b = provenance_at_depth(cond->getFalseExpr(), depth + 1);
    if (a == Provenance::Attached || b == Provenance::Attached) return Provenance::Attached;
    return merge(a, b);
  }
  if (auto* construct = dyn_cast<CXXConstructExpr>(e))
    return construct->getNumArgs() == 0 ? Provenance::Detached : Provenance::Unknown;
  // A module's parameter (`log_std_ = register_parameter(...)`): a leaf that
  // requires grad, so what is computed from it with autograd on has history.
  if (auto* member = dyn_cast<MemberExpr>(e)) {
    auto* field = dyn_cast<FieldDecl>(member->getMemberDecl());
    if (field && registered_parameter(field)) return grad_state(e) == GradState::Disabled ? Provenance::Detached
                                                                                          : Provenance::Attached;
    return Provenance::Unknown;
  }
  auto* call = dyn_cast<CallExpr>(e);
  if (!call) return Provenance::Unknown;
  if (grad_state(call) == GradState::Disabled) return Provenance::Detached;
  // std::get<1>(out) of a tuple (a module's forward returning several
  // tensors): a part of the aggregate, taken as the whole.
  if (const FunctionDecl* f = call->getDirectCallee(); f && f->getIdentifier() && f->isInStdNamespace() &&
                                                        f->getName() == "get" && call->getNumArgs() == 1) {
    // The element itself when the tuple comes from a function of the file
    // whose returns spell their elements (`return {action, value};`).
    const TemplateArgumentList* args = f->getTemplateSpecializationArgs();
    if (args && args->size() >= 1 && args->get(0).getKind() == TemplateArgument::Integral)
      if (std::optional<Provenance> p =
              element_provenance(call->getArg(0), args->get(0).getAsIntegral().getZExtValue(), depth + 1))
        return *p;
    return aggregate(call->getArg(0), depth + 1);
  }
  // Indices and masks (`argmax`, `multinomial`, `eq`) have nothing to
  // differentiate: the names models/torch.toml gives `grad = "none"` (the
  // clang-tidy module, which shares these checks, cannot read the models).
  auto without_history = [](llvm::StringRef name) {
    static const std::set<std::string, std::less<>> kNames = {
        "argmax", "argmin", "argsort", "eq", "ne", "lt", "gt", "le", "ge", "nonzero", "isnan", "isinf",
        "isfinite", "all", "any", "count_nonzero", "multinomial", "equal", "numel"};
    return kNames.count(name) > 0;
  };
  if (auto* m = dyn_cast<CXXMemberCallExpr>(call)) {
    const CXXMethodDecl* md = m->getMethodDecl();
    // `scripted.forward(inputs).toTensor()`: the tensor a c10::IValue holds
    // has the history of the value the IValue came from.
    if (md && md->getIdentifier() && md->getName() == "toTensor" &&
        md->getParent()->getQualifiedNameAsString() == "c10::IValue")
      return aggregate(m->getImplicitObjectArgument(), depth + 1);
    if (md && md->getIdentifier() && is_tensor_type(m->getImplicitObjectArgument()->getType())) {
      llvm::StringRef name = md->getName();
      if (name == "detach" || name == "detach_" || name == "data") return Provenance::Detached;
      if (without_history(name)) return Provenance::Detached;
    }
  }
  if (is_module_call(call)) return Provenance::Attached;
  if (is_loss_call(call)) {
    Provenance p = merge_operands(call, depth);
    return p == Provenance::Detached ? Provenance::Detached : Provenance::Attached;
  }
  const FunctionDecl* callee = call->getDirectCallee();
  const NamedDecl* owner = callee;
  if (auto* md = dyn_cast_or_null<CXXMethodDecl>(callee)) owner = md->getParent();
  if (in_torch_namespace(owner)) {
    if (callee && callee->getIdentifier() && !isa<CXXMethodDecl>(callee) &&
        without_history(callee->getName()))
      return Provenance::Detached;
    return merge_operands(call, depth);
  }
  return returned_by(call, depth);
}

Provenance Semantics::returned_by(const CallExpr* call, int depth) const {
  const FunctionDecl* definition = program_function(call);
  if (!definition || definition->isDependentContext()) return Provenance::Unknown;
  for (const Frame& f : frames_)
    if (f.function == definition) return Provenance::Unknown;  // recursion
  using namespace clang::ast_matchers;
  std::optional<Provenance> out;
  frames_.push_back({definition, call});
  for (const auto& node : match(findAll(returnStmt().bind("r")), *definition->getBody(), ctx_)) {
    auto* r = node.getNodeAs<ReturnStmt>("r");
    if (!r || !r->getRetValue() || enclosing_function(r) != definition) continue;  // a nested lambda's return
    Provenance p = aggregate(r->getRetValue(), depth + 1);
    out = out ? merge(*out, p) : p;
    if (*out == Provenance::Attached) break;
  }
  frames_.pop_back();
  return out.value_or(Provenance::Unknown);
}

Provenance Semantics::aggregate(const Expr* e, int depth) const {
  const Expr* s = strip(e);
  if (!s || depth > kMaxDepth) return Provenance::Unknown;
  if (is_tensor_type(s->getType())) return provenance_at_depth(s, depth);
  if (auto* call = dyn_cast<CallExpr>(s)) {
    if (is_module_call(call)) return grad_state(call) == GradState::Disabled ? Provenance::Detached : Provenance::Attached;
    const FunctionDecl* callee = call->getDirectCallee();
    // std::get<1>(result): a part of the aggregate, taken as the whole.
    if (callee && callee->getIdentifier() && callee->isInStdNamespace() && callee->getName() == "get" &&
        call->getNumArgs() == 1)
      return aggregate(call->getArg(0), depth + 1);
    if (callee && callee->getIdentifier() && callee->isInStdNamespace() &&
        (callee->getName() == "make_tuple" || callee->getName() == "make_pair" || callee->getName() == "tie" ||
         callee->getName() == "forward_as_tuple")) {
      std::optional<Provenance> out;
      for (const Expr* arg : call->arguments()) {
        if (!is_tensor_type(strip(arg)->getType())) continue;
        Provenance p = provenance_at_depth(arg, depth + 1);
        out = out ? merge(*out, p) : p;
      }
      return out.value_or(Provenance::Unknown);
    }
    return returned_by(call, depth);
  }
  // A local aggregate: what it was initialized with, when never reassigned.
  if (auto* ref = dyn_cast<DeclRefExpr>(s)) {
    auto* v = dyn_cast<VarDecl>(ref->getDecl());
    if (!v || !v->isLocalVarDecl() || !v->getInit() || isa<ParmVarDecl>(v)) return provenance_at_depth(s, depth);
    for (const Definition& def : definitions(v, enclosing_body(ref)))
      if (def.op != "init") return Provenance::Unknown;
    return aggregate(v->getInit(), depth + 1);
  }
  if (isa<InitListExpr>(s) || isa<CXXConstructExpr>(s)) {
    std::vector<const Expr*> parts;
    for (const Stmt* child : s->children())
      if (auto* ce = dyn_cast_or_null<Expr>(child)) tensor_operands(ce, parts);
    if (parts.empty()) return Provenance::Unknown;
    Provenance p = Provenance::Detached;
    for (const Expr* part : parts) p = merge(p, provenance_at_depth(part, depth + 1));
    return p;
  }
  return Provenance::Unknown;
}

// --- devices --------------------------------------------------------------------

namespace {
Device join_device(Device a, Device b) {
  if (a == Device::Accelerator || b == Device::Accelerator) return Device::Accelerator;
  if (a == Device::Unknown || b == Device::Unknown) return Device::Unknown;
  return Device::Host;
}

bool is_device_type(QualType t) {
  const CXXRecordDecl* r = record_of(t);
  if (r && (r->getQualifiedNameAsString() == "c10::Device" || r->getQualifiedNameAsString() == "c10::TensorOptions"))
    return true;
  if (auto* e = t.getNonReferenceType()->getAs<EnumType>())
    return e->getDecl()->getQualifiedNameAsString() == "c10::DeviceType";
  return false;
}
}  // namespace

Device Semantics::device(const Expr* e) const { return device_at_depth(e, 0); }

Device Semantics::device_named(const Expr* e, int depth) const {
  e = strip(e);
  if (!e || depth > kMaxDepth) return Device::Unknown;
  if (auto* ref = dyn_cast<DeclRefExpr>(e)) {
    if (auto* c = dyn_cast<EnumConstantDecl>(ref->getDecl())) {
      // A c10::DeviceType only: `torch::kLong` (a ScalarType, through
      // TensorOptions' converting constructor) says nothing of the device.
      auto* type = dyn_cast<EnumDecl>(c->getDeclContext());
      if (!type || !type->getIdentifier() || type->getName() != "DeviceType" || !c->getIdentifier())
        return Device::Unknown;
      std::string name = c->getName().str();
      if (name == "CPU" || name == "kCPU") return Device::Host;
      if (name == "Meta") return Device::Unknown;
      return Device::Accelerator;  // CUDA, HIP, MPS, XLA, ...
    }
    if (auto* v = dyn_cast<VarDecl>(ref->getDecl())) {
      // A constant like torch::kCUDA, or a local device variable.
      if (v->getIdentifier() && v->getName() == "kCUDA") return Device::Accelerator;
      if (v->getIdentifier() && v->getName() == "kCPU") return Device::Host;
      if (v->isLocalVarDecl() || v->hasGlobalStorage()) {
        std::optional<Device> d;
        if (v->getInit()) d = device_named(v->getInit(), depth + 1);
        if (const Stmt* body = enclosing_body(ref))
          for (const Definition& def : definitions(v, body))
            if (def.op == "=") d = join_device(d.value_or(Device::Host), device_named(def.value, depth + 1));
        return d.value_or(Device::Unknown);
      }
    }
    return Device::Unknown;
  }
  if (auto* cond = dyn_cast<ConditionalOperator>(e))
    return join_device(device_named(cond->getTrueExpr(), depth + 1), device_named(cond->getFalseExpr(), depth + 1));
  if (auto* construct = dyn_cast<CXXConstructExpr>(e)) {
    if (construct->getNumArgs() >= 1) return device_named(construct->getArg(0), depth + 1);
    return Device::Unknown;
  }
  // TensorOptions().device(torch::kCUDA).dtype(...)
  if (auto* m = dyn_cast<CXXMemberCallExpr>(e)) {
    const CXXMethodDecl* md = m->getMethodDecl();
    if (md && md->getIdentifier() && md->getName() == "device" && m->getNumArgs() >= 1)
      return device_named(m->getArg(0), depth + 1);
    if (md && is_device_type(m->getImplicitObjectArgument()->getType()))
      return device_named(m->getImplicitObjectArgument(), depth + 1);
  }
  if (auto* call = dyn_cast<CallExpr>(e)) {
    const FunctionDecl* f = call->getDirectCallee();
    if (f && f->getIdentifier() && (f->getName() == "device" || f->getName() == "Device") && call->getNumArgs() >= 1)
      return device_named(call->getArg(0), depth + 1);  // torch::device(kCUDA)
  }
  return Device::Unknown;
}


// The variable a module expression names, through `modules[i]`.
const ValueDecl* module_variable(const Expr* e) {
  e = strip(e);
  if (auto* op = dyn_cast_or_null<CXXOperatorCallExpr>(e); op && op->getOperator() == OO_Subscript)
    return named_decl(op->getArg(0));
  if (auto* a = dyn_cast_or_null<ArraySubscriptExpr>(e)) return named_decl(a->getBase());
  return named_decl(e);
}

std::vector<const ValueDecl*> Semantics::optimizer_modules(const ValueDecl* optimizer) const {
  auto* v = dyn_cast_or_null<VarDecl>(optimizer);
  auto* construct = v && v->getInit() ? dyn_cast<CXXConstructExpr>(v->getInit()->IgnoreImplicit()) : nullptr;
  if (!construct || construct->getNumArgs() < 1) return {};
  auto* params = dyn_cast<CXXMemberCallExpr>(strip(construct->getArg(0)));
  const CXXMethodDecl* md = params ? params->getMethodDecl() : nullptr;
  if (!md || !md->getIdentifier() || md->getName() != "parameters") return {};
  if (!is_module_value_type(params->getImplicitObjectArgument()->getType(), options_)) return {};
  const ValueDecl* module = module_variable(called_module(params));
  if (!module) return {};
  return {module};
}

bool Semantics::clears_gradients_of(const CXXMemberCallExpr* zero_grad, const ValueDecl* optimizer) const {
  const Expr* receiver = zero_grad->getImplicitObjectArgument();
  std::vector<const ValueDecl*> owned = optimizer_modules(optimizer);
  if (is_optimizer_type(receiver->getType(), options_)) {
    const ValueDecl* other = named_decl(receiver);
    if (!other || !optimizer || other == optimizer) return true;
    std::vector<const ValueDecl*> theirs = optimizer_modules(other);
    if (owned.empty() || theirs.empty()) return true;  // unknown: may share parameters
    for (const ValueDecl* m : theirs)
      if (std::find(owned.begin(), owned.end(), m) != owned.end()) return true;
    return false;
  }
  if (is_module_value_type(receiver->getType(), options_)) {
    if (owned.empty()) return true;
    const ValueDecl* module = module_variable(called_module(zero_grad));
    return !module || std::find(owned.begin(), owned.end(), module) != owned.end();
  }
  return true;  // a wrapper of the project's own: taken as clearing
}

Device Semantics::module_device(const ValueDecl* module, int depth) const {
  if (!module || depth > 2) return Device::Unknown;
  using namespace clang::ast_matchers;
  std::optional<Device> out;
  auto moves = match_in_main_file(
      cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("to", "cuda", "cpu")))).bind("move"), ctx_);
  for (const auto& node : moves) {
    auto* m = node.getNodeAs<CXXMemberCallExpr>("move");
    if (!m || !is_module_value_type(m->getImplicitObjectArgument()->getType(), options_)) continue;
    if (module_variable(called_module(m)) != module) continue;
    llvm::StringRef name = m->getMethodDecl()->getName();
    Device d = name == "cuda" ? Device::Accelerator
               : name == "cpu" ? Device::Host
               : m->getNumArgs() >= 1 && is_device_type(m->getArg(0)->getType()) ? device_named(m->getArg(0))
                                                                                    : Device::Unknown;
    if (d == Device::Unknown) continue;
    out = out ? join_device(*out, d) : d;
  }
  if (out) return *out;
  // A parameter: the modules the function's callers pass.
  auto* param = dyn_cast<ParmVarDecl>(module);
  auto* fn = param ? dyn_cast<FunctionDecl>(param->getDeclContext()) : nullptr;
  if (!fn) return Device::Unknown;
  unsigned index = param->getFunctionScopeIndex();
  for (const auto& node : match_in_main_file(callExpr().bind("call"), ctx_)) {
    auto* call = node.getNodeAs<CallExpr>("call");
    const FunctionDecl* callee = call ? call->getDirectCallee() : nullptr;
    if (!callee || callee->getCanonicalDecl() != fn->getCanonicalDecl()) continue;
    unsigned at = index + first_argument(call, callee);
    if (at >= call->getNumArgs()) continue;
    Device d = module_device(named_decl(strip(call->getArg(at))), depth + 1);
    if (d == Device::Unknown) continue;
    out = out ? join_device(*out, d) : d;
  }
  return out.value_or(Device::Unknown);
}

Device Semantics::device_at_depth(const Expr* e, int depth) const {
  e = strip(e);
  if (!e || depth > kMaxDepth || !is_tensor_type(e->getType())) return Device::Unknown;
  if (auto* ref = dyn_cast<DeclRefExpr>(e)) {
    auto* v = dyn_cast<VarDecl>(ref->getDecl());
    if (!v || isa<ParmVarDecl>(v) || !v->isLocalVarDecl()) return Device::Unknown;
    const Stmt* body = enclosing_body(ref);
    if (!body) return Device::Unknown;
    std::optional<Device> state;
    for (const Definition& def : definitions(v, body)) {
      if (!before(def.statement->getBeginLoc(), ref->getBeginLoc()) || within(ref, def.statement)) continue;
      if (def.op == "init" || def.op == "=") state = device_at_depth(def.value, depth + 1);
    }
    return state.value_or(Device::Unknown);
  }
  if (auto* cond = dyn_cast<ConditionalOperator>(e))
    return join_device(device_at_depth(cond->getTrueExpr(), depth + 1), device_at_depth(cond->getFalseExpr(), depth + 1));
  auto* call = dyn_cast<CallExpr>(e);
  if (!call) return Device::Unknown;
  if (is_module_call(call)) return module_device(module_variable(called_module(call)), 0);
  if (auto* m = dyn_cast<CXXMemberCallExpr>(call)) {
    const CXXMethodDecl* md = m->getMethodDecl();
    const Expr* object = m->getImplicitObjectArgument();
    // `scripted.forward(inputs).toTensor()`: where the scripted module runs.
    if (md && md->getIdentifier() && md->getName() == "toTensor" && is_module_call(object))
      return module_device(module_variable(called_module(object)), 0);
    if (md && md->getIdentifier() && is_tensor_type(object->getType())) {
      llvm::StringRef name = md->getName();
      if (name == "cuda") return Device::Accelerator;
      if (name == "cpu") return Device::Host;
      if (name == "to") {
        for (const Expr* arg : m->arguments()) {
          if (isa<CXXDefaultArgExpr>(arg)) continue;
          if (is_device_type(arg->getType())) {
            Device d = device_named(arg);
            if (d != Device::Unknown) return d;
          }
          if (is_tensor_type(arg->getType())) return device_at_depth(arg, depth + 1);  // to(other)
        }
        return device_at_depth(object, depth + 1);  // to(dtype)
      }
    }
  }
  const FunctionDecl* callee = call->getDirectCallee();
  const NamedDecl* owner = callee;
  if (auto* md = dyn_cast_or_null<CXXMethodDecl>(callee)) owner = md->getParent();
  if (!in_torch_namespace(owner)) return Device::Unknown;
  // A torch operation: on the device of its tensors, or of the device its
  // options name (torch::randn({n}, torch::kCUDA)).
  std::optional<Device> out;
  for (const Expr* arg : call->arguments()) {
    if (isa<CXXDefaultArgExpr>(arg)) continue;
    if (is_device_type(arg->getType())) {
      Device d = device_named(arg);
      if (d != Device::Unknown) return d;
    }
  }
  std::vector<const Expr*> operands;
  if (auto* m = dyn_cast<CXXMemberCallExpr>(call)) tensor_operands(m->getImplicitObjectArgument(), operands);
  for (const Expr* arg : call->arguments()) tensor_operands(arg, operands);
  for (const Expr* o : operands) {
    Device d = device_at_depth(o, depth + 1);
    out = out ? join_device(*out, d) : d;
    if (*out == Device::Accelerator) break;
  }
  return out.value_or(Device::Unknown);
}

// --- data flow ------------------------------------------------------------------

std::vector<Semantics::Definition> Semantics::definitions(const ValueDecl* d, const Stmt* body) const {
  std::vector<Definition> out;
  if (!d || !body) return out;
  DefinitionFinder f(d, out);
  f.TraverseStmt(const_cast<Stmt*>(body));
  std::stable_sort(out.begin(), out.end(), [&](const Definition& a, const Definition& b) {
    return before(a.statement->getBeginLoc(), b.statement->getBeginLoc());
  });
  return out;
}

bool Semantics::mentions(const Stmt* e, const ValueDecl* d, llvm::function_ref<bool(const Stmt*)> skip) {
  if (!e) return false;
  MentionFinder f(d, skip);
  f.TraverseStmt(const_cast<Stmt*>(e));
  return f.found;
}

std::string Semantics::text(const Expr* e) const { return e ? text(e->getSourceRange()) : std::string(); }

std::string Semantics::text(SourceRange r) const {
  const SourceManager& sm = sources();
  CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(r), sm, ctx_.getLangOpts());
  if (range.isInvalid()) return {};
  return Lexer::getSourceText(range, sm, ctx_.getLangOpts()).str();
}

}  // namespace torchleak::cpp
