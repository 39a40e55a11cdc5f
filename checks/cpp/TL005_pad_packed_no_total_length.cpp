// TL005 pad-packed-no-total-length: torch::nn::utils::rnn::pad_packed_sequence
// called without its total_length argument in a module that the same
// translation unit runs through torch::nn::parallel::data_parallel. Each
// replica pads its slice of the batch to the slice's own longest sequence, so
// the outputs data_parallel gathers disagree in length.
//
// The call counts when it is in the forward of the wrapped module class (or
// of a base class, or of a submodule the wrapped module holds), or in a
// method those forwards call on `this`.
#include <fmt/format.h>

#include <clang/Lex/Lexer.h>

#include <optional>
#include <set>

#include "cpp/check.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

constexpr const char* kPadPacked = "torch::nn::utils::rnn::pad_packed_sequence";
constexpr const char* kPackPadded = "torch::nn::utils::rnn::pack_padded_sequence";
constexpr const char* kDataParallel = "torch::nn::parallel::data_parallel";
constexpr unsigned kTotalLength = 3;  // pad_packed_sequence(sequence, batch_first, padding_value, total_length)
constexpr int kMaxDepth = 8;

// The module class a value runs: `TaggerImpl` for a TaggerImpl, a
// std::shared_ptr<TaggerImpl> or a Tagger (TORCH_MODULE's ModuleHolder).
const CXXRecordDecl* module_impl(QualType type, int depth = 0) {
  const CXXRecordDecl* r = record_of(type);
  if (!r || depth > kMaxDepth) return nullptr;
  if (is_module_class(r)) return r;
  if (auto* spec = dyn_cast<ClassTemplateSpecializationDecl>(r)) {
    std::string name = spec->getQualifiedNameAsString();
    if ((name == "torch::nn::ModuleHolder" || name == "std::shared_ptr") && spec->getTemplateArgs().size() >= 1 &&
        spec->getTemplateArgs()[0].getKind() == TemplateArgument::Type) {
      const CXXRecordDecl* impl = record_of(spec->getTemplateArgs()[0].getAsType());
      return is_module_class(impl) ? impl : nullptr;
    }
  }
  if (!r->hasDefinition()) return nullptr;
  for (const CXXBaseSpecifier& base : r->getDefinition()->bases())
    if (const CXXRecordDecl* impl = module_impl(base.getType(), depth + 1)) return impl;
  return nullptr;
}

struct Wrap {
  const CallExpr* call;
  const CXXRecordDecl* wrapped;
};

class PadPackedNoTotalLength final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(callExpr(callee(functionDecl(hasName(std::string("::") + kPadPacked)))).bind("pad"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* pad = result.Nodes.getNodeAs<CallExpr>("pad");
    if (!pad || !lacks_total_length(pad)) return;
    Semantics sem(*result.Context, options);
    auto* method = dyn_cast_or_null<CXXMethodDecl>(sem.enclosing_function(pad));
    if (!method || !analyzed_body(method) || !is_module_class(method->getParent())) return;
    std::optional<Wrap> wrap = find_wrap(sem, method);
    if (!wrap) return;
    std::string where = method->getQualifiedNameAsString();
    std::string cls = method->getParent()->getNameAsString();
    std::string wrapped = wrap->wrapped == method->getParent()
                              ? fmt::format("`{}` is", cls)
                              : fmt::format("`{}`, which {} `{}`, is", wrap->wrapped->getNameAsString(),
                                            wrap->wrapped->isDerivedFrom(method->getParent()) ? "derives from" : "holds",
                                            cls);
    const SourceManager& sm = sem.sources();
    unsigned line = sm.getExpansionLineNumber(wrap->call->getBeginLoc());
    Finding f;
    f.range = pad->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL005::replicated), fmt::arg("function", where),
                            fmt::arg("module", wrapped), fmt::arg("wrapper", sem.text(wrap->call->getCallee())),
                            fmt::arg("location", fmt::format("line {}", line)));
    f.help = "pass `total_length` the padded length of the input given to `pack_padded_sequence` (`padded.size(1)` "
             "when it is batch-first, else `padded.size(0)`)";
    add_fix(sem, pad, method, f);
    sink.report(result, std::move(f));
  }

 private:
  static bool lacks_total_length(const CallExpr* pad) {
    if (pad->getNumArgs() <= kTotalLength) return false;  // not the signature this check knows
    return isa<CXXDefaultArgExpr>(pad->getArg(kTotalLength)->IgnoreImplicit());
  }

  // --- which module classes a wrap runs ------------------------------------------

  // The data_parallel calls of the main file (and the configuration's in-house
  // wrappers), each with the module class it runs.
  static std::vector<Wrap> wraps_in_main_file(const Semantics& sem) {
    std::vector<Wrap> out;
    ASTContext& ctx = sem.context();
    const SourceManager& sm = sem.sources();
    auto matcher = decl(forEachDescendant(callExpr(callee(functionDecl().bind("fn"))).bind("call")));
    for (const Decl* d : ctx.getTranslationUnitDecl()->decls()) {
      if (!sm.isInMainFile(sm.getExpansionLoc(d->getLocation()))) continue;
      for (const auto& node : match(matcher, *d, ctx)) {
        auto* call = node.getNodeAs<CallExpr>("call");
        auto* fn = node.getNodeAs<FunctionDecl>("fn");
        if (!call || !fn || !is_wrapper(fn, sem.options())) continue;
        for (const Expr* arg : call->arguments()) {
          if (const CXXRecordDecl* impl = module_impl(strip(arg)->getType())) {
            out.push_back({call, impl});
            break;
          }
        }
      }
    }
    return out;
  }

  static bool is_wrapper(const FunctionDecl* fn, const Options& options) {
    std::string q = fn->getQualifiedNameAsString();
    if (q == kDataParallel) return true;
    for (const std::string& extra : options.extra_data_parallel)
      if (extra == q || (fn->getIdentifier() && extra == fn->getName())) return true;
    return false;
  }

  // The first wrap whose replicas run `method`.
  static std::optional<Wrap> find_wrap(const Semantics& sem, const CXXMethodDecl* method) {
    for (const Wrap& w : wraps_in_main_file(sem)) {
      std::set<const CXXRecordDecl*> classes;
      run_classes(w.wrapped, classes, 0);
      std::set<const FunctionDecl*> reached;
      for (const CXXRecordDecl* c : classes)
        if (const CXXMethodDecl* forward = find_forward(c)) reach(forward, c, reached, 0);
      if (reached.count(method->getCanonicalDecl())) return w;
    }
    return std::nullopt;
  }

  // The wrapped class and, transitively, the module classes of its (and its
  // bases') fields: every forward a replica may run.
  static void run_classes(const CXXRecordDecl* cls, std::set<const CXXRecordDecl*>& out, int depth) {
    if (!cls || depth > kMaxDepth || !cls->hasDefinition() || !out.insert(cls->getDefinition()).second) return;
    cls = cls->getDefinition();
    for (const FieldDecl* field : cls->fields())
      if (const CXXRecordDecl* held = module_impl(field->getType())) run_classes(held, out, depth + 1);
    for (const CXXBaseSpecifier& base : cls->bases()) {
      const CXXRecordDecl* b = record_of(base.getType());
      if (b && is_module_class(b) && b->getQualifiedNameAsString() != "torch::nn::Module")
        for (const FieldDecl* field : b->getDefinition() ? b->getDefinition()->fields() : b->fields())
          if (const CXXRecordDecl* held = module_impl(field->getType())) run_classes(held, out, depth + 1);
    }
  }

  // The forward a call through `cls` runs: its own, or the nearest base's.
  static const CXXMethodDecl* find_forward(const CXXRecordDecl* cls, int depth = 0) {
    if (!cls || depth > kMaxDepth || !cls->hasDefinition()) return nullptr;
    cls = cls->getDefinition();
    for (const CXXMethodDecl* m : cls->methods())
      if (m->getIdentifier() && m->getName() == "forward") return m;
    for (const CXXBaseSpecifier& base : cls->bases())
      if (const CXXMethodDecl* m = find_forward(record_of(base.getType()), depth + 1)) return m;
    return nullptr;
  }

  // `method` and the methods it calls on `this`, transitively, resolved in
  // the class hierarchy of `cls`.
  static void reach(const CXXMethodDecl* method, const CXXRecordDecl* cls, std::set<const FunctionDecl*>& out,
                    int depth) {
    if (!method || depth > kMaxDepth || !out.insert(method->getCanonicalDecl()).second) return;
    const FunctionDecl* definition = nullptr;
    if (!method->hasBody(definition) || !definition->getBody()) return;
    ASTContext& ctx = method->getASTContext();
    for (const auto& node : match(findAll(cxxMemberCallExpr(on(cxxThisExpr())).bind("m")), *definition->getBody(), ctx)) {
      auto* call = node.getNodeAs<CXXMemberCallExpr>("m");
      const CXXMethodDecl* callee = call ? call->getMethodDecl() : nullptr;
      if (!callee) continue;
      // A virtual helper runs the override of the wrapped class.
      if (callee->isVirtual() && cls->hasDefinition())
        if (const CXXMethodDecl* o = callee->getCorrespondingMethodInClass(cls->getDefinition())) callee = o;
      reach(callee, cls, out, depth + 1);
    }
  }

  // --- the fix -------------------------------------------------------------------

  // `/*total_length=*/tokens.size(1)` when the same method packed a named
  // tensor before the call, with a constant batch_first, and did not rebind it
  // in between. Unsafe, as in Python: on one device the program without it
  // is correct, and code that reads every time step (a mean over time)
  // computes another value once the output is padded further.
  static void add_fix(const Semantics& sem, const CallExpr* pad, const CXXMethodDecl* method, Finding& f) {
    const Stmt* body = method->getBody();
    if (!body) return;
    const CallExpr* pack = nullptr;
    for (const auto& node : match(findAll(callExpr(callee(functionDecl(hasName(std::string("::") + kPackPadded))))
                                              .bind("pack")),
                                  *body, sem.context())) {
      auto* c = node.getNodeAs<CallExpr>("pack");
      if (c && c->getNumArgs() >= 3 && sem.before(c->getBeginLoc(), pad->getBeginLoc())) pack = c;
    }
    if (!pack) return;
    auto* ref = dyn_cast<DeclRefExpr>(strip(pack->getArg(0)));
    auto* padded = ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
    if (!padded || !is_tensor_type(padded->getType())) return;
    for (const Semantics::Definition& def : sem.definitions(padded, body))
      if (!sem.before(def.statement->getEndLoc(), pack->getBeginLoc()) &&
          sem.before(def.statement->getBeginLoc(), pad->getBeginLoc()))
        return;  // rebound between packing and padding
    std::optional<bool> batch_first = constant_bool(pack->getArg(2), sem.context());
    if (!batch_first) return;
    std::string length = fmt::format("{}.size({})", padded->getName().str(), *batch_first ? 1 : 0);
    f.help = fmt::format("pass `/*total_length=*/{}`", length);
    // Insert the defaulted arguments before total_length, as they are.
    unsigned written = 0;
    while (written < pad->getNumArgs() && !isa<CXXDefaultArgExpr>(pad->getArg(written)->IgnoreImplicit())) ++written;
    if (written == 0 || written > kTotalLength) return;
    std::string text;
    if (written <= 1) text += ", /*batch_first=*/false";
    if (written <= 2) text += ", /*padding_value=*/0.0";
    text += fmt::format(", /*total_length=*/{}", length);
    const ASTContext& ctx = sem.context();
    SourceLocation end = pad->getArg(written - 1)->getEndLoc();
    if (end.isMacroID()) return;
    SourceLocation after = Lexer::getLocForEndOfToken(end, 0, ctx.getSourceManager(), ctx.getLangOpts());
    if (after.isInvalid()) return;
    f.fix_title = fmt::format("Pad to `{}` with `total_length`", length);
    f.fixes.push_back(FixItHint::CreateInsertion(after, text));
    f.fix_safety = FixSafety::Unsafe;
  }

  static std::optional<bool> constant_bool(const Expr* e, const ASTContext& ctx) {
    if (auto* d = dyn_cast<CXXDefaultArgExpr>(e->IgnoreImplicit())) e = d->getExpr();
    if (e->isValueDependent()) return std::nullopt;
    bool value = false;
    if (!e->EvaluateAsBooleanCondition(value, ctx)) return std::nullopt;
    return value;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(PadPackedNoTotalLength, "TL005", "pad-packed-no-total-length")

}  // namespace torchleak::cpp
