// TL001 accumulate-undetached: `total += loss` inside a loop, where `loss`
// carries autograd history and `total` outlives the iteration.
#include <fmt/format.h>

#include "checks/python/check.h"

namespace torchleak::python {

namespace {

class AccumulateUndetached final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    for (const Binding& b : m.bindings()) {
      TSNode added = accumulated_value(m, b);
      if (is_null(added) || b.loop < 0) continue;
      if (m.grad_state(b.start) != GradState::Enabled) continue;
      if (m.provenance(added) != Provenance::Attached) continue;
      if (!outlives_iteration(m, b)) continue;
      if (m.is_backward_subject(b.name, b.function)) continue;
      report(ctx, b, added);
    }
  }

 private:
  // The value added into the accumulator by `total += v`, `total = total + v`
  // or `total = v + total`; a null node for any other binding.
  static TSNode accumulated_value(const Model& m, const Binding& b) {
    if (b.kind == BindingKind::AugAssign) return b.op == "+=" || b.op == "-=" ? b.value : TSNode{};
    if (b.kind != BindingKind::Assign || b.element >= 0) return TSNode{};
    TSNode v = unparenthesize(b.value);
    if (kind_of(v) != Kind::BinaryOperator) return TSNode{};
    std::string_view op = m.text(field(v, "operator"));
    if (op != "+" && op != "-") return TSNode{};
    TSNode left = unparenthesize(field(v, "left")), right = unparenthesize(field(v, "right"));
    if (m.qualify(left) == b.name) return right;
    if (op == "+" && m.qualify(right) == b.name) return left;
    return TSNode{};
  }

  // The accumulator is bound before the loop (or is an attribute or a global)
  // and is not reset inside it.
  static bool outlives_iteration(const Model& m, const Binding& b) {
    if (!m.bound_before_loop(b.name, b.loop)) return false;
    return !m.rebound_in_loop(b.name, b.loop, b.kind == BindingKind::Assign ? &b : nullptr);
  }

  static void report(CheckContext& ctx, const Binding& b, TSNode added) {
    const Model& m = ctx.model();
    std::string value(m.text(added));
    Diagnostic d = ctx.diagnostic(
        b.statement, fmt::format("`{}` accumulates `{}`, which carries autograd history: every iteration's "
                                 "graph stays alive as long as `{}` does",
                                 b.name, value, b.name));
    // A loss is a scalar: .item() turns it into a Python number. Anything
    // else keeps its shape with .detach(). Both are safe: the accumulator is
    // never backpropagated through (checked above).
    bool scalar = value.find("loss") != std::string::npos ||
                  (kind_of(added) == Kind::Call && m.is_loss_function(field(added, "function")));
    std::string suffix = scalar ? ".item()" : ".detach()";
    d.help = fmt::format("accumulate `{}{}` instead", kind_of(added) == Kind::Identifier ||
                                                          kind_of(added) == Kind::Attribute
                                                      ? value
                                                      : "(" + value + ")",
                         suffix);
    d.fix = Fix{fmt::format("Use `{}` on the accumulated value", suffix), FixSafety::Safe,
                append_call_edits(m, added, suffix)};
    ctx.report(std::move(d));
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(AccumulateUndetached, "TL001")

}  // namespace torchleak::python
