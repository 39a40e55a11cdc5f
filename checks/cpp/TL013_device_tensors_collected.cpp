// TL013 device-tensors-collected: as in Python, an evaluation loop that
// keeps every batch's accelerator tensors in a container that outlives it
// (`outputs.push_back(logits)` on a std::vector declared before the loop),
// with grad disabled at the store or a value without history: device memory
// grows with the dataset, not the batch. Silent for values moved to the host
// (`.cpu()`, `.to(torch::kCPU)`), for scalars (`.item<float>()`) and
// one-element reductions (`.sum()`, `.mean()` without arguments), for
// values without evidence of a device, and for containers declared in the
// loop or cleared in it.
#include <fmt/format.h>

#include "cpp/check.h"
#include "checks/cpp/fixes.h"
#include "checks/cpp/semantics.h"
#include "rule_messages.h"

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

class DeviceTensorsCollected final : public Check {
 public:
  void register_matchers(MatchFinder& finder, MatchFinder::MatchCallback* callback) const override {
    finder.addMatcher(
        cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("push_back", "emplace_back")))).bind("store"), callback);
  }

  void run(const MatchFinder::MatchResult& result, const Options& options, Sink& sink) const override {
    auto* store = result.Nodes.getNodeAs<CXXMemberCallExpr>("store");
    if (!store || store->getNumArgs() != 1) return;
    const Expr* container = store->getImplicitObjectArgument();
    if (!holds_tensors(container->getType())) return;
    const Expr* value = store->getArg(0);
    if (!is_tensor_type(strip(value)->getType()) || one_element(value)) return;
    const ValueDecl* kept = named_decl(container);
    if (!kept) return;
    Semantics sem(*result.Context, options);
    // A loop over data (a data loader, optimizer steps, or a module run on
    // every iteration) whose iterations the container outlives, and that
    // does not empty it.
    const Stmt* data_loop = nullptr;
    for (const Stmt* l = sem.enclosing_loop(store); l && !data_loop; l = sem.enclosing_loop(l))
      if (sem.outlives_iteration(kept, l) && sem.is_data_loop(l)) data_loop = l;
    if (!data_loop || sem.emptied_in(kept, data_loop)) return;
    // Without history: TL002 covers values that keep their graph.
    if (sem.grad_state(store) != GradState::Disabled && sem.provenance(value) != Provenance::Detached) return;
    if (sem.device(value) != Device::Accelerator) return;

    std::string text = sem.text(value);
    std::string shown = is_primary(value) ? text : "(" + text + ")";
    Finding f;
    f.range = value->getSourceRange();
    f.message = fmt::format(fmt::runtime(messages::TL013::collects), fmt::arg("container", sem.text(container)),
                            fmt::arg("value", text));
    f.help = fmt::format("store `{0}.cpu()`, or reduce each batch (`.item<float>()`, a running count) inside the loop",
                         shown);
    // Unsafe, as in Python: code after the loop that combines the collected
    // tensors with tensors on the device now mixes devices and fails.
    f.fixes = append_call_fixes(value, *result.Context, ".cpu()");
    if (!f.fixes.empty()) f.fix_title = fmt::format("Replace `{}` with `{}.cpu()`", text, shown);
    f.fix_safety = FixSafety::Unsafe;
    sink.report(result, std::move(f));
  }

 private:
  // `.sum()`, `.mean()`, `.max()`, `.norm()` without arguments: one element,
  // often kept on the device on purpose.
  static bool one_element(const Expr* e) {
    auto* m = dyn_cast<CXXMemberCallExpr>(strip(e));
    const CXXMethodDecl* md = m ? m->getMethodDecl() : nullptr;
    if (!md || !md->getIdentifier()) return false;
    llvm::StringRef name = md->getName();
    if (name != "sum" && name != "mean" && name != "max" && name != "min" && name != "norm" && name != "prod")
      return false;
    for (const Expr* arg : m->arguments())
      if (!isa<CXXDefaultArgExpr>(arg)) return false;
    return true;
  }
};

}  // namespace

TORCHLEAK_CPP_CHECK(DeviceTensorsCollected, "TL013", "device-tensors-collected")

}  // namespace torchleak::cpp
