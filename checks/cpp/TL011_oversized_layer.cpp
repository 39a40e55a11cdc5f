// TL011 oversized-layer: a layer whose parameters alone, with their
// gradients and Adam's two moment buffers (4 fp32 copies), need more memory
// than the configured threshold (Options::oversized_layer_bytes), as for
// Python and with the same message.
//
// Layers: torch::nn::Linear(in, out), torch::nn::Embedding(n, d) and
// torch::nn::Conv1d/2d/3d(in, out, kernel), and their options
// (LinearOptions, EmbeddingOptions, Conv1d/2d/3dOptions) with the setters
// chained on them (`.bias(false)`, `.groups(g)`). A size counts when it is an
// integer constant expression (a literal, a constexpr or const variable,
// arithmetic on them), evaluated by Clang; anything else makes the layer
// unknown: silent. A `.bias(...)` that is not constant counts as false, so
// the estimate stays a lower bound.
#include <clang/Lex/Lexer.h>
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "cpp/check.h"
#include "checks/cpp/semantics.h"
#include "checks/size_format.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

// Sizes beyond 2^40 are not layers anyone builds; the bound keeps every
// product below in 128 bits.
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxKernelSide = 4096;
constexpr uint64_t kTrainingCopies = 4;  // weights, gradients, Adam's exp_avg and exp_avg_sq
constexpr uint64_t kFp32 = 4;
__extension__ typedef unsigned __int128 U128;

enum class Layer { Linear, Embedding, Conv };

struct LayerKind {
  const char* record;  // qualified name of the class constructed
  Layer layer;
  bool options;  // a ...Options class, whose setters may be chained
  int dims;      // convolutions: 1, 2 or 3; 0 for ConvOptions (its template argument)
};

constexpr LayerKind kLayers[] = {
    {"torch::nn::Linear", Layer::Linear, false, 0},
    {"torch::nn::LinearOptions", Layer::Linear, true, 0},
    {"torch::nn::Embedding", Layer::Embedding, false, 0},
    {"torch::nn::EmbeddingOptions", Layer::Embedding, true, 0},
    {"torch::nn::Conv1d", Layer::Conv, false, 1},
    {"torch::nn::Conv2d", Layer::Conv, false, 2},
    {"torch::nn::Conv3d", Layer::Conv, false, 3},
    {"torch::nn::ConvOptions", Layer::Conv, true, 0},
};

// The setters chained on an options object, in order: `.bias(false)`.
struct Setter {
  std::string name;
  const Expr* value;
};

class OversizedLayer final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(
        cxxConstructExpr(hasDeclaration(cxxConstructorDecl(ofClass(cxxRecordDecl(hasAnyName(
                             "::torch::nn::Linear", "::torch::nn::LinearOptions", "::torch::nn::Embedding",
                             "::torch::nn::EmbeddingOptions", "::torch::nn::Conv1d", "::torch::nn::Conv2d",
                             "::torch::nn::Conv3d", "::torch::nn::ConvOptions"))))),
                         unless(isInTemplateInstantiation()))
            .bind("layer"),
        callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* construct = result.Nodes.getNodeAs<CXXConstructExpr>("layer");
    if (!construct || construct->isValueDependent()) return;
    const CXXRecordDecl* record = construct->getConstructor()->getParent();
    const LayerKind* kind = layer_kind(record);
    if (!kind) return;
    ASTContext& ctx = *result.Context;
    std::vector<Setter> setters;
    if (kind->options) setters = chained_setters(ctx, construct);
    std::optional<Estimate> e = estimate(ctx, construct, record, *kind, setters);
    if (!e) return;
    uint64_t fp32 = 0, training = 0;
    if (__builtin_mul_overflow(e->parameters, kFp32, &fp32) ||
        __builtin_mul_overflow(fp32, kTrainingCopies, &training))
      return;
    if (training <= options.oversized_layer_bytes) return;
    Finding f;
    f.range = construct->getSourceRange();
    f.message = fmt::format(
        fmt::runtime(messages::TL011::oversized),
        fmt::arg("layer", fmt::format("{}({}){}", written_type(ctx, construct), e->arguments, e->setters)),
        fmt::arg("parameters", size_format::parameter_count(e->parameters)),
        fmt::arg("weights", size_format::bytes(fp32)), fmt::arg("training", size_format::bytes(training)));
    f.help = fmt::format(fmt::runtime(messages::TL011::help),
                         fmt::arg("threshold", size_format::bytes(options.oversized_layer_bytes)));
    sink.report(result, std::move(f));
  }

 private:
  struct Estimate {
    uint64_t parameters = 0;
    std::string arguments;  // the folded arguments as the message shows them
    std::string setters;    // ".bias(false)", ...
  };

  static const LayerKind* layer_kind(const CXXRecordDecl* record) {
    if (!record) return nullptr;
    std::string name = record->getQualifiedNameAsString();
    for (const LayerKind& k : kLayers)
      if (name == k.record) return &k;
    return nullptr;
  }

  // ConvOptions<D>'s D.
  static int conv_options_dims(const CXXRecordDecl* record) {
    auto* spec = dyn_cast<ClassTemplateSpecializationDecl>(record);
    if (!spec || spec->getTemplateArgs().size() < 1) return 0;
    const TemplateArgument& arg = spec->getTemplateArgs()[0];
    if (arg.getKind() != TemplateArgument::Integral) return 0;
    int64_t d = arg.getAsIntegral().getExtValue();
    return d >= 1 && d <= 3 ? static_cast<int>(d) : 0;
  }

  static const Expr* unwrap(const Expr* e) {
    for (int depth = 0; e && depth < 8; ++depth) {
      const Expr* next = strip(e)->IgnoreImplicit();
      if (next == e) break;
      e = next;
    }
    return e;
  }

  // An integer constant expression's value.
  static std::optional<int64_t> integer(ASTContext& ctx, const Expr* e) {
    e = unwrap(e);
    if (!e || e->isValueDependent() || !e->getType()->isIntegralOrEnumerationType()) return std::nullopt;
    Expr::EvalResult r;
    if (!e->EvaluateAsInt(r, ctx) || !r.Val.isInt()) return std::nullopt;
    const llvm::APSInt& v = r.Val.getInt();
    if (v.isSigned() ? !v.isSignedIntN(64) : !v.isIntN(63)) return std::nullopt;
    return v.isSigned() ? v.getSExtValue() : static_cast<int64_t>(v.getZExtValue());
  }

  static std::optional<int64_t> size(ASTContext& ctx, const Expr* e, int64_t max = kMaxSize) {
    auto v = integer(ctx, e);
    if (!v || *v <= 0 || *v > max) return std::nullopt;
    return v;
  }

  // The kernel's sides: one int (every side) or a braced list of them,
  // through ExpandingArray's constructors.
  static std::optional<std::vector<int64_t>> kernel_sides(ASTContext& ctx, const Expr* e, int depth = 0) {
    e = unwrap(e);
    if (!e || depth > 6) return std::nullopt;
    if (e->getType()->isIntegralOrEnumerationType()) {
      auto v = size(ctx, e, kMaxKernelSide);
      if (!v) return std::nullopt;
      return std::vector<int64_t>{*v};
    }
    if (auto* list = dyn_cast<CXXStdInitializerListExpr>(e)) return kernel_sides(ctx, list->getSubExpr(), depth + 1);
    if (auto* init = dyn_cast<InitListExpr>(e)) {
      if (init->getNumInits() == 1 && !init->getInit(0)->getType()->isIntegralOrEnumerationType())
        return kernel_sides(ctx, init->getInit(0), depth + 1);
      std::vector<int64_t> sides;
      for (const Expr* side : init->inits()) {
        auto v = size(ctx, side, kMaxKernelSide);
        if (!v) return std::nullopt;
        sides.push_back(*v);
      }
      return sides;
    }
    if (auto* c = dyn_cast<CXXConstructExpr>(e); c && c->getNumArgs() == 1)
      return kernel_sides(ctx, c->getArg(0), depth + 1);
    return std::nullopt;
  }

  static std::vector<Setter> chained_setters(ASTContext& ctx, const Expr* construct) {
    std::vector<Setter> out;
    const Expr* current = construct;
    for (int depth = 0; depth < 32; ++depth) {
      DynTypedNodeList parents = ctx.getParents(*current);
      if (parents.empty()) break;
      const Expr* p = parents[0].get<Expr>();
      if (!p) break;
      if (isa<MaterializeTemporaryExpr>(p) || isa<ImplicitCastExpr>(p) || isa<CXXBindTemporaryExpr>(p) ||
          isa<ParenExpr>(p)) {
        current = p;
        continue;
      }
      auto* member = dyn_cast<MemberExpr>(p);
      if (!member || member->getBase() != current) break;
      DynTypedNodeList call_parents = ctx.getParents(*member);
      auto* call = call_parents.empty() ? nullptr : call_parents[0].get<CXXMemberCallExpr>();
      if (!call || call->getCallee() != member || call->getNumArgs() != 1) break;
      out.push_back({member->getMemberDecl()->getNameAsString(), call->getArg(0)});
      current = call;
    }
    return out;
  }

  static std::optional<Estimate> estimate(ASTContext& ctx, const CXXConstructExpr* c, const CXXRecordDecl* record,
                                          const LayerKind& kind, const std::vector<Setter>& setters) {
    Estimate e;
    auto show = [&](int64_t v) { e.arguments += (e.arguments.empty() ? "" : ", ") + std::to_string(v); };
    bool bias = true;
    int64_t groups = 1;
    for (const Setter& s : setters) {
      if (s.name == "bias") {
        bool value = false;  // not constant: false, the lower bound
        const Expr* v = unwrap(s.value);
        bias = !v->isValueDependent() && v->EvaluateAsBooleanCondition(value, ctx) && value;
      } else if (s.name == "groups" && kind.layer == Layer::Conv) {
        auto g = size(ctx, s.value);
        if (!g) return std::nullopt;
        groups = *g;
      }
    }
    if (groups != 1) e.setters += fmt::format(".groups({})", groups);
    if (!bias) e.setters += ".bias(false)";
    U128 p = 0;
    switch (kind.layer) {
      case Layer::Linear: {
        if (c->getNumArgs() != 2) return std::nullopt;
        auto in = size(ctx, c->getArg(0)), out = size(ctx, c->getArg(1));
        if (!in || !out) return std::nullopt;
        show(*in), show(*out);
        p = static_cast<U128>(*in) * *out + (bias ? *out : 0);
        break;
      }
      case Layer::Embedding: {
        if (c->getNumArgs() != 2) return std::nullopt;
        auto n = size(ctx, c->getArg(0)), d = size(ctx, c->getArg(1));
        if (!n || !d) return std::nullopt;
        show(*n), show(*d);
        p = static_cast<U128>(*n) * *d;
        break;
      }
      case Layer::Conv: {
        int dims = kind.dims ? kind.dims : conv_options_dims(record);
        if (dims == 0 || c->getNumArgs() != 3) return std::nullopt;
        auto in = size(ctx, c->getArg(0)), out = size(ctx, c->getArg(1));
        auto sides = kernel_sides(ctx, c->getArg(2));
        if (!in || !out || !sides) return std::nullopt;
        if (sides->size() != 1 && sides->size() != static_cast<size_t>(dims)) return std::nullopt;
        if (*in % groups != 0) return std::nullopt;
        int64_t volume = 1;
        std::string kernel;
        for (int i = 0; i < dims; ++i) volume *= sides->size() == 1 ? sides->front() : (*sides)[i];
        for (size_t i = 0; i < sides->size(); ++i) kernel += (i ? ", " : "") + std::to_string((*sides)[i]);
        show(*in), show(*out);
        e.arguments += ", " + (sides->size() == 1 ? kernel : "{" + kernel + "}");
        p = static_cast<U128>(*in / groups) * *out * volume + (bias ? *out : 0);
        break;
      }
    }
    if (p > static_cast<U128>(UINT64_MAX / (kFp32 * kTrainingCopies))) return std::nullopt;
    e.parameters = static_cast<uint64_t>(p);
    return e;
  }

  // The class as the code names it: `torch::nn::Linear`, `Conv2dOptions`.
  static std::string written_type(ASTContext& ctx, const CXXConstructExpr* c) {
    if (auto* t = dyn_cast<CXXTemporaryObjectExpr>(c))
      if (TypeSourceInfo* info = t->getTypeSourceInfo()) {
        CharSourceRange range = CharSourceRange::getTokenRange(info->getTypeLoc().getSourceRange());
        llvm::StringRef text = Lexer::getSourceText(range, ctx.getSourceManager(), ctx.getLangOpts());
        if (!text.empty()) return text.str();
      }
    PrintingPolicy policy = ctx.getPrintingPolicy();
    policy.SuppressTagKeyword = true;
    return c->getType().getLocalUnqualifiedType().getAsString(policy);
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(OversizedLayer, "TL011", "oversized-layer")

}  // namespace torchleak::cpp
