// TL006 eval-without-no-grad: a model runs in an evaluation loop with
// autograd enabled. Every forward pass records a graph and keeps the
// activations it needs for a backward pass that never comes.
//
// A finding needs all of:
//   - a function that puts a module in evaluation mode (`model.eval()`,
//     `model.train(False)`, the last mode call before the loop) or is named
//     for evaluation (`validate`, `evaluate_epoch`, `run_test`, `predict`,
//     `inference`, ...), and no `model.train()` between that and the loop;
//     module-level code needs the `eval()` call;
//   - a loop over data (Model::is_step_loop) around a call of a module
//     instance (`model(x)`, `model.forward(x)`), with grad Enabled there:
//     no `with torch.no_grad()` / `inference_mode()` / `set_grad_enabled(...)`
//     around it and no grad-disabling decorator (a with block or decorator
//     whose name says no_grad or inference counts too);
//   - nothing in the function (or the functions nested in it) that needs
//     gradients: `.backward()`, `torch.autograd.grad`, `optimizer.step()`,
//     `requires_grad_()`, and no `enable_grad()` around the call;
//   - nothing in the file that freezes autograd by other means
//     (`torch.set_grad_enabled(False)` as a statement, `requires_grad_(False)`,
//     `p.requires_grad = False`).
// Gradient calls in a loop around the evaluation loop count as another
// loop's when they all come before the eval() call preceding it (a periodic
// evaluation after the step). A function serving both phases on a flag is
// read with the flag at its value; the eval() call may be in its caller
// (`self.model.eval(); self._run_epoch(loader, train=False)`).
// Also a loop over data that calls a function of the file which switches a
// module to eval mode and runs a module with autograd on (a trainer's
// `validation_step(x, y)`), when neither the function nor the loop needs
// gradients: the finding sits on that call.
// Across files: every file records the grad state of each call it makes, by
// the callee's simple name ("call-site" facts). A function whose every call
// in the analyzed files runs with grad disabled (or decided at run time) is
// not reported; one never called in the analyzed files is.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

constexpr std::array<std::string_view, 14> kEvaluationWords = {
    "validate", "validation", "val",  "valid",      "evaluate", "evaluation", "eval",
    "test",     "testing",    "predict", "prediction", "infer", "inference", "evaluating"};

// Lightning runs these with grad disabled itself.
constexpr std::array<std::string_view, 3> kFrameworkSteps = {"validation_step", "test_step", "predict_step"};

bool lower_contains(std::string_view s, std::string_view needle) {
  std::string lower(s);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find(needle) != std::string::npos;
}

bool named_for_evaluation(std::string_view name) {
  if (std::find(kFrameworkSteps.begin(), kFrameworkSteps.end(), name) != kFrameworkSteps.end()) return false;
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t i = 0;
  while (i <= lower.size()) {
    size_t j = lower.find('_', i);
    if (j == std::string::npos) j = lower.size();
    std::string_view token = std::string_view(lower).substr(i, j - i);
    if (std::find(kEvaluationWords.begin(), kEvaluationWords.end(), token) != kEvaluationWords.end()) return true;
    i = j + 1;
  }
  return false;
}

// Whether `fn` is `outer` or nested in it.
bool within(const Model& m, int fn, int outer) {
  for (int f = fn; f >= 0; f = m.functions()[f].parent)
    if (f == outer) return true;
  return fn == outer;
}

bool is_false(TSNode n) { return !is_null(n) && kind_of(unparenthesize(n)) == Kind::False; }

TSNode first_argument(const Model& m, const Call& c) {
  TSNode a = m.positional_argument(c, 0);
  if (is_null(a) && !is_null(c.args) && ts_node_named_child_count(c.args) == 1) {
    TSNode k = ts_node_named_child(c.args, 0);
    if (kind_of(k) == Kind::KeywordArgument) a = field(k, "value");
  }
  return a;
}

// Autograd frozen for the whole file by means the model does not track as
// regions: `torch.set_grad_enabled(False)` as a statement, `requires_grad_(False)`
// or `p.requires_grad = False`.
bool file_freezes_autograd(const Model& m) {
  for (const Call& c : m.calls()) {
    if ((c.callee == "torch.set_grad_enabled" || c.callee == "torch.autograd.set_grad_enabled") &&
        c.statement && is_false(first_argument(m, c)))
      return true;
    if (c.method == "requires_grad_" && is_false(first_argument(m, c))) return true;
  }
  for (const Binding& b : m.bindings()) {
    std::string_view n = b.name;
    if (n.size() > 14 && n.substr(n.size() - 14) == ".requires_grad" && is_false(b.value)) return true;
  }
  return false;
}

// A `with` block or a decorator the model does not know but whose name says
// it disables grad (`with no_grad_ctx():`, `@torch.inference_mode` spelled
// through a helper), or an explicit `enable_grad()` around `node`: either way
// the author decided about autograd here.
bool grad_decided_around(const Model& m, TSNode node, int fn) {
  for (TSNode p = ts_node_parent(node); !is_null(p); p = ts_node_parent(p)) {
    if (kind_of(p) != Kind::WithStatement) continue;
    std::string_view header = m.text(p).substr(0, start_byte(field(p, "body")) - start_byte(p));
    if (lower_contains(header, "no_grad") || lower_contains(header, "inference") ||
        lower_contains(header, "enable_grad") || lower_contains(header, "set_grad_enabled"))
      return true;
  }
  for (int f = fn; f >= 0; f = m.functions()[f].parent)
    for (const std::string& d : m.functions()[f].decorators)
      if (lower_contains(d, "no_grad") || lower_contains(d, "inference") || lower_contains(d, "enable_grad"))
        return true;
  return false;
}

// Whether the call needs gradients: a backward pass, an optimizer step,
// `requires_grad_()`, torch.autograd's functions.
bool needs_gradient_call(const Model& m, const Call& c) {
  if (c.method == "backward" || c.method == "requires_grad_" || c.callee == "torch.autograd.grad" ||
      c.callee == "torch.autograd.backward" || c.callee == "torch.autograd.functional.jacobian" ||
      c.callee == "torch.autograd.functional.vjp")
    return true;
  return c.method == "step" &&
         (m.is_optimizer(c.receiver) || (!is_null(c.receiver) && lower_contains(m.text(c.receiver), "optim")) ||
          (m.positional_count(c) > 0 && m.is_optimizer(m.positional_argument(c, 0))));
}

// Whether `fn` (with the functions nested in it) needs gradients.
bool needs_gradients(const Model& m, int fn) {
  for (const Call& c : m.calls())
    if (within(m, c.function, fn) && needs_gradient_call(m, c)) return true;
  return false;
}

// Whether every call of `fn` that needs gradients sits in a loop over data
// apart from `loop` (neither inside it nor around it): an epoch's training
// loop beside its evaluation loop. A loop around it may train too when all of
// its gradient calls come before `eval_at`, the eval() call that precedes
// `loop`: a periodic evaluation after the step, inside the training loop.
bool gradients_only_in_other_loops(const Model& m, int fn, int loop, uint32_t eval_at) {
  uint32_t at = start_byte(m.loops()[loop].node);
  for (const Call& c : m.calls()) {
    if (!within(m, c.function, fn) || !needs_gradient_call(m, c)) continue;
    if (c.function != fn) return false;
    bool apart = false;
    for (int l : m.enclosing_loops(start_byte(c.node), fn)) {
      if (m.loop_contains(loop, start_byte(c.node)) || !m.is_step_loop(l)) continue;
      if (!m.loop_contains(l, at) || start_byte(c.node) < eval_at) apart = true;
    }
    if (!apart) return false;
  }
  return true;
}

// The mode a module call sets: +1 eval(), -1 train(), 0 not a mode call.
int mode_of(const Model& m, const Call& c) {
  if (is_null(c.receiver) || !m.is_module_instance(c.receiver)) return 0;
  if (c.method == "eval") return 1;
  if (c.method != "train") return 0;
  return is_false(first_argument(m, c)) ? 1 : -1;
}

// The local name through which `torch.no_grad` is reachable: "torch.no_grad()",
// "T.no_grad()", "no_grad()"; empty when the file imports neither.
std::string no_grad_spelling(const Model& m) {
  std::string via_module, direct;
  for (const Binding& b : m.bindings()) {
    if (b.kind != BindingKind::Import || b.function >= 0) continue;
    std::string q = m.resolve_alias(b.name);
    if (q == "torch" && via_module.empty()) via_module = b.name + ".no_grad()";
    if (q == "torch.no_grad" && direct.empty()) direct = b.name + "()";
  }
  return !via_module.empty() ? via_module : direct;
}

// Edits wrapping `loop` in `with <guard>:`, its lines indented one unit
// deeper (the unit the loop's body uses, four spaces when it shares the
// loop's line). Lines inside a multi-line string keep their bytes. Empty
// when the loop does not start its own line.
std::vector<Edit> wrap_edits(const Model& m, TSNode loop, const std::string& guard) {
  std::string_view text = m.source().text();
  uint32_t s = start_byte(loop), e = end_byte(loop);
  uint32_t line_start = s;
  while (line_start > 0 && text[line_start - 1] != '\n') --line_start;
  std::string_view indent = text.substr(line_start, s - line_start);
  if (indent.find_first_not_of(" \t") != std::string_view::npos) return {};
  std::string unit = "    ";
  if (!indent.empty() && indent[0] == '\t') unit = "\t";
  TSNode body = field(loop, "body");
  if (!is_null(body)) {
    uint32_t b = start_byte(body), b_line = b;
    while (b_line > 0 && text[b_line - 1] != '\n') --b_line;
    std::string_view body_indent = text.substr(b_line, b - b_line);
    if (b_line > line_start && body_indent.find_first_not_of(" \t") == std::string_view::npos &&
        body_indent.size() > indent.size() && body_indent.substr(0, indent.size()) == indent)
      unit = std::string(body_indent.substr(indent.size()));
  }
  // Multi-line strings inside the loop: their lines are data.
  std::vector<std::pair<uint32_t, uint32_t>> strings;
  std::vector<TSNode> work{loop};
  while (!work.empty()) {
    TSNode n = work.back();
    work.pop_back();
    if (kind_of(n) == Kind::String) {
      if (ts_node_start_point(n).row != ts_node_end_point(n).row) strings.emplace_back(start_byte(n), end_byte(n));
      continue;
    }
    push_named_children(n, work);
  }
  std::vector<Edit> edits{Edit{s, s, fmt::format("with {}:\n{}{}", guard, indent, unit)}};
  for (uint32_t p = s; p < e; ++p) {
    if (text[p] != '\n' || p + 1 >= e) continue;
    uint32_t q = p + 1;
    uint32_t r = q;
    while (r < text.size() && (text[r] == ' ' || text[r] == '\t')) ++r;
    if (r >= text.size() || text[r] == '\n' || text[r] == '\r') continue;  // a blank line
    bool in_string = std::any_of(strings.begin(), strings.end(),
                                 [&](const auto& str) { return q > str.first && q < str.second; });
    if (!in_string) edits.push_back(Edit{q, q, unit});
  }
  return edits;
}

class EvalWithoutNoGrad final : public Check {
 public:
  void collect(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    // The grad states already recorded per name, one bit each: the names
    // are views into the model's calls, which outlive this function.
    // Each fact also names the file defining the callee when the engine
    // can tell (empty otherwise): a call of another file's `main` is no
    // call of this one.
    std::map<std::pair<std::string_view, std::string>, unsigned> seen;
    for (const Call& c : m.calls()) {
      if (c.callee.empty()) continue;
      std::string_view name = last_component(c.callee);
      // A recursive call says nothing about the callers.
      if (c.function >= 0 && m.functions()[c.function].name == name) continue;
      GradState g = m.grad_state(start_byte(c.node));
      unsigned bit = 1u << static_cast<unsigned>(g);
      std::string target = m.callee_file(c);
      unsigned& states = seen[{name, target}];
      if (states & bit) continue;
      states |= bit;
      std::string state = g == GradState::Enabled ? "enabled" : g == GradState::Disabled ? "disabled" : "maybe";
      ctx.fact("call-site", std::string(name), c.node, {std::move(state), std::move(target)});
    }
  }

  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    if (file_freezes_autograd(m)) return;
    std::set<int> reported_loops;
    std::unordered_map<int, bool> item_loops;  // loop -> over_items, asked once
    std::vector<int> checked_functions(m.functions().size() + 1, -1);  // index fn + 1: 1 candidate, 0 not
    std::vector<char> may_evaluate;  // index fn + 1, filled on the first call in a loop
    for (const Call& call : m.calls()) {
      if (call.loop < 0) continue;
      int fn = call.function;
      if (may_evaluate.empty()) may_evaluate = evaluation_candidates(m);
      if (!may_evaluate[static_cast<size_t>(fn + 1)] || !runs_module(m, call)) continue;
      int& candidate = checked_functions[static_cast<size_t>(fn + 1)];
      // 2: the function trains too, in its own loops (an epoch loop with a
      // training loop and an evaluation loop).
      if (candidate < 0) candidate = fn >= 0 && m.functions()[fn].cls >= 0 && is_framework_hook(m, fn) ? 0
                                     : needs_gradients(m, fn)                                        ? 2
                                                                                                     : 1;
      if (candidate == 0) continue;
      if (m.grad_state(start_byte(call.node)) != GradState::Enabled) continue;
      if (grad_decided_around(m, call.node, fn)) continue;
      int loop = loop_to_wrap(m, call);
      // A loop over items that are not batches of a data loader (a test
      // set's files, one pair per iteration) runs the model per item too;
      // it counts after an eval() call.
      bool per_item = false;
      if (loop < 0 && call.loop >= 0 && m.loops()[call.loop].function == fn) {
        auto [it, fresh] = item_loops.try_emplace(call.loop, false);
        if (fresh) it->second = over_items(m, call.loop);
        if (it->second) {
          loop = call.loop;
          per_item = true;
        }
      }
      if (loop < 0 || reported_loops.count(loop)) continue;
      std::string reason;

      bool by_mode_call = false;
      uint32_t eval_at = 0;
      if (!evaluation_context(m, fn, loop, reason, by_mode_call, eval_at)) continue;
      if (per_item && (!by_mode_call || loop_needs_gradients(m, loop))) continue;
      // Beside a training loop, only the loop that follows an eval() call
      // and needs no gradients itself is an evaluation loop.
      if (candidate == 2 && (!by_mode_call || !m.is_step_loop(loop) || loop_needs_gradients(m, loop) ||
                             !gradients_only_in_other_loops(m, fn, loop, eval_at)))
        continue;
      reported_loops.insert(loop);
      report(ctx, call, loop, reason);
    }
    // The functions that switch a module to eval mode (`x.eval()`,
    // `x.train(False)`): the two shapes below start from them, and most
    // files have none.
    std::vector<char> switches_to_eval(m.functions().size(), 0);
    bool any_switch = false;
    for (const Call& c : m.calls()) {
      if (c.function < 0 || (c.method != "eval" && c.method != "train") || mode_of(m, c) <= 0) continue;
      switches_to_eval[static_cast<size_t>(c.function)] = 1;
      any_switch = true;
    }
    if (!any_switch) return;
    // A step function the loop calls (`self.validation_step(x, y)` in a
    // loop over the validation batches) that switches a module to eval mode
    // and runs it with autograd on: the loop is the evaluation loop.
    std::vector<signed char> step_needs_gradients(m.functions().size(), -1);
    for (const Call& call : m.calls()) {
      if (call.loop < 0) continue;
      const Function* step = callee_in_file(m, call);
      if (!step) continue;
      int f = static_cast<int>(step - m.functions().data());
      if (!switches_to_eval[static_cast<size_t>(f)]) continue;
      signed char& needs = step_needs_gradients[static_cast<size_t>(f)];
      if (needs < 0) needs = needs_gradients(m, f) ? 1 : 0;
      // A framework hook the framework runs with grad disabled (the models say which).
      const HookModel* hook = step->hook;
      if (f == call.function || (hook && hook->grad_mode == GradMode::Disabled) || needs) continue;
      if (m.grad_state(start_byte(call.node)) != GradState::Enabled || grad_decided_around(m, call.node, call.function))
        continue;
      std::string eval_call = evaluation_step(m, f);
      if (eval_call.empty()) continue;
      // The loop runs one evaluation step per iteration: over data whatever
      // its iterable is named, unless it iterates a literal.
      int loop = loop_to_wrap(m, call);
      if (loop < 0 && m.loops()[call.loop].kind == LoopKind::For) {
        Kind iterable = kind_of(unparenthesize(field(m.loops()[call.loop].node, "right")));
        if (iterable != Kind::Tuple && iterable != Kind::List && iterable != Kind::Set) loop = call.loop;
      }
      if (loop < 0 || reported_loops.count(loop) || loop_needs_gradients(m, loop)) continue;
      reported_loops.insert(loop);
      report(ctx, call, loop, fmt::format("through `{}`, which calls `{}`", step->qualified_name, eval_call));
    }
    // A function serving both phases on a flag (`run_epoch(..., is_train)`):
    // with the flag false, the branches that train are dead.
    for (size_t f = 0; f < m.functions().size(); ++f) {
      if (!switches_to_eval[f]) continue;
      int fn = static_cast<int>(f);
      for (const std::string& flag : m.flag_parameters(fn)) {
        for (bool value : {false, true}) {
          if (auto found = phase_finding(m, fn, flag, value, reported_loops)) {
            reported_loops.insert(found->second);
            std::string guard = flag_guard(m, flag, value);
            report(ctx, *found->first, found->second, fmt::format("when `{}` is {}", flag, value ? "true" : "false"),
                   &guard);
          }
        }
      }
    }
    // The same function called with the flag set by a caller that switched
    // the module to eval mode first (`evaluate()` calling
    // `self._run_epoch(loader, train=False)` after `self.model.eval()`).
    for (const Call& c : m.calls()) {
      if (c.function < 0 || !switches_to_eval[static_cast<size_t>(c.function)]) continue;
      const Function* callee = callee_in_file(m, c);
      if (!callee || callee == &m.functions()[c.function]) continue;
      if (m.grad_state(start_byte(c.node)) != GradState::Enabled || grad_decided_around(m, c.node, c.function)) continue;
      const Call* mode = nullptr;  // the caller's last mode call before `c`
      for (const Call& other : m.calls()) {
        if (start_byte(other.node) >= start_byte(c.node)) break;
        if (other.function == c.function && mode_of(m, other) != 0) mode = &other;
      }
      if (!mode || mode_of(m, *mode) < 0) continue;
      int fn = static_cast<int>(callee - m.functions().data());
      for (const std::string& flag : m.flag_parameters(fn)) {
        std::optional<bool> value = literal_argument(m, c, *callee, flag);
        if (!value) continue;
        if (auto found = phase_finding(m, fn, flag, *value, reported_loops, true)) {
          reported_loops.insert(found->second);
          std::string reason = fmt::format("when `{}` is {}, as `{}` calls it after `{}`", flag, *value ? "true" : "false",
                                           m.functions()[c.function].qualified_name, code_snippet(m, mode->node));
          std::string guard = flag_guard(m, flag, *value);
          report(ctx, *found->first, found->second, reason, &guard);
        }
      }
    }
  }

 private:
  // The guard that turns autograd off in the phase where `flag` is `value`
  // and keeps the other as it was: `torch.set_grad_enabled(is_train)`
  // (`not is_train` when the evaluation phase is the true one), spelled the
  // way the file imports torch; empty when it imports no `torch` module.
  static std::string flag_guard(const Model& m, const std::string& flag, bool value) {
    std::string guard = no_grad_spelling(m);
    constexpr std::string_view kNoGrad = ".no_grad()";
    if (guard.size() <= kNoGrad.size() || guard.substr(guard.size() - kNoGrad.size()) != kNoGrad) return {};
    return fmt::format("{}.set_grad_enabled({}{})", guard.substr(0, guard.size() - kNoGrad.size()),
                       value ? "not " : "", flag);
  }

  // The literal True or False a call passes for parameter `name` of
  // `callee`, by keyword or by position.
  static std::optional<bool> literal_argument(const Model& m, const Call& c, const Function& callee,
                                              const std::string& name) {
    auto it = std::find(callee.params.begin(), callee.params.end(), name);
    if (it == callee.params.end()) return std::nullopt;
    size_t index = static_cast<size_t>(it - callee.params.begin());
    TSNode arg = unparenthesize(m.argument_for(c, callee, index, callee.cls >= 0 && !c.method.empty()));
    if (is_null(arg)) return std::nullopt;
    if (kind_of(arg) == Kind::True) return true;
    if (kind_of(arg) == Kind::False) return false;
    return std::nullopt;
  }

  // The function of this file a call runs: `step(...)`, `self.step(...)`.
  static const Function* callee_in_file(const Model& m, const Call& c) {
    if (c.method.empty()) return kind_of(unparenthesize(c.func)) == Kind::Identifier ? m.find_function(c.callee) : nullptr;
    if (kind_of(unparenthesize(c.receiver)) != Kind::Identifier || m.text(unparenthesize(c.receiver)) != "self")
      return nullptr;
    return m.find_method(m.class_of_function(c.function), c.method);
  }

  // The eval() call of a function that switches a module to eval mode and
  // then runs a module with autograd enabled, with no grad decision of its
  // own; empty when it is not such a function.
  static std::string evaluation_step(const Model& m, int f) {
    const Call* eval = nullptr;
    for (const Call& c : m.calls()) {
      if (c.function != f) continue;
      int mode = mode_of(m, c);
      if (mode > 0) eval = &c;
      if (mode < 0) eval = nullptr;
      // One batch per call: a function with its own loop over data is judged there.
      if (c.loop >= 0) continue;
      if (eval && start_byte(c.node) > start_byte(eval->node) && runs_module_through(m, c, 0) &&
          m.grad_state(start_byte(c.node)) == GradState::Enabled && !grad_decided_around(m, c.node, f))
        return std::string(code_snippet(m, eval->node));
    }
    return {};
  }

  // With `flag` == `value`: the last live mode call of `fn` is eval(),
  // nothing live needs gradients, and a live module call in a loop over data
  // runs with autograd enabled. The call and the loop to wrap.
  // `caller_eval`: the caller switched the module to eval mode before calling
  // `fn` (`self.model.eval(); return self._run_epoch(loader, train=False)`),
  // so `fn` needs no eval() of its own, only no live train().
  static std::optional<std::pair<const Call*, int>> phase_finding(const Model& m, int fn, const std::string& flag,
                                                                   bool value, const std::set<int>& reported,
                                                                   bool caller_eval = false) {
    const Call* eval = nullptr;
    bool trains = false;
    for (const Call& c : m.calls()) {
      if (!within(m, c.function, fn) || m.excluded_when(c.node, flag, value)) continue;
      if (m.is_backward_call(c) || !is_null(m.stepped_optimizer(c)) || c.method == "requires_grad_") return std::nullopt;
      if (c.function == fn && mode_of(m, c) != 0) {
        eval = mode_of(m, c) > 0 ? &c : nullptr;
        trains = trains || mode_of(m, c) < 0;
      }
    }
    if (m.functions()[fn].hook) return std::nullopt;
    if (caller_eval ? trains : !eval) return std::nullopt;
    for (const Call& c : m.calls()) {
      if (c.function != fn || c.loop < 0 || (eval && start_byte(c.node) < start_byte(eval->node))) continue;
      if (m.excluded_when(c.node, flag, value) || !runs_module(m, c)) continue;
      if (m.grad_state(start_byte(c.node)) != GradState::Enabled || grad_decided_around(m, c.node, fn)) continue;
      int loop = loop_to_wrap(m, c);
      if (loop < 0 || reported.count(loop)) continue;
      return std::make_pair(&c, loop);
    }
    return std::nullopt;
  }

  // Whether `c` runs a module, itself or through the functions of the file
  // it calls (`self.infer(x)` returning `self.module_(x)`).
  static bool runs_module_through(const Model& m, const Call& c, int depth) {
    if (runs_module(m, c)) return true;
    const Function* f = depth < 3 ? callee_in_file(m, c) : nullptr;
    if (!f) return false;
    int fn = static_cast<int>(f - m.functions().data());
    for (const Call& inner : m.calls())
      if (inner.function == fn && inner.node.id != c.node.id && runs_module_through(m, inner, depth + 1)) return true;
    return false;
  }

  // A backward pass or an optimizer step in the loop, itself or in a
  // function of the file it calls.
  static bool loop_needs_gradients(const Model& m, int loop) {
    for (const Call& c : m.calls()) {
      if (!m.loop_contains(loop, start_byte(c.node))) continue;
      if (m.is_backward_call(c) || !is_null(m.stepped_optimizer(c))) return true;
      const Function* f = callee_in_file(m, c);
      if (f && needs_gradients(m, static_cast<int>(f - m.functions().data()))) return true;
    }
    return false;
  }

  // A call that runs a module and records a graph: not a module without
  // trainable parameters on an input without history.
  static bool runs_module(const Model& m, const Call& c) {
    TSNode module = m.is_module_instance(c.func) ? c.func
                    : c.method == "forward" && !is_null(c.receiver) && m.is_module_instance(c.receiver) ? c.receiver
                                                                                                          : TSNode{};
    if (is_null(module)) return false;
    if (m.trainable_parameters(m.value(module)) != Truth::False) return true;
    bool attached = false;
    for_each_named_child(c.args, [&](TSNode a) {
      if (kind_of(a) == Kind::KeywordArgument) a = field(a, "value");
      attached = attached || m.value(a).grad == Provenance::Attached;
    });
    return attached;
  }

  static bool is_framework_hook(const Model& m, int fn) {
    std::string_view name = m.functions()[fn].name;
    return std::find(kFrameworkSteps.begin(), kFrameworkSteps.end(), name) != kFrameworkSteps.end() ||
           name.rfind("on_validation", 0) == 0 || name.rfind("on_test", 0) == 0 || name.rfind("on_predict", 0) == 0;
  }

  // A unit test that pytest collects (`test_*` in a `Test*` class or in a
  // file named `test_*.py` or `*_test.py`): named for a test suite, not for
  // an evaluation pass over data.
  static bool pytest_test(const Model& m, int fn) {
    const Function& f = m.functions()[fn];
    if (!f.name.starts_with("test_")) return false;
    if (f.cls >= 0 && m.classes()[f.cls].name.starts_with("Test")) return true;
    std::string_view file = m.path();
    file = file.substr(file.find_last_of("/\\") == std::string_view::npos ? 0 : file.find_last_of("/\\") + 1);
    return file.starts_with("test_") || file.ends_with("_test.py");
  }

  // Per function (index fn + 1): whether it can be an evaluation context at
  // all, that is calls eval() or train() itself or is named for evaluation
  // (evaluation_context needs one of them). Most functions are neither, and
  // their module calls need not be asked about.
  static std::vector<char> evaluation_candidates(const Model& m) {
    std::vector<char> out(m.functions().size() + 1, 0);
    for (const Call& c : m.calls())
      if (c.method == "eval" || c.method == "train") out[static_cast<size_t>(c.function + 1)] = 1;
    for (size_t f = 0; f < m.functions().size(); ++f)
      if (!out[f + 1] && named_for_evaluation(m.functions()[f].name)) out[f + 1] = 1;
    return out;
  }

  // The loop the fix wraps: the innermost one around the call that iterates a
  // data loader, else the outermost step loop around it; -1 when no loop
  // around the call is a loop over data.
  // A for loop whose iterations run a module on an item of their own, over
  // something other than a literal display or a range of literal bounds.
  static bool over_items(const Model& m, int loop) {
    const Loop& l = m.loops()[loop];
    if (l.kind != LoopKind::For) return false;
    TSNode iterable = unparenthesize(field(l.node, "right"));
    Kind k = kind_of(iterable);
    if (k == Kind::List || k == Kind::Tuple || k == Kind::Set || k == Kind::Dictionary) return false;
    if (k == Kind::Call && m.qualify(field(iterable, "function")) == "range") {
      // A count of literal bounds (`range(100)`, or `n = 100` then
      // `range(n)`): a fixed number of iterations, whatever the data.
      TSNode args = field(iterable, "arguments");
      bool literal = ts_node_named_child_count(args) > 0;
      for (uint32_t i = 0; i < ts_node_named_child_count(args); ++i) {
        TSNode a = unparenthesize(ts_node_named_child(args, i));
        if (kind_of(a) == Kind::Identifier) {
          const Binding* b = m.reaching(m.text(a), start_byte(a), l.function);
          if (b && b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value)) a = unparenthesize(b->value);
        }
        if (kind_of(a) != Kind::Integer) literal = false;
      }
      if (literal) return false;
    }
    return m.runs_module_per_item(loop);
  }

  static int loop_to_wrap(const Model& m, const Call& call) {
    std::vector<int> loops = m.enclosing_loops(start_byte(call.node), call.function);
    for (int l : loops) {
      const Loop& lp = m.loops()[l];
      if (lp.kind == LoopKind::For && m.is_data_loader(field(lp.node, "right"))) return l;
    }
    int chosen = -1;
    for (int l : loops)
      if (m.loops()[l].kind != LoopKind::Comprehension && m.is_step_loop(l)) chosen = l;
    return chosen;
  }

  // Whether `fn` evaluates at `loop`: the last mode call before the loop is
  // eval(), or there is none and the function is named for evaluation. A
  // train() inside the loop means the loop trains.
  static bool evaluation_context(const Model& m, int fn, int loop, std::string& reason, bool& by_mode_call,
                                 uint32_t& eval_at) {
    const Loop& l = m.loops()[loop];
    uint32_t at = start_byte(l.node);
    const Call* last = nullptr;
    for (const Call& c : m.calls()) {
      if (c.function != fn) continue;
      int mode = mode_of(m, c);
      if (mode == 0) continue;
      uint32_t s = start_byte(c.node);
      if (s >= at && s < end_byte(l.node) && mode < 0) return false;
      if (s < at) last = &c;
    }
    if (last) {
      if (mode_of(m, *last) < 0) return false;
      reason = fmt::format("after `{}`", code_snippet(m, last->node));
      by_mode_call = true;
      eval_at = start_byte(last->node);
      return true;
    }
    if (fn < 0 || !named_for_evaluation(m.functions()[fn].name) || pytest_test(m, fn)) return false;
    reason = fmt::format("in `{}`", m.functions()[fn].qualified_name);
    return true;
  }

  // `phase_guard`: the guard for a loop that also trains (empty: no fix).
  static void report(CheckContext& ctx, const Call& call, int loop, const std::string& reason,
                     const std::string* phase_guard = nullptr) {
    const Model& m = ctx.model();
    std::string module = code_snippet(m, is_null(call.receiver) || call.method != "forward" ? call.func : call.receiver);
    Diagnostic d = ctx.diagnostic(
        call.node, fmt::format(fmt::runtime(messages::TL006::evaluates), fmt::arg("module", module),
                               fmt::arg("reason", reason)));
    std::string guard = phase_guard ? *phase_guard : no_grad_spelling(m);
    d.help = phase_guard ? "the loop also trains: wrap it in `with torch.set_grad_enabled(<training flag>):`"
                         : "wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`), or decorate the "
                           "function with `@torch.no_grad()`";
    if (!guard.empty()) {
      std::vector<Edit> edits = wrap_edits(m, m.loops()[loop].node, guard);
      // Unsafe: code in the loop that needed gradients (a hand-written
      // optimisation step, a hook) stops receiving them.
      if (!edits.empty()) d.fix = Fix{fmt::format("Wrap the loop in `with {}:`", guard), FixSafety::Unsafe, std::move(edits)};
    }
    int fn = call.function;
    if (fn < 0) {
      ctx.report(std::move(d));
      return;
    }
    std::string name = m.functions()[fn].name;
    std::string here = std::filesystem::path(ctx.path()).lexically_normal().string();
    ctx.defer(std::move(d), [name, here](const ProjectIndex& index, Diagnostic& diag) {
      std::vector<const Fact*> sites;
      for (const Fact* f : index.find("call-site", name))
        if (f->values.size() < 2 || f->values[1].empty() || f->values[1] == here) sites.push_back(f);
      if (sites.empty()) return true;
      for (const Fact* f : sites) {
        if (f->values.empty() || f->values.front() != "enabled") continue;
        diag.message += fmt::format(" ({})", fmt::format(fmt::runtime(messages::TL006::called_with_grad),
                                                         fmt::arg("function", name),
                                                         fmt::arg("location", index.location(f->file, f->line))));
        return true;
      }
      return false;  // every call runs with grad disabled, or decided at run time
    });
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(EvalWithoutNoGrad, "TL006")

}  // namespace torchleak::python
