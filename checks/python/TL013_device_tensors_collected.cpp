// TL013 device-tensors-collected: inside an evaluation loop with grad
// disabled, model outputs or other tensors on an accelerator are stored in a
// container that outlives the loop, so device memory grows with the dataset.
//
// A finding needs all of:
//   - a store: `c.append(v)`, `c.extend(v)`, `c.insert(i, v)` (also on
//     `c[k]`), `c[k] = v` with a key that is not a literal, `c += [v]`, or
//     `c = torch.cat([c, v])` (stack, vstack, ...);
//   - grad Disabled at the store (with grad enabled the value carries its
//     graph too, which TL002 reports; decided at run time: silent);
//   - an evaluation loop: the container, bound before the loop and not
//     started afresh in it, survives a loop over data (Model::is_step_loop)
//     or a loop that calls a module instance;
//   - the stored value on an accelerator, with evidence in the same file: it
//     comes (through assignments, attributes, subscripts, tensor methods and
//     torch functions) from `.cuda()`, `.to(<device>)` other than "cpu", or a
//     call of a module that was moved with `.cuda()` / `.to(<device>)`.
//     `.cpu()`, `.item()`, `.tolist()`, `.numpy()`, Python numbers, full
//     reductions (`.sum()`, `.mean()`: one element per batch) and values
//     without that evidence are silent;
//   - no bound on the container: no `pop`/`popleft`/`clear` of it in the loop.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "checks/python/check.h"

namespace torchleak::python {

namespace {

constexpr int kMaxDepth = 12;

constexpr std::array<std::string_view, 8> kConcatenations = {"cat", "concat", "concatenate", "stack",
                                                             "vstack", "hstack", "row_stack", "column_stack"};
// Methods whose result lives on the host.
constexpr std::array<std::string_view, 6> kHostMethods = {"cpu", "item", "tolist", "numpy", "__len__", "size"};
// Reductions to one element when called without arguments.
constexpr std::array<std::string_view, 9> kReductions = {"sum", "mean", "max", "min", "norm", "prod", "std", "var", "all"};
constexpr std::array<std::string_view, 4> kAccelerators = {"cuda", "mps", "xpu", "npu"};

template <size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

struct Store {
  std::string container;
  TSNode container_node{};
  TSNode value{};
  TSNode skip{};
  uint32_t at = 0;
  int function = -1;
  int loop = -1;
};

// What `.to(arg)` says about the device: +1 an accelerator, -1 the host, 0 not a device (a dtype).
int device_argument(const Model& m, TSNode arg) {
  arg = unparenthesize(arg);
  if (is_null(arg)) return 0;
  Kind k = kind_of(arg);
  if (k == Kind::String) {
    std::string_view s = m.text(arg);
    for (std::string_view a : kAccelerators)
      if (s.find(a) != std::string_view::npos) return 1;
    return s.find("cpu") != std::string_view::npos ? -1 : 0;
  }
  if (k == Kind::Integer) return 1;  // `.to(0)`: a CUDA ordinal
  std::string q = m.qualify(arg);
  if (q.rfind("torch.", 0) == 0 && q != "torch.device") return 0;  // torch.float16
  if (k == Kind::Call) {
    std::string callee = m.qualify(field(arg, "function"));
    if (callee == "torch.device") {
      TSNode args = field(arg, "arguments");
      TSNode first = ts_node_named_child_count(args) ? ts_node_named_child(args, 0) : TSNode{};
      if (!is_null(first) && kind_of(first) == Kind::String) return device_argument(m, first);
      return 1;
    }
    return 0;
  }
  std::string_view leaf = q.empty() ? std::string_view() : last_component(q);
  std::string lower(leaf);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("device") != std::string::npos || lower == "dev" || lower == "gpu" || lower == "rank" ||
      lower == "local_rank")
    return 1;
  return 0;
}

// Whether a `.to(...)` / `.cuda()` call moves to an accelerator: +1 yes, -1 to the host, 0 neither.
int moves(const Model& m, TSNode call) {
  TSNode func = unparenthesize(field(call, "function"));
  if (kind_of(func) != Kind::Attribute) return 0;
  std::string_view method = m.text(field(func, "attribute"));
  if (method == "cuda") return 1;
  if (method == "cpu") return -1;
  if (method != "to") return 0;
  TSNode args = field(call, "arguments");
  uint32_t n = is_null(args) ? 0 : ts_node_named_child_count(args);
  for (uint32_t i = 0; i < n; ++i) {
    TSNode a = ts_node_named_child(args, i);
    if (kind_of(a) == Kind::KeywordArgument) {
      if (m.text(field(a, "name")) == "device") return device_argument(m, field(a, "value"));
      continue;
    }
    // `.to(other_tensor)` takes that tensor's device: undecided (0).
    if (int d = device_argument(m, a); d != 0) return d;
  }
  return 0;
}

class DeviceTensorsCollected final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    if (!may_move_to_device(m)) return;
    std::vector<Store> stores;
    for (const Call& c : m.calls()) add_call_store(m, c, stores);
    for (const Binding& b : m.bindings()) add_binding_store(m, b, stores);
    std::sort(stores.begin(), stores.end(), [](const Store& a, const Store& b) { return a.at < b.at; });
    std::vector<signed char> evaluation(m.loops().size(), -1);  // per loop, decided on first use
    // Per container and loop: the stores into one list in one loop ask once.
    // The names are views into `stores`, which no longer changes.
    std::map<std::pair<std::string_view, int>, bool> survives;
    for (const Store& s : stores) {
      if (s.loop < 0 || s.container.empty()) continue;
      GradState grad = m.grad_state(s.at);
      if (grad == GradState::Maybe) continue;
      auto [it, asked] = survives.try_emplace({s.container, s.loop}, false);
      if (asked) it->second = survives_evaluation(m, s.container, s.loop, evaluation);
      if (!it->second) continue;
      if (bounded_in_loop(m, s)) continue;
      std::vector<TSNode> leaves;
      device_leaves(m, s, leaves);
      // With grad enabled at the store, only values computed under a
      // grad-disabled block just before it (`with torch.no_grad(): out =
      // model(x)`, then `preds.append(out.logits)`): the rest is TL002's.
      if (grad == GradState::Enabled &&
          !std::all_of(leaves.begin(), leaves.end(), [&](TSNode l) { return computed_without_grad(m, l, s.function); }))
        continue;
      if (leaves.empty()) continue;
      report(ctx, s, leaves);
    }
  }

 private:
  static void add_call_store(const Model& m, const Call& c, std::vector<Store>& out) {
    if (c.loop < 0 || is_null(c.receiver)) return;
    if (c.method != "append" && c.method != "extend" && c.method != "insert") return;
    uint32_t position = c.method == "insert" ? 1 : 0;
    if (m.positional_count(c) != position + 1 || ts_node_named_child_count(c.args) != position + 1) return;
    TSNode container = unparenthesize(c.receiver);
    while (kind_of(container) == Kind::Subscript) container = unparenthesize(field(container, "value"));
    std::string name = m.qualify(container);
    if (name.empty()) return;
    out.push_back({name, container, m.positional_argument(c, position), TSNode{}, start_byte(c.node), c.function, c.loop});
  }

  static void add_binding_store(const Model& m, const Binding& b, std::vector<Store>& out) {
    if (b.loop < 0 || is_null(b.value)) return;
    // The container's name is copied once the binding is known to store.
    Store s{{}, unparenthesize(b.target), TSNode{}, TSNode{}, b.start, b.function, b.loop};
    TSNode value = unparenthesize(b.value);
    if (b.kind == BindingKind::SubscriptStore && b.op.empty() && b.element < 0) {
      TSNode key = unparenthesize(field(s.container_node, "subscript"));
      Kind k = kind_of(key);
      if (k == Kind::String || k == Kind::Integer || k == Kind::Float || k == Kind::True || k == Kind::False ||
          k == Kind::None)
        return;  // a constant key overwrites one entry
      s.value = value;
      s.container_node = unparenthesize(field(s.container_node, "value"));
    } else if (b.kind == BindingKind::AugAssign && b.op == "+=" &&
               (kind_of(value) == Kind::List || kind_of(value) == Kind::Tuple)) {
      s.value = value;
    } else if (b.kind == BindingKind::Assign && b.element < 0 && kind_of(value) == Kind::Call) {
      TSNode func = unparenthesize(field(value, "function"));
      // The last part of a qualified attribute chain is its attribute: any
      // other than a concatenation's needs no qualifying.
      if (kind_of(func) == Kind::Attribute && !one_of(m.text(field(func, "attribute")), kConcatenations)) return;
      std::string callee = m.qualify(func);
      if (callee.rfind("torch.", 0) != 0 || !one_of(last_component(callee), kConcatenations)) return;
      Call call{};
      call.args = field(value, "arguments");
      TSNode parts = unparenthesize(m.positional_argument(call, 0));
      if (kind_of(parts) != Kind::List && kind_of(parts) != Kind::Tuple) return;
      std::string_view target = m.text(unparenthesize(b.target));
      bool found = false;
      for (uint32_t i = 0; i < ts_node_named_child_count(parts); ++i) {
        TSNode part = unparenthesize(ts_node_named_child(parts, i));
        if (m.text(part) != target) continue;
        s.skip = part;
        found = true;
      }
      if (!found) return;
      s.value = parts;
    } else {
      return;
    }
    s.container = b.name;
    out.push_back(std::move(s));
  }

  // Whether `loop` is an evaluation step: it iterates data, or runs a module
  // on every iteration.
  static bool evaluation_loop(const Model& m, int loop) {
    if (m.is_step_loop(loop)) return true;
    if (m.loops()[loop].kind == LoopKind::Comprehension) return false;
    // `for flip in (False, True):` runs a fixed number of times: what it
    // collects is bounded by the literal, not by the dataset.
    Kind iterable = kind_of(unparenthesize(field(m.loops()[loop].node, "right")));
    if (iterable == Kind::Tuple || iterable == Kind::List || iterable == Kind::Set) return false;
    // Calls are in source order: only those from the loop's start on are read.
    const Loop& l = m.loops()[loop];
    const auto& calls = m.calls();
    auto first = std::lower_bound(calls.begin(), calls.end(), l.start,
                                  [](const Call& c, uint32_t at) { return start_byte(c.node) < at; });
    for (auto it = first; it != calls.end() && start_byte(it->node) < l.end; ++it) {
      const Call& c = *it;
      if (c.function != l.function || !m.loop_contains(loop, start_byte(c.node))) continue;
      if (m.is_module_instance(c.func)) return true;
    }
    return false;
  }

  // `evaluation` keeps each loop's answer (-1 not asked yet): the stores of
  // one loop ask about the same loops.
  static bool survives_evaluation(const Model& m, std::string_view name, int loop, std::vector<signed char>& evaluation) {
    for (int l = loop; l >= 0; l = m.loops()[l].parent) {
      if (!m.bound_before_loop(name, l) || m.reset_in_loop(name, l)) return false;
      signed char& e = evaluation[static_cast<size_t>(l)];
      if (e < 0) e = evaluation_loop(m, l) ? 1 : 0;
      if (e) return true;
    }
    return false;
  }

  // Whether anything in the file can put a value on an accelerator: every
  // piece of evidence on_accelerator accepts is a `.cuda()` or `.to(...)`
  // call or a `device=` argument. A file that never says "cuda" or "device"
  // and calls no `.to` (nor a parenthesized callee, which might be one) has
  // nothing to report.
  static bool may_move_to_device(const Model& m) {
    std::string_view text = m.source().text();
    if (text.find("cuda") != std::string_view::npos || text.find("device") != std::string_view::npos) return true;
    for (const Call& c : m.calls()) {
      if (c.method == "to") return true;
      if (c.method.empty() && m.text(c.func).substr(0, 1) == "(") return true;
    }
    return false;
  }

  // `window.pop(0)`, `queue.popleft()`, `c.clear()` in the loop, or a deque
  // with a maxlen: the container does not grow with the data.
  static bool bounded_in_loop(const Model& m, const Store& s) {
    for (const Call& c : m.calls()) {
      if (c.function != s.function || is_null(c.receiver)) continue;
      if (c.method == "pop" || c.method == "popleft" || c.method == "clear") {
        if (m.qualify(unparenthesize(c.receiver)) == s.container && m.loop_contains(s.loop, start_byte(c.node)))
          return true;
      }
    }
    const Binding* b = m.reaching(s.container, s.at, s.function);
    if (b && !is_null(b->value) && kind_of(unparenthesize(b->value)) == Kind::Call &&
        m.text(b->value).find("maxlen") != std::string_view::npos)
      return true;
    return false;
  }

  static void device_leaves(const Model& m, const Store& s, std::vector<TSNode>& out) {
    std::vector<TSNode> work{s.value};
    while (!work.empty()) {
      TSNode n = unparenthesize(work.back());
      work.pop_back();
      if (is_null(n) || (!is_null(s.skip) && ts_node_eq(n, s.skip))) continue;
      Kind k = kind_of(n);
      if (k == Kind::Tuple || k == Kind::List || k == Kind::Set || k == Kind::Dictionary) {
        for (uint32_t i = ts_node_named_child_count(n); i-- > 0;) {
          TSNode item = ts_node_named_child(n, i);
          if (kind_of(item) == Kind::Comment) continue;
          if (k == Kind::Dictionary) item = field(item, "value");
          work.push_back(item);
        }
        continue;
      }
      if (k == Kind::ListComprehension || k == Kind::GeneratorExpression) {
        work.push_back(field(n, "body"));
        continue;
      }
      if (on_accelerator(m, n, s.function, 0)) out.push_back(n);
    }
  }

  // Whether `expr` reads a local assigned in a grad-disabled region.
  static bool computed_without_grad(const Model& m, TSNode expr, int fn) {
    expr = unparenthesize(expr);
    for (int depth = 0; depth < kMaxDepth && !is_null(expr); ++depth) {
      Kind k = kind_of(expr);
      if (k == Kind::Identifier) {
        const Binding* b = m.reaching(m.text(expr), start_byte(expr), fn);
        return b && b->kind == BindingKind::Assign && m.grad_state(b->start) == GradState::Disabled;
      }
      if (k == Kind::Attribute) expr = unparenthesize(field(expr, "object"));
      else if (k == Kind::Subscript) expr = unparenthesize(field(expr, "value"));
      else if (k == Kind::Call && kind_of(field(expr, "function")) == Kind::Attribute)
        expr = unparenthesize(field(field(expr, "function"), "object"));
      else return false;
    }
    return false;
  }

  // Whether the module `expr` names was moved to an accelerator in this file:
  // `model.cuda()`, `model.to(device)`, `model = Net().to(device)`.
  static bool module_moved(const Model& m, TSNode expr, int fn, int depth) {
    expr = unparenthesize(expr);
    if (depth > kMaxDepth) return false;
    Kind k = kind_of(expr);
    if (k == Kind::Call) {
      if (moves(m, expr) > 0) return true;
      TSNode func = unparenthesize(field(expr, "function"));
      if (kind_of(func) == Kind::Attribute) return module_moved(m, field(func, "object"), fn, depth + 1);
      // nn.DataParallel(model): the wrapped module.
      Call call{};
      call.args = field(expr, "arguments");
      TSNode first = m.positional_argument(call, 0);
      return !is_null(first) && m.is_module_instance(first) && module_moved(m, first, fn, depth + 1);
    }
    if (k != Kind::Identifier && k != Kind::Attribute) return false;
    std::string name = m.qualify(expr);
    if (name.empty()) return false;
    for (const Call& c : m.calls()) {
      if (is_null(c.receiver) || m.qualify(unparenthesize(c.receiver)) != name) continue;
      bool same_scope = c.function == fn || c.function < 0 || k == Kind::Attribute;
      if (same_scope && moves(m, c.node) > 0) return true;
    }
    const Binding* b = m.reaching(name, start_byte(expr), fn);
    if (!b || b->kind != BindingKind::Assign || b->element >= 0 || is_null(b->value)) return false;
    return module_moved(m, b->value, b->function, depth + 1);
  }

  static bool on_accelerator(const Model& m, TSNode expr, int fn, int depth) {
    expr = unparenthesize(expr);
    if (is_null(expr) || depth > kMaxDepth) return false;
    switch (kind_of(expr)) {
      case Kind::Call: {
        int moved = moves(m, expr);
        if (moved != 0) return moved > 0;
        TSNode func = unparenthesize(field(expr, "function"));
        TSNode args = field(expr, "arguments");
        uint32_t argc = is_null(args) ? 0 : ts_node_named_child_count(args);
        if (m.is_module_instance(func)) {
          if (module_moved(m, func, fn, depth + 1)) return true;
          return any_argument(m, args, fn, depth);
        }
        if (kind_of(func) == Kind::Attribute) {
          std::string_view method = m.text(field(func, "attribute"));
          TSNode receiver = field(func, "object");
          if (one_of(method, kHostMethods)) return false;
          if (one_of(method, kReductions) && argc == 0) return false;  // one element per batch
          if (method == "forward" && m.is_module_instance(receiver))
            return module_moved(m, receiver, fn, depth + 1) || any_argument(m, args, fn, depth);
          std::string callee = m.qualify(func);
          if (callee.rfind("torch.", 0) == 0 && !m.is_module_instance(receiver))
            return torch_function(m, callee, args, fn, depth);
          return on_accelerator(m, receiver, fn, depth + 1);
        }
        std::string callee = m.qualify(func);
        if (callee.rfind("torch.", 0) == 0) return torch_function(m, callee, args, fn, depth);
        return false;  // float(x), len(x), a helper: not known
      }
      case Kind::Identifier: {
        const Binding* b = m.reaching(m.text(expr), start_byte(expr), fn);
        if (!b || is_null(b->value)) return false;
        if (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) return false;
        TSNode v = unparenthesize(b->value);
        if (b->element >= 0) {
          Kind vk = kind_of(v);
          if (vk == Kind::Tuple || vk == Kind::ExpressionList || vk == Kind::List) {
            if (static_cast<uint32_t>(b->element) >= ts_node_named_child_count(v)) return false;
            v = ts_node_named_child(v, static_cast<uint32_t>(b->element));
          } else if (vk != Kind::Call) {
            return false;
          }
        }
        return on_accelerator(m, v, b->function, depth + 1);
      }
      case Kind::Attribute: {
        std::string_view attr = m.text(field(expr, "attribute"));
        if (attr == "shape" || attr == "device" || attr == "dtype") return false;
        return on_accelerator(m, field(expr, "object"), fn, depth + 1);
      }
      case Kind::Subscript: return on_accelerator(m, field(expr, "value"), fn, depth + 1);
      case Kind::BinaryOperator:
        return on_accelerator(m, field(expr, "left"), fn, depth + 1) ||
               on_accelerator(m, field(expr, "right"), fn, depth + 1);
      default: return false;
    }
  }

  static bool any_argument(const Model& m, TSNode args, int fn, int depth) {
    uint32_t n = is_null(args) ? 0 : ts_node_named_child_count(args);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = ts_node_named_child(args, i);
      if (kind_of(a) == Kind::KeywordArgument) a = field(a, "value");
      if (on_accelerator(m, a, fn, depth + 1)) return true;
    }
    return false;
  }

  // A torch function keeps its inputs' device, or takes `device=`.
  static bool torch_function(const Model& m, std::string_view callee, TSNode args, int fn, int depth) {
    std::string_view leaf = last_component(callee);
    if (leaf == "tensor" || leaf == "as_tensor" || leaf == "from_numpy") return false;  // host unless device=
    uint32_t n = is_null(args) ? 0 : ts_node_named_child_count(args);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = ts_node_named_child(args, i);
      if (kind_of(a) == Kind::KeywordArgument && m.text(field(a, "name")) == "device")
        return device_argument(m, field(a, "value")) > 0;
    }
    if (leaf == "argmax" || leaf == "sigmoid" || leaf == "softmax" || one_of(leaf, kConcatenations) ||
        callee.rfind("torch.nn.functional.", 0) == 0 || callee.rfind('.') == 5) {
      for (uint32_t i = 0; i < n; ++i) {
        TSNode a = ts_node_named_child(args, i);
        if (kind_of(a) == Kind::KeywordArgument) continue;
        Kind k = kind_of(unparenthesize(a));
        if (k == Kind::List || k == Kind::Tuple) {
          for (uint32_t j = 0; j < ts_node_named_child_count(a); ++j)
            if (on_accelerator(m, ts_node_named_child(unparenthesize(a), j), fn, depth + 1)) return true;
          continue;
        }
        if (on_accelerator(m, a, fn, depth + 1)) return true;
      }
    }
    return false;
  }

  static void report(CheckContext& ctx, const Store& s, const std::vector<TSNode>& leaves) {
    const Model& m = ctx.model();
    TSNode first = leaves.front();
    std::string value = code_snippet(m, first);
    Diagnostic d = ctx.diagnostic(
        first, fmt::format("`{}` collects `{}` on the accelerator in an evaluation loop: device memory grows with "
                           "the size of the dataset",
                           code_snippet(m, s.container_node), value));
    Kind k = kind_of(first);
    bool primary = k == Kind::Identifier || k == Kind::Attribute || k == Kind::Call || k == Kind::Subscript ||
                   k == Kind::ParenthesizedExpression;
    std::string shown = primary ? value : "(" + value + ")";
    d.help = fmt::format("store `{0}.cpu()`, or reduce each batch (`.item()`, a running count) inside the loop", shown);
    // Unsafe: code after the loop that combines the collected tensors with
    // tensors on the device (`torch.cat(preds) == targets.cuda()`) now mixes
    // devices and fails.
    std::vector<Edit> edits;
    for (TSNode leaf : leaves)
      for (Edit& e : append_call_edits(m, leaf, ".cpu()")) edits.push_back(std::move(e));
    std::string title = leaves.size() == 1 ? fmt::format("Replace `{}` with `{}.cpu()`", value, shown)
                                           : std::string("Move the stored values to the CPU");
    d.fix = Fix{std::move(title), FixSafety::Unsafe, std::move(edits)};
    ctx.report(std::move(d));
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(DeviceTensorsCollected, "TL013")

}  // namespace torchleak::python
