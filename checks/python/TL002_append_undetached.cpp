// TL002 append-undetached: `losses.append(loss)` inside a loop, where `loss`
// carries autograd history and `losses` outlives the iteration.
//
// The stores it knows: `c.append(v)`, `c.extend(v)`, `c.insert(i, v)` (also
// on `c[k]`, as in `history["loss"].append(v)`), `c += [v]` and `c += v` on a
// list, `c = c + [v]`, `c[k] = v` with a key that is not a literal (a
// constant key overwrites one entry: no growth), and `c = torch.cat([c, v])`
// (stack, vstack, ...), in a loop or, for a container on `self`, in a
// function called once per training step (Lightning's training_step, a step
// helper). A finding needs, as TL001 does: an Attached value
// (each element of a tuple, list or dict display, the element expression of a
// comprehension), a container that survives a step over data, and a
// container that never reaches backward() (`torch.stack(losses).mean()
// .backward()`). Unlike TL001 the store itself may sit under no_grad: a list
// keeps a reference, and with it the graph of a value computed outside; only
// the copies into a tensor (`c[k] = v`, `torch.cat`) need grad enabled.
// The range is the stored value: it is what has to change, and what the fix
// edits.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

constexpr std::array<std::string_view, 8> kConcatenations = {"cat", "concat", "concatenate", "stack",
                                                             "vstack", "hstack", "row_stack", "column_stack"};

struct Store {
  std::string container;  // the name that outlives the loop: "losses", "self.preds", "history"
  TSNode container_node{};
  TSNode value{};  // what is stored
  TSNode skip{};   // the container itself inside `torch.cat([acc, out])` or `acc + [out]`
  uint32_t at = 0;
  int function = -1;
  int loop = -1;
  // `torch.cat([acc, v])` and `c[k] = v` on a tensor copy `v`: under no_grad
  // the copy records no history. The other stores keep a reference to `v`,
  // and with it `v`'s graph, whatever the grad mode.
  bool copies = false;
};

class AppendUndetached final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    std::vector<Store> stores;
    for (const Call& c : m.calls()) {
      add_call_store(m, c, stores);
      add_write_store(m, c, stores);
    }
    for (const Binding& b : m.bindings()) add_binding_store(m, b, stores);
    std::vector<signed char> per_step(m.functions().size(), -1);  // runs_per_step, asked once per function
    for (const Store& s : stores) {
      if (s.container.empty()) continue;
      if (s.copies && m.grad_state(s.at) != GradState::Enabled) continue;
      // The container's fate first: it is asked of names, the value engine
      // of expressions.
      if (s.loop >= 0 ? !survives_step(m, s.container, s.loop)
                      : !survives_per_step_call(m, s, per_step) && !survives_hook_calls(m, s))
        continue;
      std::vector<TSNode> leaves;
      attached_leaves(m, s.value, s.skip, leaves);
      if (leaves.empty()) continue;
      if (m.feeds_backward(s.container, s.function)) continue;
      report(ctx, s, leaves);
    }
  }

 private:
  // A store outside any loop, in a function called once per training step
  // (Lightning's training_step, a step helper the loop calls): a container
  // on `self` outlives the call unless every call, or another per-step hook
  // of the class, starts it afresh. A module's forward is TL003's.
  static bool survives_per_step_call(const Model& m, const Store& s, std::vector<signed char>& per_step) {
    if (s.function < 0 || !s.container.starts_with("self.")) return false;
    const std::string& name = m.functions()[s.function].name;
    if (name == "forward" || name == "__init__") return false;
    signed char& known = per_step[static_cast<size_t>(s.function)];
    if (known < 0) known = m.runs_per_step(s.function) ? 1 : 0;
    if (!known) return false;
    if (m.grad_state(s.at) == GradState::Disabled) return false;
    return !m.reset_per_step(s.container, s.function);
  }

  // An append outside any loop in a module's hook (Model::hook_sites), which
  // runs at each call of the module: the container, named in the function
  // that calls the module, survives the step loop around that call, and no
  // backward pass of that function reads it (a feature-matching loss).
  static bool survives_hook_calls(const Model& m, const Store& s) {
    for (const Model::HookSite& site : m.hook_sites(s.function)) {
      if (!site.call || site.call->loop < 0) continue;
      std::string name = m.name_in_caller(s.container, s.function, site.call->function);
      if (name.empty() || !survives_step(m, name, site.call->loop)) continue;
      if (m.feeds_backward(name, site.call->function)) continue;
      return true;
    }
    return false;
  }

  // Whether a store outside a loop may still outlive a step: in a function
  // of a class, on `self` (survives_per_step_call decides).
  static bool may_store_per_step(const Model& m, int function, std::string_view container) {
    return function >= 0 && m.functions()[function].cls >= 0 && container.starts_with("self.");
  }

  // `c.append(v)`, `c.extend(v)`, `c.insert(i, v)`, with the container a name,
  // an attribute, or a subscript of one.
  static void add_call_store(const Model& m, const Call& c, std::vector<Store>& out) {
    if (is_null(c.receiver)) return;
    if (c.loop < 0 && (c.function < 0 || m.functions()[c.function].cls < 0) && m.hook_sites(c.function).empty()) return;
    uint32_t position = c.method == "insert" ? 1 : 0;
    if (c.method != "append" && c.method != "extend" && c.method != "insert") return;
    // list.append takes one argument, list.insert two, and neither takes
    // keywords; `c.extend(f(x) for x in xs)` passes a bare generator.
    TSNode value = kind_of(c.args) == Kind::GeneratorExpression && c.method == "extend" ? c.args : TSNode{};
    if (is_null(value)) {
      if (m.positional_count(c) != position + 1 || ts_node_named_child_count(c.args) != position + 1) return;
      value = m.positional_argument(c, position);
    }
    TSNode container = unparenthesize(c.receiver);
    while (kind_of(container) == Kind::Subscript) container = unparenthesize(field(container, "value"));
    std::string name = m.qualify(container);
    if (name.empty() || (c.loop < 0 && !may_store_per_step(m, c.function, name) &&
                            m.hook_sites(c.function).empty())) return;
    out.push_back({name, container, value, TSNode{}, start_byte(c.node), c.function, c.loop, false});
  }

  // An in-place write into a tensor, or a view of one: `buf[i].copy_(v)`,
  // `buf.narrow(0, i, n).copy_(v)`, `buf.index_put_((i,), v)`,
  // `buf.index_copy_(0, idx, v)`. Under autograd the write records a copy
  // and chains `v`'s graph to the buffer's history.
  static void add_write_store(const Model& m, const Call& c, std::vector<Store>& out) {
    if (is_null(c.receiver)) return;
    uint32_t position = c.method == "copy_" ? 0 : c.method == "index_put_" ? 1 : c.method == "index_copy_" ? 2 : 99;
    if (position == 99 || m.positional_count(c) < position + 1) return;
    TSNode value = m.positional_argument(c, position);
    TSNode container = unparenthesize(c.receiver);
    for (int depth = 0; depth < 8; ++depth) {
      if (kind_of(container) == Kind::Subscript) {
        container = unparenthesize(field(container, "value"));
        continue;
      }
      if (kind_of(container) != Kind::Call) break;
      TSNode func = unparenthesize(field(container, "function"));
      if (kind_of(func) != Kind::Attribute) break;
      static constexpr std::array<std::string_view, 11> kViews = {
          "narrow", "select", "view", "view_as", "squeeze", "unsqueeze", "t", "transpose", "diagonal", "expand",
          "as_strided"};
      std::string_view attr = m.text(field(func, "attribute"));
      if (std::find(kViews.begin(), kViews.end(), attr) == kViews.end()) break;
      container = unparenthesize(field(func, "object"));
    }
    std::string name = m.qualify(container);
    if (name.empty() || (c.loop < 0 && !may_store_per_step(m, c.function, name))) return;
    out.push_back({name, container, value, TSNode{}, start_byte(c.node), c.function, c.loop, true});
  }

  static void add_binding_store(const Model& m, const Binding& b, std::vector<Store>& out) {
    if (is_null(b.value) || (b.loop < 0 && !may_store_per_step(m, b.function, b.name))) return;
    // The container's name is copied once the binding is known to store.
    Store s{{}, unparenthesize(b.target), TSNode{}, TSNode{}, b.start, b.function, b.loop, false};
    TSNode value = unparenthesize(b.value);
    if (b.kind == BindingKind::SubscriptStore) {
      if (!b.op.empty()) {  // `c[k] += [v]` extends a list; `c[k] += v` is TL001's
        if (b.op != "+=" || !is_display(value)) return;
        s.value = value;
      } else {
        s.value = element_of(b);
        TSNode key = field(s.container_node, "subscript");
        if (is_null(s.value) || is_literal(key) || accumulates_into(m, s.value, s.container_node)) return;
        s.copies = true;
      }
      s.container_node = unparenthesize(field(s.container_node, "value"));
    } else if (b.kind == BindingKind::AugAssign) {
      if (b.op != "+=" || (!is_display(value) && !m.holds_list(b.name, b.start, b.function))) return;
      s.value = value;
    } else if (b.kind == BindingKind::Assign && b.element < 0) {
      if (!concatenation(m, b, value, s)) return;
    } else {
      return;
    }
    s.container = b.name;
    out.push_back(std::move(s));
  }

  // `acc = torch.cat([acc, v])`, `acc = acc + [v]` (on a list), also as one
  // branch of a conditional expression.
  static bool concatenation(const Model& m, const Binding& b, TSNode value, Store& s) {
    if (kind_of(value) == Kind::ConditionalExpression && ts_node_named_child_count(value) >= 3)
      return concatenation(m, b, unparenthesize(ts_node_named_child(value, 0)), s) ||
             concatenation(m, b, unparenthesize(ts_node_named_child(value, 2)), s);
    std::string_view target = m.text(unparenthesize(b.target));
    if (kind_of(value) == Kind::Call) {
      TSNode func = unparenthesize(field(value, "function"));
      // The last part of a qualified attribute chain is its attribute: any
      // other than a concatenation's needs no qualifying.
      if (kind_of(func) == Kind::Attribute &&
          std::find(kConcatenations.begin(), kConcatenations.end(), m.text(field(func, "attribute"))) ==
              kConcatenations.end())
        return false;
      std::string callee = m.qualify(func);
      std::string_view leaf = std::string_view(callee).substr(callee.rfind('.') + 1);
      if (callee.rfind("torch.", 0) != 0 || std::find(kConcatenations.begin(), kConcatenations.end(), leaf) ==
                                                 kConcatenations.end())
        return false;
      Call call{};
      call.args = field(value, "arguments");
      TSNode parts = unparenthesize(m.positional_argument(call, 0));
      if (!is_display(parts)) return false;
      uint32_t n = ts_node_named_child_count(parts);
      for (uint32_t i = 0; i < n; ++i) {
        TSNode part = unparenthesize(ts_node_named_child(parts, i));
        if (m.text(part) != target) continue;
        s.value = parts;
        s.skip = part;
        s.copies = true;
        return true;
      }
      return false;
    }
    if (kind_of(value) != Kind::BinaryOperator || m.text(field(value, "operator")) != "+") return false;
    TSNode left = unparenthesize(field(value, "left")), right = unparenthesize(field(value, "right"));
    TSNode other = m.text(left) == target ? right : m.text(right) == target ? left : TSNode{};
    if (is_null(other) || (!is_display(other) && !m.holds_list(b.name, b.start, b.function))) return false;
    s.value = other;
    return true;
  }

  // `d[k] = d[k] + v`: an accumulation, which TL001 reports.
  static bool accumulates_into(const Model& m, TSNode value, TSNode target) {
    value = unparenthesize(value);
    if (kind_of(value) != Kind::BinaryOperator) return false;
    std::string_view op = m.text(field(value, "operator"));
    if (op != "+" && op != "-") return false;
    return m.text(unparenthesize(field(value, "left"))) == m.text(target) ||
           m.text(unparenthesize(field(value, "right"))) == m.text(target);
  }

  static TSNode element_of(const Binding& b) {
    TSNode v = unparenthesize(b.value);
    if (b.element < 0) return v;
    Kind k = kind_of(v);
    bool display = k == Kind::Tuple || k == Kind::ExpressionList || k == Kind::List;
    if (!display) return v;  // `d[i], e[i] = model(x)`: each gets part of the result
    return static_cast<uint32_t>(b.element) < ts_node_named_child_count(v)
               ? ts_node_named_child(v, static_cast<uint32_t>(b.element))
               : TSNode{};
  }

  static bool is_display(TSNode n) {
    Kind k = kind_of(unparenthesize(n));
    return k == Kind::List || k == Kind::Tuple;
  }

  static bool is_literal(TSNode n) {
    n = unparenthesize(n);
    switch (kind_of(n)) {
      case Kind::String: {  // an f-string with a replacement field varies
        uint32_t count = ts_node_named_child_count(n);
        for (uint32_t i = 0; i < count; ++i)
          if (std::string_view(ts_node_type(ts_node_named_child(n, i))) == "interpolation") return false;
        return true;
      }
      case Kind::Integer:
      case Kind::Float:
      case Kind::True:
      case Kind::False:
      case Kind::None: return true;
      case Kind::Tuple: {
        uint32_t count = ts_node_named_child_count(n);
        for (uint32_t i = 0; i < count; ++i)
          if (!is_literal(ts_node_named_child(n, i))) return false;
        return true;
      }
      default: return false;
    }
  }

  // The attached values a store keeps: each element of a display, the element
  // expression of a comprehension, else the value itself.
  static void attached_leaves(const Model& m, TSNode v, TSNode skip, std::vector<TSNode>& out) {
    std::vector<TSNode> work{v};
    while (!work.empty()) {
      TSNode n = unparenthesize(work.back());
      work.pop_back();
      if (is_null(n) || (!is_null(skip) && ts_node_eq(n, skip))) continue;
      Kind k = kind_of(n);
      if (k == Kind::Tuple || k == Kind::List || k == Kind::Set || k == Kind::Dictionary) {
        // Reversed, so that leaves come out in source order.
        size_t first = work.size();
        for_each_named_child(n, [&](TSNode item) {
          if (kind_of(item) == Kind::Comment) return;
          work.push_back(k == Kind::Dictionary ? field(item, "value") : item);
        });
        std::reverse(work.begin() + static_cast<std::ptrdiff_t>(first), work.end());
        continue;
      }
      if (k == Kind::ListComprehension || k == Kind::GeneratorExpression || k == Kind::SetComprehension) {
        work.push_back(field(n, "body"));
        continue;
      }
      if (m.carries_history(n)) out.push_back(n);
    }
  }

  static bool holds_list(const Model& m, TSNode leaf) {
    return kind_of(leaf) == Kind::Identifier &&
           m.holds_list(m.text(leaf), start_byte(leaf), m.function_at(start_byte(leaf)));
  }

  // `.item()` for a loss, `.detach().cpu()` for anything else (model outputs
  // kept to the end of an epoch), element by element for a list.
  // A dict of tensors (a step's output dict): it has no `.detach()` either.
  static bool holds_dict(const Model& m, TSNode value) {
    Value v = m.value(value);
    return v.parts && !v.parts->fields.empty() && v.parts->items.empty() && v.kind != ValueKind::Tensor;
  }

  static std::string help_for(const Model& m, TSNode value) {
    if (holds_dict(m, value))
      return fmt::format("store a copy with its tensors detached: `{{k: v.detach() for k, v in {}.items()}}` (for "
                         "nested dicts, detach each one's tensors)",
                         code_snippet(m, value));
    if (holds_list(m, value)) {
      std::string name(m.text(value));
      return looks_like_loss(m, value) ? fmt::format("store `[t.item() for t in {}]`", name)
                                       : fmt::format("store `[t.detach() for t in {}]`", name);
    }
    TSNode part = attached_operand(m, value);
    auto with = [&](std::string_view suffix) { return code_snippet(with_suffix(m, value, part, suffix), 60); };
    if (looks_like_loss(m, part))
      return fmt::format("store `{}` (a Python number) or `{}`", with(".item()"), with(".detach()"));
    return fmt::format("store `{}`, or `{}` to release GPU memory", with(".detach()"), with(".detach().cpu()"));
  }

  static void report(CheckContext& ctx, const Store& s, const std::vector<TSNode>& leaves) {
    const Model& m = ctx.model();
    TSNode first = leaves.front();
    std::string value = code_snippet(m, first);
    Diagnostic d = ctx.diagnostic(
        first, fmt::format(fmt::runtime(messages::TL002::stores), fmt::arg("container", code_snippet(m, s.container_node)),
                           fmt::arg("value", value)));
    d.help = help_for(m, first);
    // `.detach()` keeps values, dtype and device, but a reader the check
    // cannot see (another method, a caller, another file) may differentiate
    // through the stored tensors: the fix is unsafe. A name holding a list or
    // a dict has no `.detach()`: no fix then.
    std::vector<Edit> edits;
    for (TSNode leaf : leaves) {
      if (holds_list(m, leaf) || holds_dict(m, leaf)) continue;
      for (Edit& e : append_call_edits(m, attached_operand(m, leaf), ".detach()")) edits.push_back(std::move(e));
    }
    if (!edits.empty()) {
      std::string title = leaves.size() == 1
                              ? fmt::format("Detach `{}` before storing it", code_snippet(m, attached_operand(m, first)))
                              : std::string("Detach the stored values");
      d.fix = Fix{std::move(title), FixSafety::Unsafe, std::move(edits)};
    }
    ctx.report(std::move(d));
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(AppendUndetached, "TL002")

}  // namespace torchleak::python
