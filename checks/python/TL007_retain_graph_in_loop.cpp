// TL007 retain-graph-in-loop: `backward(retain_graph=True)` (or
// torch.autograd.backward / grad with retain_graph=True) once per step of a
// training loop, where nothing later in the step releases the graph.
//
// A finding needs all of:
//   - retain_graph is the literal `True` (by keyword, or at its position);
//     create_graph is absent or the literal `False` (with create_graph the
//     graph is retained anyway, and higher-order gradients need it);
//   - the innermost loop around the call in its function is a step loop
//     (Model::is_step_loop): a loop over heads, losses or critic updates
//     inside a step is how several backward passes share one graph;
//   - no backward pass comes later in the same iteration, directly or
//     through a function of this file, called later in the iteration, that
//     releases its graph: the first-retains, last-releases pattern (GAN
//     discriminator then generator, two losses over one trunk) is the reason
//     retain_graph exists. When the later pass retains too, it is the one
//     reported: one finding per step.
#include <fmt/format.h>

#include <unordered_set>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

// The position of retain_graph in each signature:
// Tensor.backward(gradient, retain_graph, create_graph, inputs),
// torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph, ...),
// torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, ...).
uint32_t retain_position(const Call& c) {
  if (c.callee == "torch.autograd.backward") return 2;
  if (c.callee == "torch.autograd.grad") return 3;
  return 1;
}

// A wrapper's backward (`accelerator.backward(loss, ...)`, `scaler`-style
// helpers) takes the loss first: its keyword arguments are torch's, its
// positions are not. Only a tensor's own backward() is read by position.
bool method_on_tensor(const Model& m, const Call& c) {
  if (c.callee == "torch.autograd.backward" || c.callee == "torch.autograd.grad") return true;
  TSNode first = m.positional_argument(c, 0);
  return is_null(first) || m.provenance(first) != Provenance::Attached;
}

TSNode retain_argument(const Model& m, const Call& c) {
  TSNode kw = m.keyword_argument(c, "retain_graph");
  if (!is_null(kw)) return kw;
  if (!method_on_tensor(m, c)) return TSNode{};
  return m.positional_argument(c, retain_position(c));
}

TSNode create_argument(const Model& m, const Call& c) {
  TSNode kw = m.keyword_argument(c, "create_graph");
  if (!is_null(kw) || !method_on_tensor(m, c)) return kw;
  return m.positional_argument(c, retain_position(c) + 1);
}

// Whether the call keeps its graph: retain_graph=True, or create_graph set to
// anything but False (retain_graph defaults to create_graph).
bool retains(const Model& m, const Call& c) {
  if (kind_of(unparenthesize(retain_argument(m, c))) == Kind::True) return true;
  TSNode create = unparenthesize(create_argument(m, c));
  TSNode retain = retain_argument(m, c);
  return is_null(retain) && !is_null(create) && kind_of(create) != Kind::False && kind_of(create) != Kind::None;
}

class RetainGraphInLoop final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    std::unordered_set<std::string> releasing = releasing_functions(m);
    for (const Call& c : m.calls()) {
      if (!m.is_backward_call(c)) continue;
      TSNode retain = retain_argument(m, c);
      if (kind_of(unparenthesize(retain)) != Kind::True) continue;
      TSNode create = unparenthesize(create_argument(m, c));
      if (!is_null(create) && kind_of(create) != Kind::False) continue;
      int loop = m.innermost_loop(start_byte(c.node), c.function);
      if (loop >= 0 && m.loops()[loop].function == c.function) {
        if (!m.is_step_loop(loop) || released_later(m, c, m.loops()[loop].start, m.loops()[loop].end, releasing))
          continue;
      } else {
        // No loop of its own: a step function or a framework's per-step
        // hook, called once per step; the rest of its body is the step.
        if (c.function < 0 || !m.runs_per_step(c.function)) continue;
        const Function& f = m.functions()[c.function];
        if (released_later(m, c, start_byte(f.body), end_byte(f.body), releasing)) continue;
        // A helper whose caller runs a backward pass later in the same
        // iteration (`grad_layer_wrt_loss(loss, w)`, then
        // `accelerator.backward(loss)`) retains for that pass.
        if (released_after_a_call(m, f, releasing)) continue;
      }
      report(ctx, c, retain);
    }
  }

 private:
  // Names of this file's functions that run a backward pass releasing its
  // graph: a call to one later in the iteration may release ours.
  static std::unordered_set<std::string> releasing_functions(const Model& m) {
    std::unordered_set<std::string> out;
    for (const Call& c : m.calls())
      if (m.is_backward_call(c) && c.function >= 0 && !retains(m, c)) out.insert(m.functions()[c.function].name);
    return out;
  }

  static bool released_after_a_call(const Model& m, const Function& f, const std::unordered_set<std::string>& releasing) {
    for (const Call* site : m.call_sites(f)) {
      int loop = m.innermost_loop(start_byte(site->node), site->function);
      uint32_t start = loop >= 0 ? m.loops()[loop].start : 0;
      uint32_t end = loop >= 0 ? m.loops()[loop].end : 0;
      if (loop < 0 && site->function >= 0) {
        start = start_byte(m.functions()[site->function].body);
        end = end_byte(m.functions()[site->function].body);
      }
      if (end > start && released_later(m, *site, start, end, releasing)) return true;
    }
    return false;
  }

  // Whether a backward pass runs after `c` in [start, end), directly or
  // through a function of the file that releases its graph.
  static bool released_later(const Model& m, const Call& c, uint32_t start, uint32_t end,
                             const std::unordered_set<std::string>& releasing) {
    for (const Call& other : m.calls()) {
      uint32_t at = start_byte(other.node);
      if (at <= start_byte(c.node) || at < start || at >= end) continue;
      // A later pass that retains too is the one reported: one finding per step.
      if (m.is_backward_call(other)) return true;
      std::string_view name = other.method.empty() ? std::string_view(other.callee) : std::string_view(other.method);
      if (!m.is_backward_call(other) && releasing.count(std::string(name))) return true;
    }
    return false;
  }

  static void report(CheckContext& ctx, const Call& c, TSNode retain) {
    const Model& m = ctx.model();
    Diagnostic d = ctx.diagnostic(
        c.node, fmt::format(fmt::runtime(messages::TL007::retained), fmt::arg("call", code_snippet(m, c.node, 60))));
    d.help = "drop `retain_graph=True`: it is needed only when another backward pass goes through the same graph "
             "later in the step";
    TSNode kw = ts_node_parent(retain);
    if (kind_of(kw) == Kind::KeywordArgument) {
      std::vector<Edit> edits = remove_argument(c, kw);
      if (!edits.empty()) d.fix = Fix{"Remove `retain_graph=True`", FixSafety::Unsafe, std::move(edits)};
    }
    ctx.report(std::move(d));
  }

  // The edit that removes argument `arg` and the comma that separates it
  // from its neighbour; none when a comment sits in the argument list.
  static std::vector<Edit> remove_argument(const Call& c, TSNode arg) {
    TSNode prev{}, next{};
    bool seen = false;
    uint32_t n = ts_node_named_child_count(c.args);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = ts_node_named_child(c.args, i);
      if (kind_of(a) == Kind::Comment) return {};
      if (ts_node_eq(a, arg)) {
        seen = true;
      } else if (!seen) {
        prev = a;
      } else if (is_null(next)) {
        next = a;
      }
    }
    if (!seen) return {};
    if (!is_null(prev)) return {Edit{end_byte(prev), end_byte(arg), ""}};          // `f(a, retain_graph=True)`
    if (!is_null(next)) return {Edit{start_byte(arg), start_byte(next), ""}};      // `f(retain_graph=True, x=1)`
    return {Edit{start_byte(arg), end_byte(c.args) - 1, ""}};                      // `f(retain_graph=True,)`
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(RetainGraphInLoop, "TL007")

}  // namespace torchleak::python
