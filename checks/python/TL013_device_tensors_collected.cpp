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
//     started afresh in it, survives a loop over data (Model::is_step_loop),
//     or is an attribute of the module an evaluation-step hook stores into;
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
#include "rule_messages.h"

namespace torchleak::python {

namespace {

constexpr int kMaxDepth = 12;

constexpr std::array<std::string_view, 8> kConcatenations = {"cat", "concat", "concatenate", "stack",
                                                             "vstack", "hstack", "row_stack", "column_stack"};

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
  TSNode statement{};  // the store's call or assignment
  TSNode first{};      // `v` in `acc = v if acc is None else torch.cat((acc, v))`: the first entry
  bool subscript = false;  // `c[k] = v`
};

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
      if (s.container.empty()) continue;
      GradState grad = m.grad_state(s.at);
      if (grad == GradState::Maybe) continue;
      if (s.loop < 0) {
        if (m.hook_sites(s.function).empty() ? !survives_evaluation_step(m, s) : !survives_hook_calls(m, s, evaluation))
          continue;
      } else {
        auto [it, asked] = survives.try_emplace({s.container, s.loop}, false);
        if (asked) it->second = survives_evaluation(m, s.container, s.loop, evaluation);
        if (!it->second) continue;
        if (bounded_in_loop(m, s) || consumed_in_loop(m, s)) continue;
      }
      if (s.subscript && !insertion(m, s.container_node, s.at, s.function)) continue;
      std::vector<TSNode> leaves;
      device_leaves(m, s, leaves);
      // With grad enabled at the store, only values without history (computed
      // under no_grad, here or in the function that returned them): the
      // rest is TL002's.
      if (grad == GradState::Enabled &&
          !std::all_of(leaves.begin(), leaves.end(), [&](TSNode l) {
            return m.value(l).grad == Provenance::Detached || computed_without_grad(m, l, s.function);
          }))
        continue;
      if (leaves.empty()) continue;
      if (s.loop >= 0 && read_by_training_loop(m, s)) continue;
      report(ctx, s, leaves);
    }
  }

 private:
  static void add_call_store(const Model& m, const Call& c, std::vector<Store>& out) {
    if (is_null(c.receiver)) return;
    if (c.method != "append" && c.method != "extend" && c.method != "insert") return;
    if (c.loop < 0 && !in_evaluation_step(m, c.function) && m.hook_sites(c.function).empty()) return;
    uint32_t position = c.method == "insert" ? 1 : 0;
    if (m.positional_count(c) != position + 1 || ts_node_named_child_count(c.args) != position + 1) return;
    TSNode container = unparenthesize(c.receiver);
    while (kind_of(container) == Kind::Subscript) container = unparenthesize(field(container, "value"));
    std::string name = m.qualify(container);
    if (name.empty()) return;
    out.push_back({name, container, m.positional_argument(c, position), TSNode{}, start_byte(c.node), c.function, c.loop,
                   c.node});
  }

  // A store outside any loop in a module's hook (Model::hook_sites), which
  // runs at each call of the module: the container, named in the function
  // that calls the module, survives the evaluation loop around that call and
  // the loop neither bounds it nor works on it. A keyed store (`c[k] = v`)
  // replaces the entry of its key on each call.
  static bool survives_hook_calls(const Model& m, const Store& s, std::vector<signed char>& evaluation) {
    if (s.subscript) return false;
    for (const Model::HookSite& site : m.hook_sites(s.function)) {
      if (!site.call || site.call->loop < 0) continue;
      std::string name = m.name_in_caller(s.container, s.function, site.call->function);
      if (name.empty()) continue;
      Store at = s;
      at.container = name;
      at.function = site.call->function;
      at.loop = site.call->loop;
      at.at = start_byte(site.call->node);
      at.skip = TSNode{};
      if (!survives_evaluation(m, at.container, at.loop, evaluation)) continue;
      if (bounded_in_loop(m, at) || consumed_in_loop(m, at) || read_by_training_loop(m, at)) continue;
      return true;
    }
    return false;
  }

  static bool in_evaluation_step(const Model& m, int function) {
    return function >= 0 && m.functions()[function].hook && m.functions()[function].hook->role == HookRole::EvaluationStep;
  }

  // Whether `key` names one fixed slot: a literal, a negative literal, or a slice.
  static bool fixed_slot(const Model& m, TSNode key) {
    key = unparenthesize(key);
    Kind k = kind_of(key);
    if (k == Kind::String || k == Kind::Integer || k == Kind::Float || k == Kind::True || k == Kind::False ||
        k == Kind::None)
      return true;
    if (k == Kind::UnaryOperator) return fixed_slot(m, ts_node_named_child(key, ts_node_named_child_count(key) - 1));
    // `buf[:, a:b]`, `buf[i, :]`: a slice writes into existing storage.
    if (k == Kind::Other || k == Kind::Tuple || k == Kind::ExpressionList) {
      std::string_view t = m.text(key);
      return t.find(':') != std::string_view::npos || t.find("...") != std::string_view::npos;
    }
    return false;
  }

  // Whether `name[k] = v` can add an entry: the container is not a list (an
  // index store replaces one), nor a tensor (a write into preallocated
  // storage, a tile, a ring buffer).
  static bool insertion(const Model& m, TSNode container, uint32_t at, int function) {
    Value v = m.value(container);
    if (v.kind == ValueKind::Tensor) return false;
    std::string name = m.qualify(container);
    const Binding* b = name.empty() ? nullptr : m.reaching(name, at, function);
    if (b && b->kind == BindingKind::Assign && !is_null(b->value)) {
      TSNode value = unparenthesize(b->value);
      Kind k = kind_of(value);
      if (k == Kind::List || k == Kind::ListComprehension) return false;
      if (k == Kind::BinaryOperator && (kind_of(unparenthesize(field(value, "left"))) == Kind::List ||
                                        kind_of(unparenthesize(field(value, "right"))) == Kind::List))
        return false;  // [None] * n
    }
    return true;
  }

  static void add_binding_store(const Model& m, const Binding& b, std::vector<Store>& out) {
    if (is_null(b.value)) return;
    if (b.loop < 0 && !in_evaluation_step(m, b.function) &&
        (b.kind == BindingKind::SubscriptStore || m.hook_sites(b.function).empty()))
      return;
    // The container's name is copied once the binding is known to store.
    Store s{{}, unparenthesize(b.target), TSNode{}, TSNode{}, b.start, b.function, b.loop, b.statement};
    TSNode value = unparenthesize(b.value);
    if (b.kind == BindingKind::SubscriptStore && b.op.empty() && b.element < 0) {
      if (fixed_slot(m, field(s.container_node, "subscript"))) return;  // overwrites one entry
      s.value = value;
      s.container_node = unparenthesize(field(s.container_node, "value"));
      s.subscript = true;  // insertion() is asked once the container is known to survive
    } else if (b.kind == BindingKind::AugAssign && b.op == "+=" &&
               (kind_of(value) == Kind::List || kind_of(value) == Kind::Tuple)) {
      s.value = value;
    } else if (b.kind == BindingKind::Assign && b.element < 0) {
      // `acc = torch.cat([acc, v])`, also as the other branch of
      // `acc = v if acc is None else torch.cat((acc, v))`.
      TSNode concat = value;
      TSNode alone{};
      if (kind_of(value) == Kind::ConditionalExpression && ts_node_named_child_count(value) == 3) {
        alone = unparenthesize(ts_node_named_child(value, 0));
        concat = unparenthesize(ts_node_named_child(value, 2));
        if (kind_of(concat) != Kind::Call) std::swap(alone, concat);
      }
      if (!concatenation(m, b, concat, s)) return;
      if (!is_null(alone) && kind_of(alone) != Kind::None) s.first = alone;
    } else {
      return;
    }
    s.container = b.name;
    out.push_back(std::move(s));
  }

  // `target = torch.cat([target, v, ...])`: the parts are the stored values
  // but `target` itself (s.skip).
  static bool concatenation(const Model& m, const Binding& b, TSNode value, Store& s) {
    if (kind_of(value) != Kind::Call) return false;
    TSNode func = unparenthesize(field(value, "function"));
    // The last part of a qualified attribute chain is its attribute: any
    // other than a concatenation's needs no qualifying.
    if (kind_of(func) == Kind::Attribute && !one_of(m.text(field(func, "attribute")), kConcatenations)) return false;
    std::string callee = m.qualify(func);
    if (callee.rfind("torch.", 0) != 0 || !one_of(last_component(callee), kConcatenations)) return false;
    Call call{};
    call.args = field(value, "arguments");
    TSNode parts = unparenthesize(m.positional_argument(call, 0));
    if (kind_of(parts) != Kind::List && kind_of(parts) != Kind::Tuple) return false;
    std::string_view target = m.text(unparenthesize(b.target));
    bool found = false;
    for (uint32_t i = 0; i < ts_node_named_child_count(parts); ++i) {
      TSNode part = unparenthesize(ts_node_named_child(parts, i));
      if (m.text(part) != target) continue;
      s.skip = part;
      found = true;
    }
    if (found) s.value = parts;
    return found;
  }

  // Whether `loop` is an evaluation loop: it iterates data (Model::is_step_loop),
  // or counts batches (`for _ in range(num_batches)`) running the same module
  // on fresh inputs every iteration. A loop that runs a model over something
  // else (the prompts or images of one call, the text encoders of a
  // pipeline) collects what one call needs, not what a dataset holds:
  // measured on the audited corpus, such loops gave only wrong findings.
  // A loop over a range of literal bounds (`for _ in range(5)`) runs a fixed
  // number of times, whatever the data: what it collects is bounded. So does
  // a counted loop in a method of a module class: one call's frames, time
  // steps or chunks.
  static bool evaluation_loop(const Model& m, int loop) {
    const Loop& l = m.loops()[loop];
    TSNode iterable = l.kind == LoopKind::For ? unparenthesize(field(l.node, "right")) : TSNode{};
    // `tqdm(range(n))` (from any of tqdm's modules), `enumerate(range(n))`:
    // the range they wrap; `trange(n)` is one.
    auto from_tqdm = [](std::string_view callee, std::string_view name) {
      return callee == name || (callee.starts_with("tqdm.") && last_component(callee) == name);
    };
    while (kind_of(iterable) == Kind::Call) {
      std::string wrapper = m.qualify(field(iterable, "function"));
      if (wrapper != "enumerate" && !from_tqdm(wrapper, "tqdm")) break;
      Call wrapped{};
      wrapped.args = field(iterable, "arguments");
      TSNode inner = unparenthesize(m.positional_argument(wrapped, 0));
      if (is_null(inner)) break;
      iterable = inner;
    }
    std::string counter = kind_of(iterable) == Kind::Call ? m.qualify(field(iterable, "function")) : std::string();
    bool range = counter == "range" || from_tqdm(counter, "trange");
    if (range && literal_arguments(field(iterable, "arguments"))) return false;
    if (m.is_step_loop(loop)) return true;
    if (!range) return false;
    // In a module's own method (`generate`, `log_images`), a counted loop
    // runs over the frames, time steps or chunks of one call's input.
    // A class whose bases are in other files may be one.
    int cls = m.class_of_function(l.function);
    if (cls >= 0 && m.module_class(cls) != ModuleAnswer::No) return false;
    return m.runs_module_per_item(loop);
  }

  static bool literal_arguments(TSNode args) {
    uint32_t n = ts_node_named_child_count(args);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = unparenthesize(ts_node_named_child(args, i));
      if (kind_of(a) == Kind::UnaryOperator) a = unparenthesize(ts_node_named_child(a, ts_node_named_child_count(a) - 1));
      if (kind_of(a) != Kind::Integer) return false;
    }
    return n > 0;
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

  // In an evaluation-step hook (Lightning's validation_step, called once per
  // batch), a store into an attribute of the module grows across batches
  // unless the hook starts it afresh.
  static bool survives_evaluation_step(const Model& m, const Store& s) {
    if (!in_evaluation_step(m, s.function) || s.container.rfind("self.", 0) != 0) return false;
    for (const Binding* b : m.bindings_of(s.container, s.function)) {
      if (b->kind == BindingKind::Assign && !is_null(b->value) && !m.mentions(b->value, s.container)) return false;
    }
    return true;
  }

  // Whether anything in the file can put a value on an accelerator: a
  // `.cuda()` or `.to(...)` call, a `device=` argument, or a framework hook
  // that receives its batch on the module's device.
  static bool may_move_to_device(const Model& m) {
    std::string_view text = m.source().text();
    if (text.find("cuda") != std::string_view::npos || text.find("device") != std::string_view::npos) return true;
    for (const Function& f : m.functions())
      if (f.hook && f.hook->batch) return true;
    for (const Call& c : m.calls()) {
      if (c.method == "to") return true;
      if (c.method.empty() && m.text(c.func).substr(0, 1) == "(") return true;
    }
    // Values may come to the device in the project's other files.
    return m.imports_project_files();
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

  // Whether the loop reads the container other than to store into it, take
  // its length or test it against None: a generation context fed back to
  // the model (`ids = torch.cat([ids, next_id])`), a window the loop works
  // on. It is the loop's working state, not a collection of its results.
  static bool consumed_in_loop(const Model& m, const Store& s) {
    const Loop& l = m.loops()[s.loop];
    const auto& refs = m.references();
    auto first = std::lower_bound(refs.begin(), refs.end(), l.start,
                                  [](const Reference& r, uint32_t at) { return start_byte(r.node) < at; });
    std::string_view root = s.container;
    root = root.substr(0, root.find('.'));
    for (auto it = first; it != refs.end() && start_byte(it->node) < l.end; ++it) {
      if (it->function != s.function || m.text(it->node) != root) continue;
      TSNode mention = it->node;
      while (!is_null(ts_node_parent(mention)) && kind_of(ts_node_parent(mention)) == Kind::Attribute &&
             ts_node_eq(field(ts_node_parent(mention), "object"), mention) && m.qualify(mention) != s.container)
        mention = ts_node_parent(mention);
      if (m.qualify(mention) != s.container) continue;
      TSNode parent = ts_node_parent(mention);
      while (kind_of(parent) == Kind::ParenthesizedExpression) parent = ts_node_parent(parent);
      Kind pk = kind_of(parent);
      if (!is_null(s.skip) && ts_node_eq(unparenthesize(s.skip), mention)) continue;
      // A store's target or receiver, `len(c)`, `c is None`, `c.pop()`, `c.clear()`.
      if (pk == Kind::Attribute) {
        std::string_view method = m.text(field(parent, "attribute"));
        if (method == "append" || method == "extend" || method == "insert" || method == "pop" ||
            method == "popleft" || method == "clear")
          continue;
      }
      if (pk == Kind::ComparisonOperator || pk == Kind::NotOperator) continue;
      if (pk == Kind::Assignment || pk == Kind::AugmentedAssignment) {
        if (ts_node_eq(field(parent, "left"), mention)) continue;
      }
      if (pk == Kind::Subscript && ts_node_eq(field(parent, "value"), mention)) {
        TSNode up = ts_node_parent(parent);
        if ((kind_of(up) == Kind::Assignment || kind_of(up) == Kind::AugmentedAssignment) &&
            ts_node_eq(field(up, "left"), parent))
          continue;  // c[k] = v
      }
      if (pk == Kind::ArgumentList) {
        TSNode call = ts_node_parent(parent);
        if (m.text(field(call, "function")) == "len") continue;
      }
      if (pk == Kind::ConditionalExpression) continue;  // `v if c is None else ...`: the test is read above
      return true;
    }
    return false;
  }

  // Whether a later loop of the function that trains (runs a backward pass)
  // reads the container's entries (`latents_cache[step]`, `for x in cache`):
  // inputs computed once and kept on the device for training, a cache whose
  // size is the point.
  static bool read_by_training_loop(const Model& m, const Store& s) {
    int outer = s.loop;
    while (m.loops()[outer].parent >= 0) outer = m.loops()[outer].parent;
    uint32_t after = m.loops()[outer].end;
    const auto& refs = m.references();
    auto it = std::lower_bound(refs.begin(), refs.end(), after,
                               [](const Reference& r, uint32_t at) { return start_byte(r.node) < at; });
    for (; it != refs.end(); ++it) {
      if (it->function != s.function) continue;
      TSNode mention = it->node;
      while (kind_of(ts_node_parent(mention)) == Kind::Attribute &&
             ts_node_eq(field(ts_node_parent(mention), "object"), mention) && m.qualify(mention) != s.container)
        mention = ts_node_parent(mention);
      if (m.qualify(mention) != s.container) continue;
      TSNode parent = ts_node_parent(mention);
      bool entry = kind_of(parent) == Kind::Subscript && ts_node_eq(field(parent, "value"), mention);
      bool iterated = kind_of(parent) == Kind::ForStatement && ts_node_eq(field(parent, "right"), mention);
      if (!entry && !iterated) continue;
      for (int l = m.innermost_loop(start_byte(it->node), s.function); l >= 0; l = m.loops()[l].parent)
        if (trains(m, l)) return true;
    }
    return false;
  }

  static bool trains(const Model& m, int loop) {
    const Loop& l = m.loops()[loop];
    for (const Call& c : m.calls_in(l.start, l.end))
      if (c.function == l.function && m.is_backward_call(c)) return true;
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
      if (m.value(n).holds_device_tensors()) out.push_back(n);
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

  static void report(CheckContext& ctx, const Store& s, const std::vector<TSNode>& leaves) {
    const Model& m = ctx.model();
    TSNode first = leaves.front();
    std::string value = code_snippet(m, first);
    Diagnostic d = ctx.diagnostic(
        first, fmt::format(fmt::runtime(messages::TL013::collects), fmt::arg("container", code_snippet(m, s.container_node)),
                           fmt::arg("value", value)));
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
    // The first entry of a conditional concatenation moves too: the parts
    // of one torch.cat must share a device.
    if (!is_null(s.first) && m.value(s.first).holds_device_tensors())
      for (Edit& e : append_call_edits(m, s.first, ".cpu()")) edits.push_back(std::move(e));
    std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.start_byte < b.start_byte; });
    std::string title = leaves.size() == 1 ? fmt::format("Replace `{}` with `{}.cpu()`", value, shown)
                                           : std::string("Move the stored values to the CPU");
    d.fix = Fix{std::move(title), FixSafety::Unsafe, std::move(edits)};
    ctx.report(std::move(d));
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(DeviceTensorsCollected, "TL013")

}  // namespace torchleak::python
