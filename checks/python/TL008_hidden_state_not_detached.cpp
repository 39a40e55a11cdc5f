// TL008 hidden-state-not-detached: a recurrent state fed back into the next
// forward call of a training loop without being detached. Its autograd
// history then spans every batch so far: each backward() reaches through all
// earlier graphs (or fails on their freed buffers), and memory and backward
// time grow with every batch.
//
// A finding needs all of:
//   - an assignment whose value runs a module (`model(x, h)`, `self.rnn(x,
//     h)`, `model.forward(x, h)`, a method of the file's Module classes that
//     runs one: `model.step(x, states)`) with a state argument (any argument
//     but the first positional one: a name, an attribute or a tuple of them)
//     that the same assignment binds again (`out, h = rnn(x, h)`, `out, (h,
//     c) = lstm(x, (h, c))`) or that a later statement of the iteration
//     binds from what the call returned (`memory = outputs.memory`,
//     `self.previous = hidden`; only when the file shows the forward that
//     builds it), with autograd not disabled there;
//   - an iteration the state survives: the innermost loop around the call,
//     in the same function, whose iteration calls backward (directly or
//     through a helper of the file), or, for a call in no loop, one call of a
//     training step (a framework's training_step, or a per-step function
//     running backward itself) for a state kept on `self`;
//   - the state bound before that loop (a parameter, an attribute, an
//     earlier assignment), not started afresh inside it (`h =
//     model.init_hidden(bs)`, `h = None`, also in another per-step hook of
//     the class for a state on `self`; a lazy first initialisation under
//     `if h is None:` does not count), and not detached inside it:
//     `h.detach()` / `.data` anywhere in a rebinding, `h.detach_()` (also
//     over the elements of a tuple), `state.detach()` on an object when a
//     class of the file defines detach(), or a helper that detaches
//     (`repackage_hidden(h)`). A helper of this file is read; a helper of
//     another file of the project is the one the file's imports name
//     (`from utils import repackage_hidden`, `utils.repackage_hidden`), or
//     for `self.helper(...)` a method of a base class imported from another
//     file, and is read from that file's model; a helper found nowhere
//     counts as detaching;
//   - no module of the file whose forward returns the state detached.
// A state stored on `self` by a module's own forward is TL003's finding.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

// Builtins that never detach what they are given.
constexpr std::array<std::string_view, 12> kBuiltins = {"tuple", "list", "len",   "zip",  "map",   "isinstance",
                                                        "type",  "print", "range", "dict", "sorted", "reversed"};
// torch factories whose result is a fresh tensor (no history).
constexpr std::array<std::string_view, 12> kTensorFactories = {
    "zeros", "ones", "empty", "full", "randn", "rand", "zeros_like", "ones_like", "empty_like", "randn_like",
    "rand_like", "full_like"};
constexpr std::array<std::string_view, 5> kNewTensorMethods = {"new_zeros", "new_ones", "new_empty", "new_full",
                                                               "new_tensor"};

template <size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

int index_of(const Model& m, const Function* f) { return f ? static_cast<int>(f - m.functions().data()) : -1; }

// The module-level functions of the file by name, the first definition of a
// name winning as in Model::find_function, which scans every function.
NameMap<int> module_functions(const Model& m) {
  NameMap<int> out;
  for (size_t i = 0; i < m.functions().size(); ++i) {
    const Function& f = m.functions()[i];
    if (f.parent < 0 && f.cls < 0) out.emplace(f.name, static_cast<int>(i));
  }
  return out;
}

// The method of the caller's class (or its bases in the file) that
// `self.helper(...)` runs, or -1.
int self_callee(const Model& m, const Call& c) {
  if (c.method.empty() || is_null(c.receiver) || m.text(c.receiver) != "self") return -1;
  for (int f = c.function; f >= 0; f = m.functions()[f].parent)
    if (m.functions()[f].cls >= 0) return index_of(m, m.find_method(m.functions()[f].cls, c.method));
  return -1;
}

// The function of this file a call runs: a module-level `helper(...)` or a
// `self.helper(...)` of the caller's class (or its bases in the file).
int callee_function(const Model& m, const Call& c) {
  if (kind_of(c.func) == Kind::Identifier) return index_of(m, m.find_function(m.text(c.func)));
  return self_callee(m, c);
}

// The same, with the module-level functions looked up in `functions`.
int callee_function(const Model& m, const NameMap<int>& functions, const Call& c) {
  if (kind_of(c.func) != Kind::Identifier) return self_callee(m, c);
  auto it = functions.find(m.text(c.func));
  return it == functions.end() ? -1 : it->second;
}

// Whether the `data` at [at, at + 4) of the source is the attribute name of
// an attribute node: the tree, walked down to the leaf there, decides.
// `dot`, when known, is a dot before it on its line with only spaces
// between: the smallest node holding both is then the attribute, if any.
bool data_attribute_at(const Model& m, uint32_t at, std::optional<uint32_t> dot) {
  if (dot) {
    TSNode n = ts_node_descendant_for_byte_range(m.root(), *dot, at + 4);
    if (kind_of(n) != Kind::Attribute || end_byte(n) != at + 4) return false;
    TSNode name = field(n, "attribute");
    return start_byte(name) == at && end_byte(name) == at + 4;
  }
  TSTreeCursor cursor = ts_tree_cursor_new(m.root());
  TSNode parent{}, leaf = m.root();
  // Down through the child holding `at`, to the leaf.
  while (ts_tree_cursor_goto_first_child(&cursor)) {
    bool found = false;
    do {
      TSNode child = ts_tree_cursor_current_node(&cursor);
      if (end_byte(child) <= at) continue;
      found = start_byte(child) <= at;
      break;
    } while (ts_tree_cursor_goto_next_sibling(&cursor));
    if (!found) break;
    parent = leaf;
    leaf = ts_tree_cursor_current_node(&cursor);
  }
  ts_tree_cursor_delete(&cursor);
  if (is_null(parent) || start_byte(leaf) != at || end_byte(leaf) != at + 4) return false;
  if (kind_of(leaf) != Kind::Identifier || kind_of(parent) != Kind::Attribute) return false;
  return ts_node_eq(field(parent, "attribute"), leaf);
}

// Marks the functions whose body reads `.data` (the pre-0.4 way to detach),
// nested functions included. Rather than walking every body, each `data` of
// the source that can be an attribute name (after a dot, maybe across
// spaces, a comment or a line continuation) is asked of the tree once.
void mark_data_reads(const Model& m, std::vector<char>& detaches) {
  std::string_view text = m.source().text();
  const bool recovered = m.has_syntax_errors();
  for (size_t at = text.find("data"); at != std::string_view::npos; at = text.find("data", at + 1)) {
    if (at > 0 && word_byte(text[at - 1])) continue;
    if (at + 4 < text.size() && word_byte(text[at + 4])) continue;
    // Between an attribute's dot and its name there are only spaces, line
    // continuations and comments: back over the first two, then a dot, or
    // the end of a line holding a comment, or a byte of a wider space. A tree
    // with syntax errors may hold anything there (`h.?data` recovers as an
    // attribute named `data`): the tree alone decides.
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; };
    size_t p = at;
    while (p > 0 && space(text[p - 1])) --p;
    std::optional<uint32_t> dot;
    if (!recovered && p > 0 && text[p - 1] == '.') {
      dot = static_cast<uint32_t>(p - 1);
    } else if (!recovered) {
      if (p == 0) continue;
      unsigned char before = static_cast<unsigned char>(text[p - 1]);
      if (before != '\n' && before != '\r' && before < 0x80) continue;
      while (p > 0 && (space(text[p - 1]) || text[p - 1] == '\n' || text[p - 1] == '\r' || text[p - 1] == '\\')) --p;
      if (p == 0) continue;
      before = static_cast<unsigned char>(text[p - 1]);
      size_t line = text.rfind('\n', p - 1);
      line = line == std::string_view::npos ? 0 : line;
      if (before != '.' && before < 0x80 && text.substr(line, p - line).find('#') == std::string_view::npos) continue;
    }
    auto in_body = [&](int f) {
      TSNode body = m.functions()[f].body;
      return !is_null(body) && start_byte(body) <= at && at < end_byte(body);
    };
    bool undecided = false;
    for (int f = m.function_at(static_cast<uint32_t>(at)); f >= 0 && !undecided; f = m.functions()[f].parent)
      undecided = !detaches[f] && in_body(f);
    if (!undecided || !data_attribute_at(m, static_cast<uint32_t>(at), dot)) continue;
    for (int f = m.function_at(static_cast<uint32_t>(at)); f >= 0; f = m.functions()[f].parent)
      if (in_body(f)) detaches[f] = 1;
  }
}

// Per function of the file: whether it detaches what it handles (calls
// `.detach()` / `.detach_()` or reads `.data`) and whether it calls backward,
// directly or through the functions of the file it calls (repackage_hidden's
// recursion over tuples included). Computed once, in linear passes; the
// backward half only when asked (the check needs it, the facts do not).
struct Summaries {
  std::vector<char> detaches;
  std::vector<char> backward;
  // Which functions of another file's model detach (foreign_detaches).
  mutable std::map<const Model*, std::vector<char>> foreign;
};

Summaries summarize(const Model& m, bool with_backward) {
  size_t n = m.functions().size();
  Summaries s{std::vector<char>(n, 0), std::vector<char>(n, 0), {}};
  bool any = false;
  for (const Call& c : m.calls()) {
    bool detach = c.method == "detach" || c.method == "detach_";
    bool backward = with_backward && m.is_backward_call(c);
    if (!detach && !backward) continue;
    for (int f = c.function; f >= 0; f = m.functions()[f].parent) {
      if (detach) s.detaches[f] = 1;
      if (backward) s.backward[f] = 1;
      any = true;
    }
  }
  mark_data_reads(m, s.detaches);
  any = any || std::find(s.detaches.begin(), s.detaches.end(), 1) != s.detaches.end();
  // Only a function that detaches or calls backward itself passes it on to
  // its callers: with none, the calls need not be resolved.
  if (!any) return s;
  NameMap<int> functions = module_functions(m);
  std::vector<std::vector<int>> callees(n);
  for (const Call& c : m.calls()) {
    int callee = c.function >= 0 ? callee_function(m, functions, c) : -1;
    if (callee < 0) continue;
    for (int f = c.function; f >= 0; f = m.functions()[f].parent)
      if (callee != f) callees[f].push_back(callee);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t f = 0; f < n; ++f) {
      for (int callee : callees[f]) {
        if (s.detaches[callee] && !s.detaches[f]) {
          s.detaches[f] = 1;
          changed = true;
        }
        if (s.backward[callee] && !s.backward[f]) {
          s.backward[f] = 1;
          changed = true;
        }
      }
    }
  }
  return s;
}

bool loop_calls_backward(const Model& m, const Summaries& sums, int loop) {
  const Loop& l = m.loops()[loop];
  for (const Call& c : m.calls()) {
    if (c.function != l.function || !m.loop_contains(loop, start_byte(c.node))) continue;
    if (m.is_backward_call(c)) return true;
    int callee = callee_function(m, c);
    if (callee >= 0 && sums.backward[callee]) return true;
  }
  return false;
}

// What an expression does to a state it rebinds.
struct DetachAnswer {
  bool detaches = false;
  std::string keeping;  // a helper of another file that does not detach: "`name` (file:line)"
};

// Whether the function `fn` of another file's model detaches what it
// handles: that model's summary, computed once per check of a file.
bool foreign_detaches(const Summaries& sums, const Model& m, int fn) {
  auto it = sums.foreign.find(&m);
  if (it == sums.foreign.end()) it = sums.foreign.emplace(&m, summarize(m, false).detaches).first;
  return it->second[static_cast<size_t>(fn)];
}

// The function another file defines for a helper this file calls: through
// an import (`repackage_hidden`, `utils.repackage_hidden`), or for
// `self.helper` a method of a base class that an import names.
std::optional<std::pair<const Model*, const Function*>> foreign_helper(const Model& m, TSNode call_node, TSNode func,
                                                                       bool on_self, std::string_view method) {
  if (!on_self) {
    auto def = m.foreign_definition(func);
    if (def && def->model && def->function) return std::make_pair(def->model, def->function);
    return std::nullopt;
  }
  int fn = m.function_at(start_byte(call_node));
  while (fn >= 0 && m.functions()[fn].cls < 0) fn = m.functions()[fn].parent;
  if (fn < 0) return std::nullopt;
  const Class& cls = m.classes()[m.functions()[fn].cls];
  std::optional<std::pair<const Model*, const Function*>> found;
  for_each_named_child(field(cls.node, "superclasses"), [&](TSNode base) {
    if (found || kind_of(base) == Kind::KeywordArgument) return;
    auto def = m.foreign_definition(base);
    if (!def || !def->model || def->cls < 0) return;
    if (const Function* f = def->model->find_method(def->cls, method)) found = std::make_pair(def->model, f);
  });
  return found;
}

// Reads `value`: a `.detach()` / `.detach_()` call or `.data` detaches; a
// call of a detaching function of the file, or of another file that an
// import names, detaches; a call of a plain or `self.` function found
// nowhere counts as detaching (it may). Module calls, tensor methods,
// builtins and torch functions decide nothing.
DetachAnswer value_detaches(const Model& m, const Summaries& sums, TSNode value) {
  DetachAnswer out;
  std::vector<TSNode> work{value};
  while (!work.empty()) {
    TSNode n = work.back();
    work.pop_back();
    if (is_null(n)) continue;
    Kind k = kind_of(n);
    if (k == Kind::Attribute && m.text(field(n, "attribute")) == "data") out.detaches = true;
    if (k == Kind::Call) {
      TSNode func = unparenthesize(field(n, "function"));
      std::string_view method = kind_of(func) == Kind::Attribute ? m.text(field(func, "attribute")) : "";
      if (method == "detach" || method == "detach_") out.detaches = true;
      TSNode receiver = kind_of(func) == Kind::Attribute ? field(func, "object") : TSNode{};
      bool plain = kind_of(func) == Kind::Identifier;
      bool on_self = !is_null(receiver) && m.text(receiver) == "self";
      // `utils.repackage_hidden(h)`: a function reached through an imported module.
      bool through_module = false;
      if (!is_null(receiver) && kind_of(receiver) == Kind::Identifier) {
        const Binding* b = m.reaching(m.text(receiver), start_byte(receiver), m.function_at(start_byte(receiver)));
        through_module = (b && b->kind == BindingKind::Import) || m.resolve_alias(m.text(receiver)) != m.text(receiver);
      }
      if ((plain || on_self || through_module) && !m.is_module_instance(func)) {
        std::string callee = m.qualify(func);
        std::string_view simple = plain ? m.text(func) : method;
        int fn = -1;
        if (plain) {
          // A function nested in one around the call (`def to_dev(s): ...` in
          // `train`), else a module-level one.
          int scope = m.function_at(start_byte(n));
          for (size_t f = 0; f < m.functions().size() && fn < 0; ++f) {
            const Function& def = m.functions()[f];
            if (def.name != simple || def.parent < 0) continue;
            for (int s = scope; s >= 0 && fn < 0; s = m.functions()[s].parent)
              if (s == def.parent) fn = static_cast<int>(f);
          }
          if (fn < 0) fn = index_of(m, m.find_function(simple));
        }
        if (on_self) {
          for (int f = m.function_at(start_byte(n)); f >= 0 && fn < 0; f = m.functions()[f].parent)
            if (m.functions()[f].cls >= 0) fn = index_of(m, m.find_method(m.functions()[f].cls, simple));
        }
        if (fn >= 0) {
          if (sums.detaches[fn]) out.detaches = true;
        } else if (callee.rfind("torch.", 0) != 0 && !(plain && one_of(simple, kBuiltins)) &&
                   !m.find_class(simple)) {
          auto helper = foreign_helper(m, n, func, on_self, simple);
          if (!helper || foreign_detaches(sums, *helper->first, index_of(*helper->first, helper->second))) {
            out.detaches = true;
          } else if (out.keeping.empty()) {
            out.keeping = fmt::format("`{}` ({}:{})", simple, helper->first->path(),
                                      helper->first->position(helper->second->node).line);
          }
        }
      }
    }
    push_named_children(n, work);
  }
  return out;
}

// Names bound by an assignment target, one level into nested tuples:
// `out, (h, c)` gives out, h, c.
void target_names(const Model& m, TSNode t, std::vector<std::string>& out, int depth = 0) {
  t = unparenthesize(t);
  switch (kind_of(t)) {
    case Kind::Identifier:
    case Kind::Attribute: {
      std::string q = m.qualify(t);
      if (!q.empty()) out.push_back(std::move(q));
      return;
    }
    case Kind::PatternList:
    case Kind::TuplePattern:
    case Kind::ListPattern:
    case Kind::Tuple:
    case Kind::List:
    case Kind::ExpressionList:
      if (depth > 1) return;
      for (uint32_t i = 0; i < ts_node_named_child_count(t); ++i)
        target_names(m, ts_node_named_child(t, i), out, depth + 1);
      return;
    default: return;
  }
}

// A state argument as the names it passes: `h`, `self.hidden`, or each name
// of `(h, c)` (`in_tuple` set).
void argument_names(const Model& m, TSNode a, std::vector<std::pair<std::string, bool>>& out) {
  a = unparenthesize(a);
  if (kind_of(a) == Kind::KeywordArgument) a = unparenthesize(field(a, "value"));
  Kind k = kind_of(a);
  if (k == Kind::Identifier || k == Kind::Attribute) {
    std::string q = m.qualify(a);
    if (!q.empty()) out.emplace_back(std::move(q), false);
    return;
  }
  if (k != Kind::Tuple && k != Kind::List) return;
  for (uint32_t i = 0; i < ts_node_named_child_count(a); ++i) {
    TSNode e = unparenthesize(ts_node_named_child(a, i));
    if (kind_of(e) != Kind::Identifier && kind_of(e) != Kind::Attribute) continue;
    std::string q = m.qualify(e);
    if (!q.empty()) out.emplace_back(std::move(q), true);
  }
}

// A state fed back: read by the call and bound again, within one iteration,
// by its assignment or by a later statement holding what it returned
// (`memory = outputs.memory`, `self.previous = hidden`).
struct FedState {
  std::string name;
  bool in_tuple = false;  // passed as an element of `(h, c)`: one tensor
  bool derived = false;   // bound by a later statement, not by the call's assignment
};

// The span the state must not survive undetached: one iteration of a
// training loop around the call, or one call of a training-step function
// with no loop of its own (Lightning's training_step), whose states live on
// `self` between calls.
struct Iteration {
  int function = -1;
  int loop = -1;  // -1: the function's body, one training step per call
  TSNode node{};  // the loop, or the function's body

  bool contains(const Model& m, uint32_t byte) const {
    if (loop >= 0) return m.loop_contains(loop, byte);
    return start_byte(node) <= byte && byte < end_byte(node);
  }
};

// Whether a call passes anything but its first positional argument, where a
// state would be: most module calls (`model(x)`) pass nothing else, and are
// then decided before the costlier questions.
bool passes_state_argument(const Call& c) {
  uint32_t n = is_null(c.args) ? 0 : ts_node_named_child_count(c.args);
  return n >= 2 || (n == 1 && kind_of(ts_node_named_child(c.args, 0)) == Kind::KeywordArgument);
}

// Whether `value` reads one of the names the call's assignment bound.
bool reads_result(const Model& m, TSNode value, const std::vector<std::string>& results) {
  return !is_null(value) &&
         std::any_of(results.begin(), results.end(), [&](const std::string& r) { return m.mentions(value, r); });
}

std::vector<FedState> fed_states(const Model& m, const Call& c, TSNode assignment, const Iteration& it,
                                 std::vector<std::string>& results) {
  target_names(m, field(assignment, "left"), results);
  std::vector<std::pair<std::string, bool>> args, input;
  bool first_positional = true;
  for (uint32_t i = 0; i < ts_node_named_child_count(c.args); ++i) {
    TSNode a = ts_node_named_child(c.args, i);
    Kind k = kind_of(a);
    if (k == Kind::Comment || k == Kind::ListSplat || k == Kind::DictionarySplat) continue;
    if (k != Kind::KeywordArgument && first_positional) {  // the input, not a state
      first_positional = false;
      argument_names(m, a, input);
      continue;
    }
    argument_names(m, a, args);
  }
  // A later statement of the iteration binding the state from the call's
  // results: `memory = outputs.memory` after `outputs = model(x, memory=memory)`.
  auto rebound_from_results = [&](const std::string& name) {
    for (const Binding* b : m.bindings_of(name, it.function)) {
      if (b->start < end_byte(assignment) || !it.contains(m, b->start)) continue;
      if (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) continue;
      if (reads_result(m, b->value, results)) return true;
    }
    return false;
  };
  std::vector<FedState> out;
  for (auto& arg : args) {
    // Not a structured binding: clang 14 (the fuzz preset) cannot capture one in a lambda.
    const auto& name = arg.first;
    bool rebound = std::find(results.begin(), results.end(), name) != results.end();
    if (!rebound && !rebound_from_results(name)) continue;
    // `x, _ = attn(x, x, x)`: the input run through again, not a carried state.
    if (std::any_of(input.begin(), input.end(), [&](const auto& i) { return i.first == name; })) continue;
    if (std::any_of(out.begin(), out.end(), [&](const FedState& s) { return s.name == name; })) continue;
    out.push_back({name, arg.second, !rebound});
  }
  return out;
}

// Whether the loop variable `var`, at `node`, iterates over something that
// mentions `name`: `for s in hidden: s.detach_()`.
bool iterates_over(const Model& m, TSNode node, TSNode stop, std::string_view var, std::string_view name) {
  auto binds = [&](TSNode left, TSNode right) {
    return !is_null(left) && m.text(unparenthesize(left)) == var && m.mentions(right, name);
  };
  for (TSNode p = ts_node_parent(node); !is_null(p); p = ts_node_parent(p)) {
    Kind k = kind_of(p);
    if (k == Kind::ForStatement && binds(field(p, "left"), field(p, "right"))) return true;
    if (k == Kind::ListComprehension || k == Kind::SetComprehension || k == Kind::GeneratorExpression ||
        k == Kind::DictionaryComprehension) {
      for (uint32_t i = 0; i < ts_node_named_child_count(p); ++i) {
        TSNode clause = ts_node_named_child(p, i);
        if (kind_of(clause) == Kind::ForInClause && binds(field(clause, "left"), field(clause, "right"))) return true;
      }
    }
    if (ts_node_eq(p, stop)) break;
  }
  return false;
}

// Whether `node` sits under `if <name> is None:` (up to `stop`): a lazy
// first initialisation, which runs once and starts nothing afresh.
bool under_none_test(const Model& m, TSNode node, TSNode stop, std::string_view name) {
  for (TSNode p = ts_node_parent(node); !is_null(p) && !ts_node_eq(p, stop); p = ts_node_parent(p)) {
    if (kind_of(p) != Kind::IfStatement) continue;
    TSNode cond = unparenthesize(field(p, "condition"));
    if (kind_of(cond) != Kind::ComparisonOperator || ts_node_named_child_count(cond) != 2) continue;
    TSNode left = unparenthesize(ts_node_named_child(cond, 0)), right = ts_node_named_child(cond, 1);
    std::string_view op = m.text(cond).substr(end_byte(left) - start_byte(cond), start_byte(right) - end_byte(left));
    bool is_none_test = kind_of(right) == Kind::None && op.find("is") != std::string_view::npos &&
                        op.find("not") == std::string_view::npos;
    if (is_none_test && m.qualify(left) == name) return true;
  }
  return false;
}

// Whether a binding starts state `name` afresh: a for or with target, or an
// assignment whose value reads neither the state nor the call's results
// (`h = model.init_hidden(bs)`, `h = None`), unless it only fills a state
// that is None (`if h is None:`).
bool starts_afresh(const Model& m, const Binding& b, std::string_view name, const std::vector<std::string>& results,
                   TSNode stop) {
  if (b.kind == BindingKind::ForTarget || b.kind == BindingKind::WithTarget) return true;
  if (b.kind != BindingKind::Assign && b.kind != BindingKind::NamedExpr) return false;
  if (!is_null(b.value) && (m.mentions(b.value, name) || reads_result(m, b.value, results))) return false;
  return !under_none_test(m, b.statement, stop, name);
}

// Whether the iteration starts state `name` afresh; for an attribute of a
// training step's `self`, also another per-step hook of its class
// (`on_train_batch_start` setting `self.hidden = None`).
bool started_afresh(const Model& m, std::string_view name, const Iteration& it,
                    const std::vector<std::string>& results) {
  for (const Binding* b : m.bindings_of(name, it.function))
    if (it.contains(m, b->start) && starts_afresh(m, *b, name, results, it.node)) return true;
  if (it.loop >= 0 || name.rfind("self.", 0) != 0) return false;
  int cls = m.class_of_function(it.function);
  for (size_t f = 0; f < m.functions().size(); ++f) {
    const Function& fn = m.functions()[f];
    if (static_cast<int>(f) == it.function || fn.cls != cls || cls < 0 || !fn.hook) continue;
    if (fn.hook->role != HookRole::TrainingStep && fn.hook->role != HookRole::PerStep) continue;
    for (const Binding* b : m.bindings_of(name, static_cast<int>(f)))
      if (starts_afresh(m, *b, name, {}, fn.body)) return true;
  }
  return false;
}

// Whether a class of the file defines a method `name`: `state.detach()` on
// such an object may detach in place (a decoder state's tensors).
bool file_defines_method(const Model& m, std::string_view name) {
  for (size_t k = 0; k < m.classes().size(); ++k)
    if (m.find_method(static_cast<int>(k), name)) return true;
  return false;
}

// What happens to state `name` inside the iteration, the feedback statement
// aside. `keeping` receives a helper of another file the state goes through
// that does not detach it (for the message).
enum class Fate { Kept, Freed };

Fate fate_in_iteration(const Model& m, const Summaries& sums, std::string_view name, const Iteration& it,
                       TSNode feedback, const std::vector<std::string>& results, std::string& keeping) {
  if (started_afresh(m, name, it, results)) return Fate::Freed;
  auto weigh = [&](TSNode value) {
    DetachAnswer a = value_detaches(m, sums, value);
    if (a.detaches) return true;
    if (keeping.empty()) keeping = a.keeping;
    return false;
  };
  for (const Binding* b : m.bindings_of(name, it.function)) {
    if (!it.contains(m, b->start) || ts_node_eq(b->statement, feedback)) continue;
    if (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) continue;
    if (!is_null(b->value) && weigh(b->value)) return Fate::Freed;
  }
  for (const Call& c : m.calls()) {
    if (c.function != it.function || !it.contains(m, start_byte(c.node))) continue;
    if (start_byte(c.node) >= start_byte(feedback) && end_byte(c.node) <= end_byte(feedback)) continue;
    // h.detach_(), hidden[0].detach_(), `for s in hidden: s.detach_()`.
    if (c.method == "detach_" && !is_null(c.receiver)) {
      if (m.mentions(c.receiver, name)) return Fate::Freed;
      if (kind_of(c.receiver) == Kind::Identifier && iterates_over(m, c.node, it.node, m.text(c.receiver), name))
        return Fate::Freed;
    }
    if (!c.statement) continue;
    // `dec_state.detach()` as a statement: a tensor's detach() is lost (the
    // state is kept), but an object of a class of the file with a detach()
    // method of its own detaches its tensors in place.
    if (c.method == "detach" && !is_null(c.receiver) && m.text(c.receiver) == name &&
        file_defines_method(m, "detach"))
      return Fate::Freed;
    // A statement calling a helper on the state: `detach_state(hidden)`,
    // `self.reset_hidden()` for an attribute the method rebinds.
    int callee = callee_function(m, c);
    if (name.rfind("self.", 0) == 0 && callee >= 0 && !m.bindings_of(name, callee).empty()) return Fate::Freed;
    // The same for a method inherited from a base class of another file.
    if (name.rfind("self.", 0) == 0 && callee < 0 && !is_null(c.receiver) && m.text(c.receiver) == "self") {
      if (auto helper = foreign_helper(m, c.node, c.func, true, c.method)) {
        const Function& f = *helper->second;
        if (!f.params.empty() &&
            !helper->first->bindings_of(f.params[0] + std::string(name.substr(4)), index_of(*helper->first, &f)).empty())
          return Fate::Freed;
      }
    }
    if (m.mentions(c.args, name) && weigh(c.node)) return Fate::Freed;
  }
  return Fate::Kept;
}

// --- the fix ---

enum class Shape { Unknown, Tensor, Tuple };

Shape shape_of(const Model& m, TSNode v, int depth = 0);

// The shape every return statement of `fn` gives.
Shape returned_shape(const Model& m, int fn, int depth) {
  std::vector<TSNode> values = returned_values(m.functions()[fn]);
  if (values.empty()) return Shape::Unknown;
  Shape s = shape_of(m, values.front(), depth + 1);
  for (TSNode v : values)
    if (shape_of(m, v, depth + 1) != s) return Shape::Unknown;
  return s;
}

// Whether an expression is known to be one fresh tensor, a tuple of them,
// or neither: torch.zeros(...), x.new_zeros(...), (h0, c0) of those, or a
// call of a function or method of the file (`model.init_hidden(bs)`) whose
// every return agrees.
Shape shape_of(const Model& m, TSNode v, int depth) {
  v = unparenthesize(v);
  if (is_null(v) || depth > 3) return Shape::Unknown;
  Kind k = kind_of(v);
  if (k == Kind::Tuple || k == Kind::ExpressionList) {
    uint32_t n = ts_node_named_child_count(v);
    for (uint32_t i = 0; i < n; ++i)
      if (shape_of(m, ts_node_named_child(v, i), depth + 1) != Shape::Tensor) return Shape::Unknown;
    return n > 0 ? Shape::Tuple : Shape::Unknown;
  }
  if (k != Kind::Call) return Shape::Unknown;
  TSNode func = unparenthesize(field(v, "function"));
  std::string callee = m.qualify(func);
  if (callee.rfind("torch.", 0) == 0 && std::count(callee.begin(), callee.end(), '.') == 1 &&
      one_of(std::string_view(callee).substr(6), kTensorFactories))
    return Shape::Tensor;
  if (kind_of(func) != Kind::Attribute) {
    int fn = kind_of(func) == Kind::Identifier ? index_of(m, m.find_function(m.text(func))) : -1;
    return fn >= 0 ? returned_shape(m, fn, depth) : Shape::Unknown;
  }
  std::string_view method = m.text(field(func, "attribute"));
  if (one_of(method, kNewTensorMethods)) return Shape::Tensor;
  // `model.init_hidden(bs)`: every method of that name in the file's classes.
  Shape s = Shape::Unknown;
  bool any = false;
  for (const Class& c : m.classes()) {
    for (int fn : c.methods) {
      if (m.functions()[fn].name != method) continue;
      Shape r = returned_shape(m, fn, depth);
      if (r == Shape::Unknown || (any && r != s)) return Shape::Unknown;
      s = r;
      any = true;
    }
  }
  return s;
}

// The shape of state `name` when `loop` starts: every binding of it in the
// function before the loop agrees (a parameter or an attribute is unknown).
Shape state_shape(const Model& m, const FedState& state, int loop) {
  if (state.in_tuple) return Shape::Tensor;
  const Loop& l = m.loops()[loop];
  Shape s = Shape::Unknown;
  bool any = false;
  for (const Binding* b : m.bindings_of(state.name, l.function)) {
    if (b->end > l.start) continue;
    if (b->kind != BindingKind::Assign || b->element >= 0) return Shape::Unknown;
    Shape r = shape_of(m, b->value);
    if (r == Shape::Unknown || (any && r != s)) return Shape::Unknown;
    s = r;
    any = true;
  }
  return s;
}

// `h = h.detach()`, `hidden = tuple(s.detach() for s in hidden)`, or
// `h, c = h.detach(), c.detach()`; empty when a shape is unknown.
std::string detach_statement(const Model& m, const std::vector<FedState>& states, int loop) {
  std::string targets, values;
  for (const FedState& s : states) {
    Shape shape = state_shape(m, s, loop);
    if (shape == Shape::Unknown) return {};
    if (!targets.empty()) {
      targets += ", ";
      values += ", ";
    }
    targets += s.name;
    values += shape == Shape::Tensor ? s.name + ".detach()" : fmt::format("tuple(s.detach() for s in {})", s.name);
  }
  return targets.empty() ? std::string() : targets + " = " + values;
}

// An edit inserting `statement` before the first statement of the loop's
// body, on its own line at that statement's indentation; empty when the body
// shares the loop's line.
std::vector<Edit> insert_at_top(const Model& m, int loop, const std::string& statement) {
  TSNode body = field(m.loops()[loop].node, "body");
  if (is_null(body)) return {};
  TSNode first{};
  for (uint32_t i = 0; i < ts_node_named_child_count(body); ++i) {
    TSNode s = ts_node_named_child(body, i);
    if (kind_of(s) == Kind::Comment) continue;
    first = s;
    break;
  }
  if (is_null(first)) return {};
  std::string_view text = m.source().text();
  uint32_t s = start_byte(first), line_start = s;
  while (line_start > 0 && text[line_start - 1] != '\n') --line_start;
  std::string_view indent = text.substr(line_start, s - line_start);
  if (indent.empty() || indent.find_first_not_of(" \t") != std::string_view::npos) return {};
  if (ts_node_start_point(first).row == ts_node_start_point(m.loops()[loop].node).row) return {};
  return {Edit{line_start, line_start, fmt::format("{}{}\n", indent, statement)}};
}

std::string quoted_names(const std::vector<FedState>& states) {
  std::string out;
  for (size_t i = 0; i < states.size(); ++i) {
    if (i) out += i + 1 == states.size() ? " and " : ", ";
    out += "`" + states[i].name + "`";
  }
  return out;
}

// Where the state is fed back: "on every iteration of the training loop at
// line 12", "on every call of `training_step` (once per training step)".
std::string where(const Model& m, const Iteration& it) {
  if (it.loop >= 0)
    return fmt::format(fmt::runtime(messages::TL008::every_iteration),
                       fmt::arg("line", m.position(m.loops()[it.loop].node).line));
  return fmt::format("on every call of `{}` (once per training step)", m.functions()[it.function].name);
}

std::string message(const std::string& call, const std::string& where, const std::vector<FedState>& states) {
  return fmt::format(fmt::runtime(states.size() == 1 ? messages::TL008::fed_back : messages::TL008::fed_back_several),
                     fmt::arg("states", quoted_names(states)), fmt::arg("call", call), fmt::arg("where", where));
}

class HiddenStateNotDetached final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    std::optional<Summaries> sums;
    for (const Call& c : m.calls()) {
      // The cheap questions first: most calls pass no state, bind nothing or
      // bind nothing they were given; only then whether a module runs.
      if (!passes_state_argument(c)) continue;
      if (c.loop < 0 && (c.function < 0 || m.functions()[c.function].cls < 0)) continue;  // a state on self
      TSNode assignment = c.assignment;
      if (is_null(assignment) || !may_feed_back(m, c, assignment)) continue;
      if (!runs_module(m, c) || m.grad_state(start_byte(c.node)) == GradState::Disabled) continue;
      if (!sums) sums = summarize(m, true);
      std::optional<Iteration> it = iteration(m, *sums, c);
      if (!it) continue;
      std::vector<std::string> results;
      std::vector<FedState> states = fed_states(m, c, assignment, *it, results);
      if (states.empty()) continue;
      Forward forward = forward_returns(m, *sums, c);
      if (forward == Forward::Detaches) continue;
      std::vector<FedState> kept;
      std::string keeping;  // a helper of another file the states go through without being detached
      for (const FedState& s : states) {
        if (!carried_into(m, s.name, *it)) continue;
        // A state taken from a field of what the module returned
        // (`outputs.memory`) is only known to keep its history when the file
        // shows the forward that builds it.
        if (s.derived && forward == Forward::Unknown) continue;
        std::string through;  // this state's helper, named only when the state is kept
        if (fate_in_iteration(m, *sums, s.name, *it, assignment, results, through) != Fate::Kept) continue;
        kept.push_back(s);
        if (keeping.empty()) keeping = std::move(through);
      }
      if (kept.empty()) continue;
      Diagnostic d = diagnostic(ctx, c, assignment, *it, kept);
      if (!keeping.empty()) d.message += fmt::format("; {} does not detach it", keeping);
      ctx.report(std::move(d));
    }
  }

 private:
  // Whether an argument of the call is bound again by its assignment or by a
  // later statement of the function: a necessary condition of fed_states.
  static bool may_feed_back(const Model& m, const Call& c, TSNode assignment) {
    std::vector<std::string> targets;
    target_names(m, field(assignment, "left"), targets);
    std::vector<std::pair<std::string, bool>> args;
    bool first_positional = true;
    for (uint32_t i = 0; i < ts_node_named_child_count(c.args); ++i) {
      TSNode a = ts_node_named_child(c.args, i);
      Kind k = kind_of(a);
      if (k == Kind::Comment || k == Kind::ListSplat || k == Kind::DictionarySplat) continue;
      if (k != Kind::KeywordArgument && first_positional) {  // the input, not a state
        first_positional = false;
        continue;
      }
      argument_names(m, a, args);
    }
    for (const auto& arg : args) {
      if (std::find(targets.begin(), targets.end(), arg.first) != targets.end()) return true;
      for (const Binding* b : m.bindings_of(arg.first, c.function))
        if (b->start >= end_byte(assignment)) return true;
    }
    return false;
  }

  static bool runs_module(const Model& m, const Call& c) {
    if (m.is_module_instance(c.func) || m.runs_module(c)) return true;
    return c.method == "forward" && !is_null(c.receiver) && m.is_module_instance(c.receiver);
  }

  // The iteration the state must not survive: the innermost loop around the
  // call (comprehensions aside) whose iteration calls backward, or, for a
  // call in no loop, the training-step function it sits in (a framework's
  // training_step, or a per-step function that runs backward itself).
  static std::optional<Iteration> iteration(const Model& m, const Summaries& sums, const Call& c) {
    bool in_loop = false;
    for (int l : m.enclosing_loops(start_byte(c.node), c.function)) {
      if (m.loops()[l].kind == LoopKind::Comprehension) continue;
      in_loop = true;
      if (loop_calls_backward(m, sums, l)) return Iteration{c.function, l, m.loops()[l].node};
    }
    if (in_loop || c.function < 0) return std::nullopt;
    const Function& f = m.functions()[c.function];
    bool training_hook = f.hook && f.hook->role == HookRole::TrainingStep;
    if (!training_hook && !(sums.backward[c.function] && m.runs_per_step(c.function))) return std::nullopt;
    return Iteration{c.function, -1, f.body};
  }

  // Whether the state reaches the iteration from before it: bound before the
  // loop, or, for one call of a training step, an attribute of `self` that
  // lives on between calls.
  static bool carried_into(const Model& m, const std::string& name, const Iteration& it) {
    if (it.loop >= 0) return m.bound_before_loop(name, it.loop);
    return name.rfind("self.", 0) == 0;
  }

  // What the forward of the called module returns, read from the module's
  // own class of this file: the class it was built from when the file says
  // so (`self(...)` in a module's method: its class), else every Module class
  // of the file. Detached when one returns a detached value (`return out,
  // h.detach()`): the caller then feeds back no history; Unknown when the
  // file defines no such forward.
  enum class Forward { Keeps, Detaches, Unknown };

  static Forward forward_returns(const Model& m, const Summaries& sums, const Call& c) {
    TSNode module = c.method == "forward" && !is_null(c.receiver) ? c.receiver : c.func;
    int cls = -1;
    std::string name = m.qualify(module);
    if (name == "self") {
      cls = m.class_of_function(c.function);
    } else if (!name.empty() && name.find('.') == std::string::npos) {
      const Binding* b = m.reaching(name, start_byte(c.node), c.function);
      TSNode v = b && b->kind == BindingKind::Assign && b->element < 0 ? unparenthesize(b->value) : TSNode{};
      while (!is_null(v) && kind_of(v) == Kind::Call && kind_of(field(v, "function")) == Kind::Attribute)
        v = unparenthesize(field(field(v, "function"), "object"));  // Net(...).to(device)
      if (!is_null(v) && kind_of(v) == Kind::Call)
        if (const Class* k = m.find_class(m.qualify(field(v, "function")))) cls = static_cast<int>(k - m.classes().data());
    }
    Forward out = Forward::Unknown;
    for (size_t k = 0; k < m.classes().size(); ++k) {
      if (cls >= 0 && static_cast<int>(k) != cls) continue;
      if (m.module_class(static_cast<int>(k)) != ModuleAnswer::Yes) continue;
      int fwd = index_of(m, m.find_method(static_cast<int>(k), "forward"));
      if (fwd < 0) continue;
      if (returns_detached(m, sums, fwd)) return Forward::Detaches;
      out = Forward::Keeps;
    }
    return out;
  }

  static bool returns_detached(const Model& m, const Summaries& sums, int fn) {
    std::vector<TSNode> values = returned_values(m.functions()[fn]);
    return std::any_of(values.begin(), values.end(),
                       [&](TSNode v) { return value_detaches(m, sums, v).detaches; });
  }

  static Diagnostic diagnostic(CheckContext& ctx, const Call& c, TSNode assignment, const Iteration& it,
                               const std::vector<FedState>& states) {
    const Model& m = ctx.model();
    Diagnostic d = ctx.diagnostic(assignment, message(code_snippet(m, c.node), where(m, it), states));
    std::string statement = it.loop >= 0 ? detach_statement(m, states, it.loop) : std::string();
    const std::string& first = states.front().name;
    d.help = statement.empty()
                 ? fmt::format("detach the state once per {0}, before the forward pass: `{1} = repackage_hidden({1})` "
                               "or `{1} = {1}.detach()` (an LSTM's (h, c): `{1} = tuple(s.detach() for s in {1})`)",
                               it.loop >= 0 ? "iteration" : "step", first)
                 : fmt::format("detach the state once per iteration, before the forward pass: `{}`", statement);
    if (!statement.empty()) {
      std::vector<Edit> edits = insert_at_top(m, it.loop, statement);
      // Unsafe: gradients stop flowing into earlier batches, which is the
      // point of truncated BPTT but changes what the model learns.
      if (!edits.empty())
        d.fix = Fix{fmt::format("Insert `{}` at the top of the loop", statement), FixSafety::Unsafe, std::move(edits)};
    }
    return d;
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(HiddenStateNotDetached, "TL008")

}  // namespace torchleak::python
