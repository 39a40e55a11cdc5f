// TL001 accumulate-undetached: `total += loss` inside a loop, where `loss`
// carries autograd history and `total` outlives the iteration.
//
// A finding needs all of:
//   - an accumulation: `total += v`, `total -= v`, `total = total + v`,
//     `total = v + total`, `total = total - v`, also into a subscript
//     (`totals["kl"] += v`) or an attribute (`self.total += v`), or in place
//     (`total.add_(v)`, `total.sub_(v)`);
//   - grad enabled at the statement, and `v` Attached (Unknown never reports);
//   - the accumulator outlives an iteration that is a step over data: it is
//     bound before the loop and not started afresh inside it, and one of the
//     loops it survives iterates a data loader or steps an optimizer. Loops
//     over layers, heads or time steps (a forward pass, BPTT) are not steps.
//     In a function with no loop of its own, the total is an attribute of
//     an object whose method a step loop calls (`meter.update(loss)`), or a
//     tensor parameter added into in place that a step loop of the file
//     passes in from outside the loop (`step(batch, epoch_sum)`);
//   - the accumulator never reaches backward(): gradient accumulation and a
//     loss summed from parts are what backward() is meant to walk.
// List concatenation (`history += [loss]`, `history = history + [loss]`)
// stores rather than accumulates: TL002 reports it.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

class AccumulateUndetached final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    // What is decided per accumulator, not per accumulation: asked once,
    // however many times the same total is added to.
    std::map<std::pair<std::string, int>, bool> survives;  // (name, loop)
    std::map<std::pair<std::string, int>, Accumulator> accumulators;  // (name, function)
    for (const Binding& b : m.bindings()) {
      if (b.loop < 0) {
        // A method of another object, called once per step: the object's
        // attribute is the total (`meter.update(loss)` adding into
        // `self.total`).
        if (TSNode added = accumulated_value(m, b); !is_null(added) && accumulated_per_step(m, b, added))
          report(ctx, b.statement, b.target, added, Accumulator{});
        continue;
      }
      TSNode added = accumulated_value(m, b);
      if (is_null(added) || is_list_concatenation(m, b, added)) continue;
      if (m.grad_state(b.start) != GradState::Enabled) continue;
      // The value engine follows what provenance alone does not: a helper's
      // or a method's return, a dict's values through `.items()`.
      if (!m.carries_history(added)) continue;
      auto [s, fresh_s] = survives.try_emplace({b.name, b.loop});
      if (fresh_s) s->second = survives_step(m, b.name, b.loop);
      if (!s->second) continue;
      auto [a, fresh_a] = accumulators.try_emplace({b.name, b.function});
      if (fresh_a) {
        a->second.feeds_backward = m.feeds_backward(b.name, b.function);
        a->second.private_total = private_to_function(m, b);
        a->second.number_total = number_total(m, b);
      }
      if (a->second.feeds_backward) continue;
      report(ctx, b.statement, b.target, added, a->second);
    }
    for (const Call& c : m.calls()) {
      if ((c.method != "add_" && c.method != "sub_") || is_null(c.receiver)) continue;
      TSNode added = m.positional_argument(c, 0);
      if (is_null(added) || m.grad_state(start_byte(c.node)) != GradState::Enabled) continue;
      TSNode receiver = unparenthesize(c.receiver);
      Kind rk = kind_of(receiver);
      if (rk != Kind::Identifier && rk != Kind::Attribute) continue;
      std::string name = m.qualify(receiver);
      if (name.empty() || m.value(receiver).kind == ValueKind::Module) continue;
      if (m.feeds_backward(name, c.function)) continue;
      if (in_place_per_step(m, c, name, added)) report(ctx, c.node, receiver, added, Accumulator{});
    }
  }

 private:
  struct Accumulator {
    bool feeds_backward = false;
    bool private_total = false;  // private_to_function
    bool number_total = false;
  };

  // The value added into the accumulator by `total += v`, `total = total + v`
  // or `total = v + total`; a null node for any other binding.
  static TSNode accumulated_value(const Model& m, const Binding& b) {
    bool augmented = !b.op.empty();
    if (augmented) return b.op == "+=" || b.op == "-=" ? b.value : TSNode{};
    if ((b.kind != BindingKind::Assign && b.kind != BindingKind::SubscriptStore) || b.element >= 0) return TSNode{};
    TSNode v = unparenthesize(b.value);
    if (kind_of(v) != Kind::BinaryOperator) return TSNode{};
    std::string_view op = m.text(field(v, "operator"));
    if (op != "+" && op != "-") return TSNode{};
    TSNode left = unparenthesize(field(v, "left")), right = unparenthesize(field(v, "right"));
    std::string_view target = m.text(unparenthesize(b.target));
    if (m.text(left) == target) return right;
    if (op == "+" && m.text(right) == target) return left;
    return TSNode{};
  }

  // Whether `total.add_(v)` adds history across steps: in a loop that the
  // total survives as a step over data, or, outside any loop, into a
  // parameter of the function that a call in a step loop of the file fills
  // with a total bound before that loop (`self._step(batch, opt,
  // epoch_sum)`), the value the call adds carrying history.
  static bool in_place_per_step(const Model& m, const Call& c, const std::string& name, TSNode added) {
    if (c.loop >= 0) return m.carries_history(added) && survives_step(m, name, c.loop);
    if (c.function < 0) return false;
    const Function& f = m.functions()[c.function];
    auto param = std::find(f.params.begin(), f.params.end(), name);
    const Binding* reaching = m.reaching(name, start_byte(c.node), c.function);
    if (param == f.params.end() || !reaching || reaching->kind != BindingKind::Parameter) return false;
    size_t index = static_cast<size_t>(param - f.params.begin());
    bool attached = m.carries_history(added);
    for (const Call* site : m.call_sites(f)) {
      if (site->loop < 0) continue;
      TSNode arg = unparenthesize(m.argument_for(*site, f, index, f.cls >= 0 && !site->method.empty()));
      if (is_null(arg) || (kind_of(arg) != Kind::Identifier && kind_of(arg) != Kind::Attribute)) continue;
      Provenance here = m.value_in_call(added, *site).grad;
      if (here == Provenance::Detached || (here == Provenance::Unknown && !attached)) continue;
      std::string total = m.qualify(arg);
      if (total.empty() || m.feeds_backward(total, site->function)) continue;
      if (survives_step(m, total, site->loop)) return true;
    }
    return false;
  }

  // Whether `self.total += v` in a method accumulates across steps: some
  // call of the method on an instance (`meter.update(loss)`) runs in a loop
  // that the instance survives as a step over data, and no other method
  // called on it in that loop starts the attribute afresh. The value is
  // followed from the arguments of the calls in the file.
  static bool accumulated_per_step(const Model& m, const Binding& b, TSNode added) {
    if (b.function < 0 || !b.name.starts_with("self.") || b.kind == BindingKind::SubscriptStore) return false;
    const Function& f = m.functions()[b.function];
    if (f.cls < 0 || f.name == "__init__" || is_list_concatenation(m, b, added)) return false;
    if (m.grad_state(b.start) != GradState::Enabled || m.feeds_backward(b.name, b.function)) return false;
    bool attached = m.carries_history(added);
    std::string_view attribute = std::string_view(b.name).substr(5);
    for (const Call* c : m.call_sites(f)) {
      TSNode receiver = unparenthesize(c->receiver);
      if (c->loop < 0 || m.text(receiver) == "self") continue;
      // What this call adds: `meter.update(loss.detach())` adds no history.
      Provenance here = m.value_in_call(added, *c).grad;
      if (here == Provenance::Detached || (here == Provenance::Unknown && !attached)) continue;
      std::string_view instance = m.text(receiver);
      if (!survives_step(m, instance, c->loop) || reset_by_method(m, f.cls, attribute, instance, c->loop)) continue;
      return true;
    }
    return false;
  }

  // Whether the loop calls a method on `instance` that assigns
  // `self.<attribute>` afresh (`meter.reset()`).
  static bool reset_by_method(const Model& m, int cls, std::string_view attribute, std::string_view instance,
                              int loop) {
    std::string name = "self." + std::string(attribute);
    for (const Call& c : m.calls()) {
      if (c.method.empty() || !m.loop_contains(loop, start_byte(c.node)) || m.text(unparenthesize(c.receiver)) != instance)
        continue;
      for (int method : m.classes()[static_cast<size_t>(cls)].methods) {
        if (m.functions()[method].name != c.method) continue;
        for (const Binding* other : m.bindings_of(name, method))
          if (other->kind == BindingKind::Assign && !is_null(other->value) && !m.mentions(other->value, name)) return true;
      }
    }
    return false;
  }

  // `history += [loss]` or `history += losses` on a list extends it.
  static bool is_list_concatenation(const Model& m, const Binding& b, TSNode added) {
    Kind k = kind_of(unparenthesize(added));
    if (k == Kind::List || k == Kind::Tuple || k == Kind::ListComprehension) return true;
    return b.kind != BindingKind::SubscriptStore && m.holds_list(b.name, b.start, b.function);
  }

  static void report(CheckContext& ctx, TSNode statement, TSNode target, TSNode added, const Accumulator& total) {
    const Model& m = ctx.model();
    std::string value = code_snippet(m, added);
    std::string accumulator = code_snippet(m, unparenthesize(target));
    Diagnostic d = ctx.diagnostic(
        statement,
        fmt::format(fmt::runtime(messages::TL001::accumulates), fmt::arg("total", accumulator), fmt::arg("value", value)));
    // A loss is a scalar: `.item()` is the idiom, and the fix when the total
    // is a Python number that is never used as a tensor. Otherwise `.detach()`,
    // which keeps the accumulator's type and device: `.item()` would turn a
    // tensor total into a float and fail on a non-scalar.
    TSNode part = attached_operand(m, added);
    std::string detached = code_snippet(with_suffix(m, added, part, ".detach()"), 60);
    bool loss = looks_like_loss(m, part);
    d.help = loss ? fmt::format("accumulate `{}` (a Python number) or `{}`",
                                code_snippet(with_suffix(m, added, part, ".item()"), 60), detached)
                  : fmt::format("accumulate `{}`", detached);
    bool private_total = total.private_total;
    if (loss && private_total && total.number_total) {
      d.fix = Fix{fmt::format("Replace `{0}` with `{0}.item()`", code_snippet(m, part)), FixSafety::Safe,
                  append_call_edits(m, part, ".item()")};
    } else {
      d.fix = Fix{fmt::format("Replace `{0}` with `{0}.detach()`", code_snippet(m, part)),
                  private_total ? FixSafety::Safe : FixSafety::Unsafe, append_call_edits(m, part, ".detach()")};
    }
    ctx.report(std::move(d));
  }

  // Whether the accumulator starts as a number literal (`total = 0.0`) and is
  // never the receiver of a method call (`total.item()`, `total.cpu()`):
  // adding `.item()` then keeps every later use of it working. The same for
  // every accumulation `b` of the name: the other accumulations are skipped.
  static bool number_total(const Model& m, const Binding& b) {
    bool started = false;
    for (const Binding* other : m.bindings_of(b.name, b.function)) {
      if (other == &b || !other->op.empty()) continue;
      if (!is_null(accumulated_value(m, *other))) continue;  // another `total = total + x`
      Kind k = kind_of(unparenthesize(other->value));
      if (other->kind != BindingKind::Assign || other->element >= 0 || (k != Kind::Integer && k != Kind::Float))
        return false;
      started = true;
    }
    if (!started) return false;
    for (const Call& c : m.calls())
      if (c.function == b.function && !is_null(c.receiver) && m.text(unparenthesize(c.receiver)) == b.name)
        return false;
    return true;
  }

  // `.detach()` changes nothing but the graph: values, dtype and device stay.
  // It changes behaviour only for a reader that differentiates through the
  // accumulator, and the check has followed every reader in this file
  // (feeds_backward). A local name, returned or not, or a script's
  // module-level name has no other reader worth the name: a caller
  // backpropagating through a sum taken across optimizer steps would fail
  // anyway. An attribute or a `global` is shared state, read by code in other
  // files by design: the fix is unsafe there.
  static bool private_to_function(const Model& m, const Binding& b) {
    if (b.name.find('.') != std::string::npos) return false;
    for (const Binding* other : m.bindings_of(b.name, b.function))
      if (other->kind == BindingKind::Global) return false;
    return true;
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(AccumulateUndetached, "TL001")

}  // namespace torchleak::python
