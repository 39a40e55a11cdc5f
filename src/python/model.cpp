#include "python/model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <optional>
#include <stdexcept>

#include "core/project_index.h"
#include "python/project.h"

namespace torchleak::python {

namespace {

constexpr int kMaxDepth = 48;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
template <size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// Methods whose result carries no autograd history.
constexpr std::array<std::string_view, 9> kDetachingMethods = {
    "item", "tolist", "numpy", "detach", "detach_", "data_ptr", "__len__", "nelement", "element_size"};
// Tensor methods returning integer/boolean tensors or metadata.
constexpr std::array<std::string_view, 30> kNoGradMethods = {
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "gt", "le", "ge", "size",
    "dim", "numel", "nonzero", "long", "int", "bool", "byte", "short", "char", "isnan",
    "isinf", "isfinite", "all", "any", "equal", "count_nonzero", "stride", "get_device",
    "is_contiguous", "__bool__"};
// Builtins whose result is a plain Python value.
constexpr std::array<std::string_view, 8> kDetachingBuiltins = {"float", "int", "bool", "len",
                                                                "str", "repr", "isinstance", "print"};
// torch functions creating fresh tensors without history.
constexpr std::array<std::string_view, 24> kTorchFactories = {
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "Tensor", "manual_seed"};
// Methods that exist on nn.Module and return modules, iterators or None.
constexpr std::array<std::string_view, 26> kModuleNonTensorMethods = {
    "to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16", "parameters",
    "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "state_dict", "load_state_dict", "zero_grad", "apply", "register_buffer",
    "register_parameter", "register_forward_hook", "requires_grad_", "add_module"};
// Methods only an nn.Module has: calling one is evidence that the receiver is a model.
constexpr std::array<std::string_view, 8> kModuleOnlyMethods = {
    "parameters", "named_parameters", "named_modules", "modules", "children", "named_children",
    "buffers", "named_buffers"};
constexpr std::array<std::string_view, 10> kNonTensorAttributes = {
    "data", "grad", "shape", "dtype", "device", "is_cuda", "requires_grad", "ndim", "grad_fn",
    "is_leaf"};

std::string binding_key(int function, std::string_view name) {
  std::string k = std::to_string(function);
  k += ':';
  k += name;
  return k;
}


// Builtins whose result is built from their arguments' values.
constexpr std::array<std::string_view, 8> kPropagatingBuiltins = {"sum", "max", "min", "abs",
                                                                  "list", "tuple", "sorted", "reversed"};
// Calls wrapping an iterable without changing what it yields.
constexpr std::array<std::string_view, 9> kIterableWrappers = {"enumerate", "tqdm", "zip", "iter", "islice",
                                                               "cycle", "chain", "prefetch", "track"};

// The expression a binding gives its own target: the matching element of a
// tuple display in `a, b = x, y`, else the whole value.
TSNode element_value(const Binding& b) {
  TSNode v = unparenthesize(b.value);
  if (b.element < 0) return v;
  Kind k = kind_of(v);
  if ((k == Kind::Tuple || k == Kind::ExpressionList || k == Kind::List) &&
      static_cast<uint32_t>(b.element) < ts_node_named_child_count(v))
    return ts_node_named_child(v, static_cast<uint32_t>(b.element));
  return v;
}

bool is_capitalized(std::string_view name) {
  auto last = name.substr(name.rfind('.') == std::string_view::npos ? 0 : name.rfind('.') + 1);
  return !last.empty() && std::isupper(static_cast<unsigned char>(last[0]));
}

}  // namespace

uint64_t node_key(TSNode n) {
  return (uint64_t{start_byte(n)} << 32) ^ (uint64_t{end_byte(n)} << 8) ^ ts_node_symbol(n);
}

bool is_torch_optimizer_class(std::string_view qualified) {
  return starts_with(qualified, "torch.optim.") && !starts_with(qualified, "torch.optim.lr_scheduler");
}

bool returns_values_and_indices(std::string_view name) {
  constexpr std::array<std::string_view, 9> kValuesIndices = {"max", "min", "topk", "sort", "kthvalue",
                                                              "mode", "median", "cummax", "cummin"};
  return std::find(kValuesIndices.begin(), kValuesIndices.end(), name) != kValuesIndices.end();
}

Provenance join(Provenance a, Provenance b) {
  if (a == Provenance::Attached || b == Provenance::Attached) return Provenance::Attached;
  if (a == Provenance::Detached && b == Provenance::Detached) return Provenance::Detached;
  return Provenance::Unknown;
}

namespace {

enum class Visit { Descend, Skip, Stop };

// Visits the nodes of `f`'s body that are its own, not those of the functions,
// classes or lambdas nested in it; true when `visit` stopped the walk.
template <class F>
bool walk_own_body(const Function& f, F visit) {
  std::vector<TSNode> work{f.body};
  while (!work.empty()) {
    TSNode n = work.back();
    work.pop_back();
    Kind k = kind_of(n);
    if (k == Kind::FunctionDefinition || k == Kind::ClassDefinition || k == Kind::Lambda) continue;
    Visit v = visit(n, k);
    if (v == Visit::Stop) return true;
    if (v == Visit::Descend) push_named_children(n, work);
  }
  return false;
}

}  // namespace

std::vector<TSNode> returned_values(const Function& f) {
  std::vector<TSNode> out;
  walk_own_body(f, [&](TSNode n, Kind k) {
    if (k != Kind::ReturnStatement) return Visit::Descend;
    if (ts_node_named_child_count(n)) out.push_back(ts_node_named_child(n, 0));
    return Visit::Skip;
  });
  return out;
}

// ---------------------------------------------------------------------------
// Building the model: one iterative pre-order walk with a stack of scopes.

struct Model::Builder {
  Model& m;
  enum class FrameKind { Function, Class, Loop };
  struct Frame {
    FrameKind kind;
    int index;
    uint32_t end;
  };
  std::vector<Frame> stack;
  // The ancestors of the node being entered, kept by the walk: its parent is
  // ancestors.back() (cheaper than ts_node_parent, which descends from the root).
  std::vector<TSNode> ancestors;

  const LibraryModels& library;
  // Decorators and `with` items naming a function of this file, decided
  // after the walk: {name, body start, body end}.
  struct LocalGradUse {
    std::string name;
    uint32_t start, end;
  };
  std::vector<LocalGradUse> local_grad_uses;

  explicit Builder(Model& model) : m(model), library(model.config_.library()) {}

  int current_function() const {
    for (auto it = stack.rbegin(); it != stack.rend(); ++it)
      if (it->kind == FrameKind::Function) return it->index;
    return -1;
  }
  int current_loop() const {
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      if (it->kind == FrameKind::Loop) return it->index;
      if (it->kind == FrameKind::Function || it->kind == FrameKind::Class) return -1;
    }
    return -1;
  }
  int current_class_scope() const {  // the class whose body we are directly in
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      if (it->kind == FrameKind::Class) return it->index;
      if (it->kind == FrameKind::Function) return -1;
    }
    return -1;
  }

  void pop_until(uint32_t byte) {
    while (!stack.empty() && stack.back().end <= byte) stack.pop_back();
  }

  void run() {
    TSTreeCursor cursor = ts_tree_cursor_new(m.root());
    bool done = false;
    while (!done) {
      TSNode node = ts_tree_cursor_current_node(&cursor);
      TSSymbol symbol = ts_node_symbol(node);
      if (symbol_is_named(symbol)) {
        pop_until(start_byte(node));
        enter(node, kind_of_symbol(symbol));
      }
      if (ts_tree_cursor_goto_first_child(&cursor)) {
        ancestors.push_back(node);
        continue;
      }
      while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
        if (!ts_tree_cursor_goto_parent(&cursor)) {
          done = true;
          break;
        }
        ancestors.pop_back();
      }
    }
    ts_tree_cursor_delete(&cursor);
    for (size_t i = 0; i < m.bindings_.size(); ++i)
      m.bindings_by_name_[m.bindings_[i].name].push_back(static_cast<int>(i));
    // The first module-level function and the first class of each name.
    for (size_t i = 0; i < m.functions_.size(); ++i)
      if (m.functions_[i].parent < 0 && m.functions_[i].cls < 0)
        m.top_functions_.try_emplace(m.functions_[i].name, static_cast<int>(i));
    for (size_t i = 0; i < m.classes_.size(); ++i) m.classes_by_name_.try_emplace(m.classes_[i].name, static_cast<int>(i));
    module_attribute_aliases();
    // What each backward call differentiates, from the library models (once
    // the bindings are known, so that a receiver's class can be read).
    for (const Call& c : m.calls_)
      for (TSNode subject : m.backward_subjects(c)) mark_backward_subject(subject, c.function);
    for (size_t i = 0; i < m.calls_.size(); ++i) {
      const Call& c = m.calls_[i];
      if (c.method == "append" || c.method == "extend" || c.method == "insert") {
        std::string container = m.qualify(c.receiver);
        if (!container.empty()) m.stores_by_container_[container].push_back(static_cast<int>(i));
      }
    }
    // Loops are in pre-order: a loop's node encloses a later one's exactly
    // when the later one starts before it ends.
    m.loop_outer_.assign(m.loops_.size(), -1);
    std::vector<int> open;
    for (size_t i = 0; i < m.loops_.size(); ++i) {
      uint32_t start = start_byte(m.loops_[i].node);
      while (!open.empty() && end_byte(m.loops_[open.back()].node) <= start) open.pop_back();
      m.loop_outer_[i] = open.empty() ? -1 : open.back();
      open.push_back(static_cast<int>(i));
    }
    // Framework hooks run under the mode their framework gives them.
    for (size_t f = 0; f < m.functions_.size(); ++f) {
      Function& fn = m.functions_[f];
      fn.hook = m.hook_model(static_cast<int>(f));
      if (fn.hook && fn.hook->grad_mode == GradMode::Disabled)
        m.regions_.push_back({start_byte(fn.body), end_byte(fn.body), GradState::Disabled});
    }
    sort_regions();  // grad_state reads them in order, from here on
    // A context manager of this file (contextlib.contextmanager) that yields
    // under a grad-disabled region disables grad where it is used.
    if (!local_grad_uses.empty()) {
      NameSet disabling;  // module-level context managers of the file that yield under no_grad
      for (const Function& f : m.functions_)
        if (f.parent < 0 && f.cls < 0 && yields_with_grad_disabled(f)) disabling.insert(f.name);
      std::vector<Region> decided;
      for (const auto& use : local_grad_uses)
        if (disabling.count(use.name)) decided.push_back({use.start, use.end, GradState::Disabled});
      m.regions_.insert(m.regions_.end(), decided.begin(), decided.end());
    }
    sort_regions();
  }

  void sort_regions() {
    std::sort(m.regions_.begin(), m.regions_.end(), [](const Region& a, const Region& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
  }

  bool yields_with_grad_disabled(const Function& f) const {
    bool contextmanager = std::any_of(f.decorators.begin(), f.decorators.end(), [](const std::string& d) {
      return d == "contextlib.contextmanager" || d == "contextmanager";
    });
    if (!contextmanager) return false;
    bool disabled = false;
    walk_own_body(f, [&](TSNode n, Kind) {
      if (std::string_view(ts_node_type(n)) != "yield") return Visit::Descend;
      disabled = m.grad_state(start_byte(n)) == GradState::Disabled;
      return Visit::Stop;  // the first yield decides
    });
    return disabled;
  }

  void enter(TSNode node, Kind kind) {
    switch (kind) {
      case Kind::FunctionDefinition: return on_function(node);
      case Kind::ClassDefinition: return on_class(node);
      case Kind::ForStatement: return on_for(node);
      case Kind::WhileStatement: return on_loop(node, LoopKind::While, field(node, "condition"),
                                                end_byte(field(node, "body")));
      case Kind::ListComprehension:
      case Kind::SetComprehension:
      case Kind::DictionaryComprehension:
      case Kind::GeneratorExpression: return on_loop(node, LoopKind::Comprehension, node, end_byte(node));
      case Kind::ForInClause: return bind_targets(field(node, "left"), TSNode{}, node, BindingKind::ForTarget);
      case Kind::WithStatement: return on_with(node);
      case Kind::Assignment: return on_assignment(node);
      case Kind::AugmentedAssignment: return on_augmented(node);
      case Kind::NamedExpression:
        return add_binding(std::string(m.text(field(node, "name"))), BindingKind::NamedExpr, node,
                           field(node, "name"), field(node, "value"), -1);
      case Kind::Call: return on_call(node);
      case Kind::Comment: m.comments_.push_back(node); return;
      case Kind::IfStatement: {
        TSNode consequence = field(node, "consequence");
        if (!is_null(consequence))
          m.conditionals_.push_back({start_byte(node), start_byte(consequence), end_byte(consequence),
                                     field(node, "condition")});
        return;
      }
      case Kind::Identifier: {
        size_t n = ancestors.size();
        // Not a name: the attribute of `x.attr`, the keyword of `f(key=...)`.
        if (n > 0) {
          Kind pk = kind_of(ancestors[n - 1]);
          bool leads = start_byte(ancestors[n - 1]) == start_byte(node);
          if ((pk == Kind::Attribute && !leads) || (pk == Kind::KeywordArgument && leads)) return;
        }
        // Rules read the names of function bodies; module-level code is not kept.
        int function = current_function();
        if (function < 0) return;
        m.references_.push_back({node, n > 0 ? ancestors[n - 1] : TSNode{}, n > 1 ? ancestors[n - 2] : TSNode{},
                                 n > 2 ? ancestors[n - 3] : TSNode{}, function});
        return;
      }
      case Kind::ImportStatement:
      case Kind::ImportFromStatement: return on_import(node);
      case Kind::GlobalStatement: {
        uint32_t n = ts_node_named_child_count(node);
        for (uint32_t i = 0; i < n; ++i) {
          TSNode id = ts_node_named_child(node, i);
          add_binding(std::string(m.text(id)), BindingKind::Global, node, id, TSNode{}, -1);
        }
        return;
      }
      default: return;
    }
  }

  void on_function(TSNode node) {
    Function f;
    f.node = node;
    f.body = field(node, "body");
    f.name = std::string(m.text(field(node, "name")));
    f.parent = current_function();
    f.cls = current_class_scope();
    if (f.cls >= 0) {
      f.qualified_name = m.classes_[f.cls].name + "." + f.name;
    } else if (f.parent >= 0) {
      f.qualified_name = m.functions_[f.parent].qualified_name + "." + f.name;
    } else {
      f.qualified_name = f.name;
    }
    TSNode parent = ancestors.empty() ? TSNode{} : ancestors.back();
    if (kind_of(parent) == Kind::DecoratedDefinition) {
      uint32_t n = ts_node_named_child_count(parent);
      for (uint32_t i = 0; i < n; ++i) {
        TSNode d = ts_node_named_child(parent, i);
        if (kind_of(d) != Kind::Decorator) continue;
        TSNode e = ts_node_named_child(d, 0);
        if (kind_of(e) == Kind::Call) e = field(e, "function");
        f.decorators.push_back(m.qualify(e));
      }
    }
    int index = static_cast<int>(m.functions_.size());
    if (f.cls >= 0) m.classes_[f.cls].methods.push_back(index);
    for (const auto& d : f.decorators) {
      // What the decorator does to autograd, from the library models; a
      // function of this file is decided after the walk, from its body.
      const CallModel* model = library.may_set_grad_mode(last_component(d)) ? library.call(d) : nullptr;
      GradMode mode = model ? model->grad_mode : GradMode::Unchanged;
      if (mode == GradMode::Disabled || mode == GradMode::InferenceArgument)
        m.regions_.push_back({start_byte(f.body), end_byte(f.body), GradState::Disabled});
      else if (mode == GradMode::Enabled)
        m.regions_.push_back({start_byte(f.body), end_byte(f.body), GradState::Enabled});
      else if (!model && d.find('.') == std::string::npos)
        local_grad_uses.push_back({d, start_byte(f.body), end_byte(f.body)});
    }
    m.functions_.push_back(std::move(f));
    stack.push_back({FrameKind::Function, index, end_byte(node)});
    // Parameters are bindings of the new function.
    for_each_named_child(field(node, "parameters"), [&](TSNode p) {
      TSNode name_node = p;
      switch (kind_of(p)) {
        case Kind::Identifier: break;
        case Kind::DefaultParameter:
        case Kind::TypedDefaultParameter: name_node = field(p, "name"); break;
        case Kind::TypedParameter: name_node = child_of_kind(p, Kind::Identifier); break;
        default: name_node = TSNode{}; break;
      }
      if (is_null(name_node) || kind_of(name_node) != Kind::Identifier) return;
      std::string name(m.text(name_node));
      m.functions_[index].params.push_back(name);
      TSNode def = kind_of(p) == Kind::Identifier || kind_of(p) == Kind::TypedParameter ? TSNode{} : field(p, "value");
      add_binding(name, BindingKind::Parameter, p, name_node, def, -1);
    });
  }

  // A module-level name bound once to an attribute of an imported module
  // named by a constant string (`accel = getattr(torch, "cuda")`, or through
  // a name bound once to the string): an alias of that module, as if
  // imported, and the calls through it are qualified again.
  void module_attribute_aliases() {
    auto constant_name = [&](TSNode n) -> std::string_view {
      n = unparenthesize(n);
      if (kind_of(n) == Kind::Identifier) {
        auto it = m.bindings_by_name_.find(m.text(n));
        if (it == m.bindings_by_name_.end() || it->second.size() != 1) return {};
        const Binding& b = m.bindings_[static_cast<size_t>(it->second.front())];
        if (b.function >= 0 || b.kind != BindingKind::Assign || b.element >= 0) return {};
        n = unparenthesize(b.value);
      }
      std::string_view t = m.text(n);
      if (t.size() < 3 || (t.front() != '"' && t.front() != '\'') || t.back() != t.front()) return {};
      t = t.substr(1, t.size() - 2);
      bool identifier = !t.empty() && !std::isdigit(static_cast<unsigned char>(t[0])) &&
                        std::all_of(t.begin(), t.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
      return identifier ? t : std::string_view{};
    };
    std::vector<std::string> added;
    for (const Binding& b : m.bindings_) {
      if (b.function >= 0 || b.kind != BindingKind::Assign || b.element >= 0 || is_null(b.value)) continue;
      TSNode v = unparenthesize(b.value);
      if (kind_of(v) != Kind::Call || m.text(field(v, "function")) != "getattr") continue;
      if (b.name.find('.') != std::string::npos || m.bindings_by_name_[b.name].size() != 1) continue;
      TSNode args = field(v, "arguments");
      if (is_null(args) || ts_node_named_child_count(args) != 2) continue;
      TSNode object = ts_node_named_child(args, 0);
      std::string_view attr = constant_name(ts_node_named_child(args, 1));
      std::string module = m.qualify(object);
      if (attr.empty() || module.empty()) continue;
      TSNode head = unparenthesize(object);
      while (kind_of(head) == Kind::Attribute) head = unparenthesize(attribute_object(head));
      if (!m.aliases_.count(m.text(head))) continue;  // not an imported module
      m.aliases_[b.name] = module + "." + std::string(attr);
      added.push_back(b.name);
    }
    if (added.empty()) return;
    for (Call& c : m.calls_) {
      std::string_view callee = c.callee;
      for (const auto& name : added)
        if (callee.size() > name.size() && callee.substr(0, name.size()) == name && callee[name.size()] == '.') {
          c.callee = m.qualify(c.func);
          break;
        }
    }
  }

  void on_class(TSNode node) {
    Class c;
    c.node = node;
    c.name = std::string(m.text(field(node, "name")));
    c.function = current_function();
    TSNode supers = field(node, "superclasses");
    uint32_t n = is_null(supers) ? 0 : ts_node_named_child_count(supers);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode b = ts_node_named_child(supers, i);
      if (kind_of(b) == Kind::KeywordArgument) continue;
      std::string q = m.qualify(b);
      if (!q.empty()) c.bases.push_back(std::move(q));
    }
    TSNode parent = ancestors.empty() ? TSNode{} : ancestors.back();
    if (kind_of(parent) == Kind::DecoratedDefinition) {
      for_each_named_child(parent, [&](TSNode d) {
        if (kind_of(d) != Kind::Decorator) return;
        TSNode e = ts_node_named_child(d, 0);
        if (kind_of(e) == Kind::Call) e = field(e, "function");
        c.decorators.push_back(m.qualify(e));
      });
    }
    int index = static_cast<int>(m.classes_.size());
    m.classes_.push_back(std::move(c));
    stack.push_back({FrameKind::Class, index, end_byte(node)});
  }

  void on_for(TSNode node) {
    TSNode left = field(node, "left");
    TSNode body = field(node, "body");
    on_loop(node, LoopKind::For, left, end_byte(body));
    bind_targets(left, TSNode{}, node, BindingKind::ForTarget);
  }

  void on_loop(TSNode node, LoopKind kind, TSNode first, uint32_t end) {
    Loop l;
    l.node = node;
    l.kind = kind;
    l.start = is_null(first) ? start_byte(node) : start_byte(first);
    l.end = end;
    l.function = current_function();
    l.parent = current_loop();
    int index = static_cast<int>(m.loops_.size());
    m.loops_.push_back(l);
    stack.push_back({FrameKind::Loop, index, end_byte(node)});
  }

  void on_with(TSNode node) {
    TSNode body = field(node, "body");
    uint32_t n = ts_node_named_child_count(node);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode clause = ts_node_named_child(node, i);
      if (ts_node_symbol(clause) == ts_node_symbol(body)) continue;
      uint32_t items = ts_node_named_child_count(clause);
      for (uint32_t j = 0; j < items; ++j) {
        TSNode item = ts_node_named_child(clause, j);
        if (kind_of(item) != Kind::WithItem) continue;
        TSNode value = field(item, "value");
        if (kind_of(value) == Kind::AsPattern) {
          TSNode alias = field(value, "alias");
          TSNode target = ts_node_named_child_count(alias) ? ts_node_named_child(alias, 0) : alias;
          if (kind_of(target) == Kind::Identifier)
            add_binding(std::string(m.text(target)), BindingKind::WithTarget, node, target, TSNode{}, -1);
          value = ts_node_named_child(value, 0);
        }
        grad_region_for(value, body);
      }
    }
  }

  // The first argument of a mode call, positional or by keyword (`mode=False`).
  static TSNode first_argument(TSNode call) {
    TSNode args = field(call, "arguments");
    TSNode mode = ts_node_named_child_count(args) ? ts_node_named_child(args, 0) : TSNode{};
    if (!is_null(mode) && kind_of(mode) == Kind::KeywordArgument) mode = field(mode, "value");
    return mode;
  }

  // The grad state a call of a mode context manager sets (Maybe: decided at
  // run time); nullopt when the models know no grad mode for what it calls.
  std::optional<GradState> mode_of_call(TSNode value) const {
    if (kind_of(value) != Kind::Call) return std::nullopt;
    std::string callee = m.qualify(field(value, "function"));
    if (!library.may_set_grad_mode(last_component(callee))) return std::nullopt;
    const CallModel* model = library.call(callee);
    if (!model) return std::nullopt;
    TSNode flag = first_argument(value);
    switch (model->grad_mode) {
      case GradMode::Disabled: return GradState::Disabled;
      case GradMode::Enabled: return GradState::Enabled;
      case GradMode::InferenceArgument:  // inference_mode(mode=True)
        if (is_null(flag)) return GradState::Disabled;
        return kind_of(flag) == Kind::False ? GradState::Enabled
               : kind_of(flag) == Kind::True ? GradState::Disabled
                                             : GradState::Maybe;
      case GradMode::Argument:  // set_grad_enabled(flag)
        return kind_of(flag) == Kind::False ? GradState::Disabled
               : kind_of(flag) == Kind::True ? GradState::Enabled
                                             : GradState::Maybe;
      case GradMode::Unchanged: return std::nullopt;
    }
    return std::nullopt;
  }

  void grad_region_for(TSNode value, TSNode body) {
    if (kind_of(value) != Kind::Call) return;
    if (std::optional<GradState> state = mode_of_call(value)) {
      m.regions_.push_back({start_byte(body), end_byte(body), *state});
      return;
    }
    // `with my_no_grad():` where my_no_grad is a function of this file: decided after the walk.
    TSNode func = field(value, "function");
    if (kind_of(func) == Kind::Identifier)
      local_grad_uses.push_back({std::string(m.text(func)), start_byte(body), end_byte(body)});
  }

  void on_assignment(TSNode node) {
    TSNode left = field(node, "left");
    TSNode right = field(node, "right");
    // In a chain a = b = value, the value is the innermost right side.
    while (kind_of(right) == Kind::Assignment) right = field(right, "right");
    bind_targets(left, right, node, BindingKind::Assign);
    note_frozen(node, left, right);
  }

  void on_augmented(TSNode node) {
    TSNode left = field(node, "left");
    TSNode op = field(node, "operator");
    std::string name = target_name(left);
    if (name.empty()) return;
    BindingKind kind = kind_of(left) == Kind::Subscript ? BindingKind::SubscriptStore : BindingKind::AugAssign;
    add_binding(name, kind, node, left, field(node, "right"), -1);
    m.bindings_.back().op = std::string(m.text(op));
  }

  // The name a target binds: "x", "self.cache", or for a subscript the container.
  std::string target_name(TSNode t) const {
    t = unparenthesize(t);
    switch (kind_of(t)) {
      case Kind::Identifier:
      case Kind::Attribute: return m.qualify(t);
      case Kind::Subscript: return m.qualify(field(t, "value"));
      default: return {};
    }
  }

  void bind_targets(TSNode left, TSNode value, TSNode statement, BindingKind kind) {
    left = unparenthesize(left);
    switch (kind_of(left)) {
      case Kind::PatternList:
      case Kind::TuplePattern:
      case Kind::ListPattern:
      case Kind::Tuple:
      case Kind::List:
      case Kind::ExpressionList: {
        // After a starred target (`loss, *_, n = step()`) a position counts
        // from the end: known for a display (`a, *b, c = x, y, z, w`), else
        // the name is bound to a value not followed.
        auto starred = [](TSNode t) {
          return kind_of(t) == Kind::ListSplat || std::string_view(ts_node_type(t)) == "list_splat_pattern";
        };
        int count = 0, star = -1;
        for_each_named_child(left, [&](TSNode element) {
          if (starred(unparenthesize(element))) star = count;
          ++count;
        });
        TSNode display = unparenthesize(value);
        Kind dk = kind_of(display);
        int length = dk == Kind::Tuple || dk == Kind::ExpressionList || dk == Kind::List
                         ? static_cast<int>(ts_node_named_child_count(display))
                         : -1;
        int i = 0;
        for_each_named_child(left, [&](TSNode element) {
          TSNode t = unparenthesize(element);
          int index = i++;
          if (star >= 0 && index > star) {
            std::string name = target_name(t);
            if (name.empty() || starred(t)) return;
            bool known = length >= count;
            add_binding(name, kind_of(t) == Kind::Subscript ? BindingKind::SubscriptStore : kind, statement, t,
                        known ? value : TSNode{}, known ? length - (count - index) : -1);
            return;
          }
          Kind tk = kind_of(t);
          if (kind == BindingKind::ForTarget && (tk == Kind::Tuple || tk == Kind::List || tk == Kind::TuplePattern ||
                                                 tk == Kind::ListPattern)) {
            // `for i, (x, y) in enumerate(loader)`: one level of nesting.
            int j = 0;
            for_each_named_child(t, [&](TSNode inner) {
              inner = unparenthesize(inner);
              int position = j++;
              std::string inner_name = target_name(inner);
              if (inner_name.empty() || kind_of(inner) == Kind::Subscript) return;
              add_binding(inner_name, kind, statement, inner, value, index);
              m.bindings_.back().inner = position;
            });
            return;
          }
          std::string name = target_name(t);
          if (name.empty()) return;
          BindingKind k = kind_of(t) == Kind::Subscript ? BindingKind::SubscriptStore : kind;
          add_binding(name, k, statement, t, value, index);
        });
        return;
      }
      default: {
        std::string name = target_name(left);
        if (name.empty()) return;
        BindingKind k = kind_of(left) == Kind::Subscript ? BindingKind::SubscriptStore : kind;
        add_binding(name, k, statement, left, value, -1);
      }
    }
  }

  void add_binding(std::string name, BindingKind kind, TSNode statement, TSNode target, TSNode value,
                   int element) {
    if (name.empty()) return;
    Binding b;
    b.name = std::move(name);
    b.kind = kind;
    b.statement = statement;
    b.target = target;
    b.value = value;
    b.element = element;
    b.function = current_function();
    b.loop = current_loop();
    b.start = start_byte(statement);
    b.end = end_byte(statement);
    if (kind == BindingKind::ForTarget) {
      // The target of a for loop is bound at the start of each iteration.
      b.start = start_byte(target);
      b.end = end_byte(target);
    }
    m.bindings_.push_back(std::move(b));
  }

  void on_call(TSNode node) {
    Call c;
    c.node = node;
    c.func = call_function(node);
    c.args = call_arguments(node);
    c.callee = m.qualify(c.func);
    if (kind_of(c.func) == Kind::Attribute) {
      c.method = std::string(m.text(attribute_name(c.func)));
      c.receiver = attribute_object(c.func);
    }
    c.function = current_function();
    c.loop = current_loop();
    c.statement = !ancestors.empty() && kind_of(ancestors.back()) == Kind::ExpressionStatement;
    for (size_t i = ancestors.size(); i-- > 0;) {
      Kind k = kind_of(ancestors[i]);
      if (k == Kind::ParenthesizedExpression) continue;
      if (k == Kind::Assignment && ts_node_eq(unparenthesize(field(ancestors[i], "right")), node))
        c.assignment = ancestors[i];
      break;
    }
    // Use as evidence of a module: a method only modules have, or `x.eval()`
    // with no argument and `x.train(False)` (a trainer's `train()` is not one).
    bool mode_switch = (c.method == "eval" && ts_node_named_child_count(c.args) == 0) ||
                       (c.method == "train" && ts_node_named_child_count(c.args) == 1 &&
                        (kind_of(ts_node_named_child(c.args, 0)) == Kind::False ||
                         kind_of(ts_node_named_child(c.args, 0)) == Kind::True));
    if (!c.method.empty() && (mode_switch || one_of(c.method, kModuleOnlyMethods))) {
      std::string recv = m.qualify(c.receiver);
      if (!recv.empty()) m.module_evidence_.insert(recv);
    }
    if (c.method == "requires_grad_" && ts_node_named_child_count(c.args) == 1) {  // model.requires_grad_(False)
      TSNode flag = ts_node_named_child(c.args, 0);
      if (kind_of(flag) == Kind::KeywordArgument) flag = field(flag, "value");
      std::string recv = m.qualify(c.receiver);
      if (kind_of(flag) == Kind::False && !recv.empty()) m.frozen_modules_.insert(recv);
    }
    // `torch.set_grad_enabled(False)` as a statement: off until the end of
    // the enclosing block, or a later `torch.set_grad_enabled(True)`.
    // `stack.enter_context(torch.no_grad())` on a contextlib.ExitStack: the
    // same, until the end of the block (the `with ExitStack()` body).
    std::optional<GradState> set;
    if (!c.callee.empty() && library.may_set_grad_mode(call_name(c)) && ts_node_named_child_count(c.args) == 1) {
      const CallModel* model = library.call(c.callee);
      if (model && model->grad_mode == GradMode::Argument) set = mode_of_call(node);
    } else if (c.method == "enter_context" && ts_node_named_child_count(c.args) == 1) {
      set = mode_of_call(unparenthesize(ts_node_named_child(c.args, 0)));
    }
    if (set && c.statement) {
      TSNode statement = ancestors.back();
      m.regions_.push_back({end_byte(statement), end_byte(ancestors[ancestors.size() - 2]), *set});
    }
    m.calls_.push_back(std::move(c));
  }

  // `p.requires_grad = False` directly in the body of `for p in m.parameters()`
  // (or `for name, p in m.named_parameters()`) freezes all of `m`; under an
  // `if` it freezes a part, and `m` stays trainable.
  void note_frozen(TSNode assignment, TSNode left, TSNode right) {
    if (kind_of(left) != Kind::Attribute || m.text(field(left, "attribute")) != "requires_grad" ||
        kind_of(right) != Kind::False)
      return;
    int loop = current_loop();
    if (loop < 0 || m.loops_[loop].kind != LoopKind::For) return;
    TSNode block = ts_node_parent(ts_node_parent(assignment));
    if (kind_of(block) != Kind::Block || !ts_node_eq(ts_node_parent(block), m.loops_[loop].node)) return;
    TSNode iterable = unparenthesize(field(m.loops_[loop].node, "right"));
    TSNode func = kind_of(iterable) == Kind::Call ? field(iterable, "function") : TSNode{};
    if (kind_of(func) != Kind::Attribute) return;
    std::string_view method = m.text(field(func, "attribute"));
    if (method != "parameters" && method != "named_parameters") return;
    // The loop variable holding each parameter: `p`, or the second of `name, p`.
    TSNode target = unparenthesize(field(m.loops_[loop].node, "left"));
    if (method == "named_parameters") {
      if (ts_node_named_child_count(target) != 2) return;
      target = ts_node_named_child(target, 1);
    }
    if (m.text(target) != m.text(unparenthesize(field(left, "object")))) return;
    std::string owner = m.qualify(field(func, "object"));
    if (!owner.empty()) m.frozen_modules_.insert(owner);
  }

  // Every name mentioned in the subject of a backward call counts: in
  // `(total / steps).backward()` the accumulator `total` is the subject.
  void mark_backward_subject(TSNode subject, int function) {
    std::vector<TSNode> work{subject};
    while (!work.empty()) {
      TSNode n = work.back();
      work.pop_back();
      Kind k = kind_of(n);
      if (k == Kind::Identifier || k == Kind::Attribute) {
        std::string q = m.qualify(n);
        if (!q.empty()) m.backward_subjects_.insert(binding_key(function, q));
        if (k == Kind::Identifier) continue;
      }
      push_named_children(n, work);
    }
  }

  void on_import(TSNode node) {
    bool from = kind_of(node) == Kind::ImportFromStatement;
    std::string module;
    TSNode module_name = from ? field(node, "module_name") : TSNode{};
    int level = 0;
    if (from) {
      module = std::string(m.text(module_name));
      while (!module.empty() && module.front() == '.') {
        module.erase(0, 1);
        ++level;
      }
    }
    for_each_named_child(node, [&](TSNode child) {
      if (from && start_byte(child) == start_byte(module_name)) return;
      std::string name, local;
      if (kind_of(child) == Kind::AliasedImport) {
        name = std::string(m.text(field(child, "name")));
        local = std::string(m.text(field(child, "alias")));
      } else if (kind_of(child) == Kind::DottedName) {
        name = std::string(m.text(child));
        // `import torch.nn` binds `torch`.
        local = from ? name : name.substr(0, name.find('.'));
        if (!from) name = local;
      } else {
        return;
      }
      std::string qualified = from ? (module.empty() ? name : module + "." + name) : name;
      m.aliases_[local] = qualified;
      if (level > 0) m.import_levels_[local] = level;
      else m.import_levels_.erase(local);
      add_binding(local, BindingKind::Import, node, child, TSNode{}, -1);
    });
  }
};

namespace {

// One parser per thread, reused from file to file: a parser keeps its stacks
// and buffers between parses (it resets itself after each one), which saves
// their allocation on every file.
TSParser* thread_parser() {
  thread_local struct Holder {
    TSParser* parser = ts_parser_new();
    Holder() { ts_parser_set_language(parser, language()); }
    ~Holder() { ts_parser_delete(parser); }
    Holder(const Holder&) = delete;
    Holder& operator=(const Holder&) = delete;
  } holder;
  return holder.parser;
}

}  // namespace

namespace {

// The model's largest tables keep their storage from file to file, one set
// per thread: a file's references, bindings and calls are written into memory
// the previous file warmed, instead of into fresh pages that each vector
// doubling copies again. A table grown past kKeepBytes by a huge file is
// given back rather than kept. A model that outlives its thread's storage
// (destroyed during thread exit) keeps its own and frees it.
template <class T>
struct Recycled {
  std::vector<T> storage;
  bool alive = true;
  ~Recycled() { alive = false; }
};

template <class T>
Recycled<T>& recycled() {
  thread_local Recycled<T> r;
  return r;
}

template <class T>
void take_storage(std::vector<T>& v) {
  Recycled<T>& r = recycled<T>();
  if (!r.alive) return;
  v.swap(r.storage);
  v.clear();
}

template <class T>
void give_back_storage(std::vector<T>& v) noexcept {
  constexpr size_t kKeepBytes = size_t{32} << 20;
  v.clear();
  Recycled<T>& r = recycled<T>();
  if (r.alive && v.capacity() * sizeof(T) <= kKeepBytes && v.capacity() > r.storage.capacity()) v.swap(r.storage);
}

}  // namespace

Model::Model(std::string_view text, const Config& config, std::string path, bool resolves_imports)
    : source_(text), config_(config), path_(std::move(path)), resolves_imports_(resolves_imports) {
  tree_ = parse_python(thread_parser(), text);
  if (!tree_) throw std::runtime_error("the parser gave up on this file");
  take_storage(references_);
  take_storage(bindings_);
  take_storage(calls_);
  try {
    Builder(*this).run();
  } catch (...) {
    release();  // no destructor runs for a constructor that throws
    throw;
  }
}

Model::~Model() { release(); }

void Model::release() noexcept {
  give_back_storage(references_);
  give_back_storage(bindings_);
  give_back_storage(calls_);
  if (tree_) ts_tree_delete(tree_);
  tree_ = nullptr;
}

TSNode Model::root() const { return ts_tree_root_node(tree_); }

bool Model::has_syntax_errors() const { return ts_node_has_error(root()); }

uint32_t Model::first_error_line() const {
  if (!has_syntax_errors()) return 0;
  TSTreeCursor cursor = ts_tree_cursor_new(root());
  uint32_t line = 0;
  while (true) {
    TSNode n = ts_tree_cursor_current_node(&cursor);
    if (kind_of(n) == Kind::Error || ts_node_is_missing(n)) {
      line = ts_node_start_point(n).row + 1;
      break;
    }
    // Descend into the first child that contains an error.
    bool moved = false;
    if (ts_tree_cursor_goto_first_child(&cursor)) {
      do {
        if (ts_node_has_error(ts_tree_cursor_current_node(&cursor))) {
          moved = true;
          break;
        }
      } while (ts_tree_cursor_goto_next_sibling(&cursor));
    }
    if (!moved) {
      line = ts_node_start_point(n).row + 1;
      break;
    }
  }
  ts_tree_cursor_delete(&cursor);
  return line;
}

Position Model::position(TSNode n) const {
  TSPoint p = ts_node_start_point(n);
  return {p.row + 1, p.column};
}

std::string Model::resolve_alias(std::string_view local) const {
  auto it = aliases_.find(local);
  return it == aliases_.end() ? std::string(local) : it->second;
}

std::optional<ForeignDefinition> Model::foreign_import(std::string_view local) const {
  if (!resolves_imports_ || path_.empty()) return std::nullopt;
  auto alias = aliases_.find(local);
  if (alias == aliases_.end()) return std::nullopt;
  auto level = import_levels_.find(local);
  return resolve_foreign(alias->second, level == import_levels_.end() ? 0 : level->second, 0);
}

bool Model::imports_project_files() const {
  if (imports_project_ >= 0) return imports_project_ != 0;
  bool found = false;
  if (resolves_imports_ && !path_.empty()) {
    for (const auto& [local, dotted] : aliases_) {
      auto level = import_levels_.find(local);
      int dots = level == import_levels_.end() ? 0 : level->second;
      size_t dot = dotted.rfind('.');
      std::string module = dot == std::string::npos ? (dots > 0 ? std::string() : dotted) : dotted.substr(0, dot);
      if (!find_module_file(path_, module, dots).empty()) {
        found = true;
        break;
      }
    }
  }
  imports_project_ = found ? 1 : 0;
  return found;
}

std::optional<ForeignDefinition> Model::foreign_definition(TSNode expr) const {
  if (!resolves_imports_) return std::nullopt;
  return imported_definition(expr);
}

std::optional<ForeignDefinition> Model::imported_definition(TSNode expr) const {
  if (path_.empty()) return std::nullopt;
  expr = unparenthesize(expr);
  std::vector<std::string_view> parts;
  while (kind_of(expr) == Kind::Attribute) {
    parts.push_back(text(attribute_name(expr)));
    expr = unparenthesize(attribute_object(expr));
  }
  if (kind_of(expr) != Kind::Identifier) return std::nullopt;
  std::string_view head = text(expr);
  const Binding* b = reaching(head, start_byte(expr), function_at(start_byte(expr)));
  if (!b || b->kind != BindingKind::Import) return std::nullopt;
  auto alias = aliases_.find(head);
  if (alias == aliases_.end()) return std::nullopt;
  std::string dotted = alias->second;
  for (size_t i = parts.size(); i-- > 0;) {
    dotted += '.';
    dotted += parts[i];
  }
  auto level = import_levels_.find(head);
  return resolve_foreign(dotted, level == import_levels_.end() ? 0 : level->second, 0);
}

std::optional<ForeignDefinition> Model::resolve_foreign(const std::string& dotted, int level, int hops) const {
  constexpr int kMaxHops = 3;  // re-exports followed: `from .model import Net` in __init__.py
  if (path_.empty() || hops > kMaxHops) return std::nullopt;
  if (hops == 0) {
    std::string key = std::to_string(level) + ":" + dotted;
    if (auto it = foreign_cache_.find(key); it != foreign_cache_.end()) return it->second;
    auto def = resolve_foreign(dotted, level, 1);
    foreign_cache_.emplace(std::move(key), def);
    return def;
  }
  size_t dot = dotted.rfind('.');
  std::string module = dot == std::string::npos ? std::string() : dotted.substr(0, dot);
  std::string name = dot == std::string::npos ? dotted : dotted.substr(dot + 1);
  if (module.empty() && level == 0) return std::nullopt;
  // A submodule (`from . import functional`) defines nothing by that name: no file is read.
  if (!find_module_file(path_, dotted, level).empty()) return std::nullopt;
  std::string file = find_module_file(path_, module, level);
  if (file.empty()) return std::nullopt;
  const Model* other = foreign_model(file, config_);
  if (!other) return std::nullopt;
  ForeignDefinition def;
  def.model = other;
  if (const Function* f = other->find_function(name)) {
    def.function = f;
    return def;
  }
  if (const Class* k = other->find_class(name)) {
    if (k->function < 0) {
      def.cls = static_cast<int>(k - other->classes_.data());
      return def;
    }
  }
  const Binding* last = nullptr;
  for (const Binding* b : other->bindings_of(name, -1))
    if (!last || b->start > last->start) last = b;
  if (!last) return std::nullopt;
  if (last->kind == BindingKind::Import) {
    auto alias = other->aliases_.find(name);
    if (alias == other->aliases_.end()) return std::nullopt;
    auto lv = other->import_levels_.find(name);
    return other->resolve_foreign(alias->second, lv == other->import_levels_.end() ? 0 : lv->second,
                                  std::max(hops, 1) + 1);
  }
  if (last->kind != BindingKind::Assign) return std::nullopt;
  def.binding = last;
  return def;
}

void Model::forget_answers() const {
  callee_files_.clear();
  // A kept model's resolutions point into other kept models, which a later
  // file's analysis may rebuild or drop; and each analysis must read the
  // files it depends on itself (the analysis cache records them).
  foreign_cache_.clear();
  provenance_cache_.clear();
  value_cache_.clear();
  value_in_progress_.clear();
  std::fill(entry_grad_.begin(), entry_grad_.end(), static_cast<signed char>(-1));
  std::fill(entry_grad_busy_.begin(), entry_grad_busy_.end(), false);
  in_progress_.clear();
  step_closures_.reset();
  hook_sites_.reset();
  switches_.clear();
  slice_deletes_.reset();
  step_loops_.clear();
}

std::string Model::qualify(TSNode n) const {
  n = unparenthesize(n);
  if (kind_of(n) == Kind::Attribute) {
    std::string_view t = text(n);
    size_t dot = t.find('.');
    if (dot != std::string_view::npos && plain_dotted_name(t)) {
      auto alias = aliases_.find(t.substr(0, dot));
      if (alias == aliases_.end()) return std::string(t);
      std::string out = alias->second;
      out += t.substr(dot);
      return out;
    }
  }
  // Walk down the object chain iteratively: a.b.c.d. The attribute names go
  // to a small buffer on the stack, to the heap only for very long chains.
  constexpr size_t kInline = 8;
  std::array<std::string_view, kInline> parts;
  std::vector<std::string_view> more_parts;
  size_t count = 0;
  while (kind_of(n) == Kind::Attribute) {
    std::string_view part = text(attribute_name(n));
    if (count < kInline) parts[count] = part;
    else more_parts.push_back(part);
    ++count;
    n = unparenthesize(attribute_object(n));
  }
  if (kind_of(n) != Kind::Identifier) return {};
  std::string_view head = text(n);
  auto alias = aliases_.find(head);
  std::string out = alias == aliases_.end() ? std::string(head) : alias->second;
  for (size_t i = count; i-- > 0;) {
    out += '.';
    out += i < kInline ? parts[i] : more_parts[i - kInline];
  }
  return out;
}

int Model::function_at(uint32_t byte) const {
  // Functions are in source order and nest: the innermost one containing
  // `byte` is the last one starting at or before it, or one enclosing that one.
  auto after = std::upper_bound(functions_.begin(), functions_.end(), byte,
                                [](uint32_t b, const Function& f) { return b < start_byte(f.node); });
  int i = static_cast<int>(after - functions_.begin()) - 1;
  while (i >= 0 && !contains(functions_[i].node, byte)) i = functions_[i].parent;
  return i;
}

const Function* Model::find_method(int cls, std::string_view name) const {
  if (cls < 0) return nullptr;
  for (int m : classes_[cls].methods)
    if (functions_[m].name == name) return &functions_[m];
  // Bases defined in this file.
  for (const auto& base : classes_[cls].bases) {
    for (size_t i = 0; i < classes_.size(); ++i) {
      if (static_cast<int>(i) != cls && classes_[i].name == base) {
        if (const Function* f = find_method(static_cast<int>(i), name)) return f;
      }
    }
  }
  return nullptr;
}

std::span<const Call> Model::calls_in(uint32_t start, uint32_t end) const {
  auto by_start = [](const Call& c, uint32_t at) { return start_byte(c.node) < at; };
  auto first = std::lower_bound(calls_.begin(), calls_.end(), start, by_start);
  auto last = std::lower_bound(first, calls_.end(), end, by_start);
  return {first, last};
}

const Function* Model::find_function(std::string_view name) const {
  auto it = top_functions_.find(name);
  return it == top_functions_.end() ? nullptr : &functions_[static_cast<size_t>(it->second)];
}

const Class* Model::find_class(std::string_view name) const {
  auto it = classes_by_name_.find(name);
  return it == classes_by_name_.end() ? nullptr : &classes_[static_cast<size_t>(it->second)];
}

bool Model::class_is_module(int cls) const {
  std::vector<int> work{cls};
  std::unordered_set<int> seen;
  while (!work.empty()) {
    int c = work.back();
    work.pop_back();
    if (c < 0 || !seen.insert(c).second) continue;
    for (const auto& base : classes_[c].bases) {
      if (base == "torch.nn.Module" || base == "torch.nn.modules.module.Module") return true;
      for (size_t i = 0; i < classes_.size(); ++i)
        if (classes_[i].name == base) work.push_back(static_cast<int>(i));
    }
  }
  return false;
}

bool is_module_base(std::string_view q, const Config& config) {
  std::string_view leaf = last_component(q);
  for (const auto& extra : config.extra_models)
    if (extra == q || extra == leaf) return true;
  if (q == "torch.nn.Module" || q == "torch.nn.modules.module.Module" || q == "torch.jit.ScriptModule") return true;
  if (starts_with(q, "torch.nn.") && !starts_with(q, "torch.nn.functional.") && !starts_with(q, "torch.nn.utils.") &&
      !starts_with(q, "torch.nn.init.") && is_capitalized(leaf) && leaf != "Parameter" &&
      leaf != "UninitializedParameter" && leaf != "Buffer" && leaf != "UninitializedBuffer")
    return true;
  if (leaf == "LightningModule" && (starts_with(q, "pytorch_lightning.") || starts_with(q, "lightning.")))
    return true;
  if (starts_with(q, "transformers.") && ends_with(leaf, "PreTrainedModel")) return true;
  return starts_with(q, "torchvision.models.") && is_capitalized(leaf);
}

namespace {

// Bases that are certainly not nn.Module classes: builtins, the standard
// library's typing helpers, numpy, and torch classes that are not modules.
bool certainly_not_module(std::string_view q) {
  constexpr std::array<std::string_view, 12> kBuiltins = {
      "object", "Exception", "BaseException", "ValueError", "RuntimeError", "dict",
      "list", "tuple", "set", "str", "int", "float"};
  if (one_of(q, kBuiltins)) return true;
  for (std::string_view p : {"typing.", "abc.", "enum.", "collections.", "dataclasses.", "numpy.", "torch."})
    if (starts_with(q, p)) return true;
  return false;
}

}  // namespace

ModuleAnswer Model::module_class(int cls, std::vector<std::string>* undecided) const {
  if (cls < 0 || static_cast<size_t>(cls) >= classes_.size()) return ModuleAnswer::No;
  std::vector<int> work{cls};
  std::unordered_set<int> seen;
  bool unknown = false;
  while (!work.empty()) {
    int c = work.back();
    work.pop_back();
    if (!seen.insert(c).second) continue;
    for (const auto& base : classes_[c].bases) {
      if (is_module_base(base, config_)) return ModuleAnswer::Yes;
      bool local = false;
      for (size_t i = 0; i < classes_.size(); ++i) {
        if (classes_[i].name == base) {
          work.push_back(static_cast<int>(i));
          local = true;
        }
      }
      if (local || certainly_not_module(base)) continue;
      unknown = true;
      if (undecided) undecided->push_back(base);
    }
  }
  return unknown ? ModuleAnswer::Unknown : ModuleAnswer::No;
}

Truth Model::trainable_parameters(int cls) const {
  if (cls < 0 || static_cast<size_t>(cls) >= classes_.size()) return Truth::Unknown;
  if (auto it = trainable_.find(cls); it != trainable_.end()) return it->second;
  trainable_[cls] = Truth::Unknown;  // a cycle of classes says nothing
  const LibraryModels& lib = library();
  bool unknown = false;
  auto facet = [&](ParameterFacet p) {
    if (p == ParameterFacet::Trainable) return Truth::True;
    return p == ParameterFacet::None ? Truth::False : Truth::Unknown;
  };
  auto answer = [&](Truth t) {
    trainable_[cls] = t;
    return t;
  };
  for (const auto& base : classes_[cls].bases) {
    Truth t = Truth::Unknown;
    if (const Class* local = find_class(base); local && local != &classes_[cls]) {
      t = trainable_parameters(static_cast<int>(local - classes_.data()));
    } else if (lib.canonical(base) == "torch.nn.Module") {
      t = Truth::False;
    } else {
      t = facet(lib.class_parameters(base));
    }
    if (t == Truth::True) return answer(t);
    unknown |= t == Truth::Unknown;
  }
  // What a value stored on `self` holds.
  auto stored = [&](TSNode v) {
    v = unparenthesize(v);
    if (kind_of(v) == Kind::Call) {
      std::string callee = qualify(field(v, "function"));
      std::string canonical = lib.canonical(callee);
      if (canonical == "torch.nn.Parameter" || canonical == "torch.nn.parameter.Parameter") {
        bool frozen = false;  // nn.Parameter(w, requires_grad=False)
        for_each_named_child(field(v, "arguments"), [&](TSNode a) {
          frozen = frozen || (kind_of(a) == Kind::KeywordArgument && text(field(a, "name")) == "requires_grad" &&
                              kind_of(unparenthesize(field(a, "value"))) == Kind::False);
        });
        return frozen ? Truth::False : Truth::True;
      }
      if (const CallModel* cm = callee.empty() ? nullptr : lib.call(callee); cm && cm->frozen) {
        for (const Call& c : calls_) {
          if (c.node.id != v.id) continue;
          TSNode flag = operand(c, *cm->frozen);
          return !is_null(flag) && kind_of(unparenthesize(flag)) == Kind::False ? Truth::True : Truth::False;
        }
      }
      if (!callee.empty() && lib.class_kind(callee) != ValueKind::Unknown) return facet(lib.class_parameters(callee));
    }
    if (kind_of(v) == Kind::Identifier) {
      // A parameter defaulting to a number, a string or None (`hop_length=200`).
      const Binding* p = reaching(text(v), start_byte(v), function_at(start_byte(v)));
      if (p && p->kind == BindingKind::Parameter && !is_null(p->value)) {
        Kind d = kind_of(unparenthesize(p->value));
        if (d == Kind::Integer || d == Kind::Float || d == Kind::String || d == Kind::True || d == Kind::False ||
            d == Kind::None)
          return Truth::False;
      }
    }
    Value val = value(v);
    if (val.kind == ValueKind::Module) {
      if (val.cls < 0) return Truth::Unknown;
      return val.home ? val.home->trainable_parameters(val.cls) : trainable_parameters(val.cls);
    }
    switch (val.kind) {
      case ValueKind::Tensor:
      case ValueKind::Number:
      case ValueKind::None:
      case ValueKind::Loss:
      case ValueKind::Generator:
      case ValueKind::Loader:
      case ValueKind::Optimizer: return Truth::False;
      default: return Truth::Unknown;
    }
  };
  for (const Binding& binding : bindings_) {
    const Binding* b = &binding;
    if (b->function < 0 || functions_[b->function].cls != cls || functions_[b->function].params.empty()) continue;
    const std::string& self = functions_[b->function].params.front();
    if (b->name.size() <= self.size() + 1 || b->name.compare(0, self.size(), self) != 0 || b->name[self.size()] != '.')
      continue;
    if (b->name.find('.', self.size() + 1) != std::string::npos) continue;  // `self.a.b`: a's business
    // What forward keeps on the module are its activations, not parameters
    // (a lazy layer that builds one there builds an nn.Parameter or a layer).
    bool in_forward = functions_[b->function].name == "forward";
    if (b->kind != BindingKind::Assign && b->kind != BindingKind::AugAssign) {
      unknown = unknown || !in_forward;
      continue;
    }
    TSNode v = unparenthesize(b->value);
    if (b->element >= 0) {
      Kind k = kind_of(v);
      if ((k != Kind::Tuple && k != Kind::ExpressionList && k != Kind::List) ||
          static_cast<uint32_t>(b->element) >= ts_node_named_child_count(v)) {
        unknown = unknown || !in_forward;
        continue;
      }
      v = unparenthesize(ts_node_named_child(v, static_cast<uint32_t>(b->element)));
    }
    Truth t = stored(v);
    if (t == Truth::True) return answer(t);
    unknown = unknown || (t == Truth::Unknown && !in_forward);
  }
  // `self.register_parameter(...)`, `self.add_module(...)`, `setattr(self, ...)`.
  for (const Call& c : calls_) {
    if (c.function < 0 || functions_[c.function].cls != cls || functions_[c.function].params.empty()) continue;
    const std::string& self = functions_[c.function].params.front();
    if (c.method == "register_parameter" && c.callee.rfind(self + ".", 0) == 0) return answer(Truth::True);
    if ((c.method == "add_module" || c.method == "register_module") && c.callee.rfind(self + ".", 0) == 0)
      unknown = true;
    if (c.callee == "setattr" && text(unparenthesize(positional_argument(c, 0))) == self) unknown = true;
  }
  return answer(unknown ? Truth::Unknown : Truth::False);
}

Truth Model::trainable_parameters(const Value& module) const {
  if (module.kind != ValueKind::Module || module.cls < 0) return Truth::Unknown;
  return (module.home ? module.home : this)->trainable_parameters(module.cls);
}

std::string Model::class_of(TSNode expr) const {
  expr = unparenthesize(expr);
  Kind k = kind_of(expr);
  if (k == Kind::Call) {
    std::string callee = qualify(field(expr, "function"));
    if (callee.empty()) return {};
    if (library().knows_class(callee)) return library().canonical(callee);
    // A factory the models say builds an instance of a class.
    if (const CallModel* cm = library().call(callee); cm && !cm->result_class.empty())
      return library().canonical(cm->result_class);
    if (const Class* c = find_class(callee)) {  // a class of this file: its first known base
      for (const auto& base : c->bases)
        if (library().knows_class(base)) return library().canonical(base);
    }
    return {};
  }
  if (k != Kind::Identifier && k != Kind::Attribute) return {};
  std::string name = qualify(expr);
  if (name.empty()) return {};
  int fn = function_at(start_byte(expr));
  if (name == "self") {  // the enclosing class's first known base
    int cls = class_of_function(fn);
    if (cls < 0) return {};
    for (const auto& base : classes_[static_cast<size_t>(cls)].bases)
      if (library().knows_class(base) || library().has_hooks(base)) return library().canonical(base);
    return {};
  }
  const Binding* b = k == Kind::Attribute ? attribute_binding(name, fn) : reaching(name, start_byte(expr), fn);
  if (!b || (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) || b->element >= 0 ||
      is_null(b->value) || kind_of(unparenthesize(b->value)) != Kind::Call)
    return {};
  return class_of(b->value);
}

TSNode Model::operand(const Call& c, const Operand& op) const {
  if (op.kind == Operand::Kind::Self) return c.receiver;
  if (!op.keyword.empty())
    if (TSNode k = keyword_argument(c, op.keyword); !is_null(k)) return k;
  return positional_argument(c, op.index);
}

const CallModel* Model::call_model(const Call& c) const {
  const LibraryModels& lib = library();
  if (c.method.empty()) {
    if (c.callee.empty()) return nullptr;
    if (c.callee.find('.') == std::string::npos)
      return find_function(c.callee) ? nullptr : lib.call("builtins." + c.callee);
    return lib.call(c.callee);
  }
  // A module's function (torch.cuda.empty_cache) by its qualified name.
  if (!c.callee.empty() && c.callee.rfind("self.", 0) != 0)
    if (const CallModel* f = lib.call(c.callee)) return f;
  std::string cls = class_of(c.receiver);
  if (!cls.empty()) return lib.method(cls, c.method);
  return lib.tensor_method(c.method);
}

std::vector<TSNode> Model::backward_subjects(const Call& c) const {
  if (!library().may_run_backward(call_name(c))) return {};
  return backward_subjects(c, call_model(c));
}

std::vector<TSNode> Model::backward_subjects(const Call& c, const CallModel* model) const {
  std::vector<TSNode> out;
  if (!model || !model->backward) return out;
  TSNode subject = operand(c, *model->backward);
  // A method of a receiver whose class is unknown, named backward and given a
  // value (accelerator.backward(loss), engine.backward(loss)): the value is
  // differentiated, not the receiver.
  TSNode first = positional_argument(c, 0);
  bool unknown_receiver = !c.method.empty() && model->name == "torch.Tensor.backward" && class_of(c.receiver).empty();
  if (unknown_receiver && !is_null(first)) out.push_back(first);
  if (!is_null(subject)) out.push_back(subject);
  return out;
}

bool Model::runs_loop(const Call& c) const {
  if (!library().may_run_loop(call_name(c))) return false;
  const CallModel* model = call_model(c);
  return model && model->runs_loop;
}

TSNode Model::stepped_optimizer(const Call& c) const {
  const CallModel* model = library().may_step(call_name(c)) ? call_model(c) : nullptr;
  if (model && model->steps) return operand(c, *model->steps);
  // The documented default for a receiver of unknown class: `x.step()` steps
  // an optimizer when `x` is one by construction or configuration, and
  // `scaler.step(opt)` when its argument is.
  if (c.method != "step") return TSNode{};
  if (is_optimizer(c.receiver)) return c.receiver;
  TSNode first = positional_argument(c, 0);
  if (!is_null(first) && is_optimizer(first)) return first;
  return TSNode{};
}

bool Model::accumulates_grads(const Call& c) const {
  if (!library().may_run_backward(call_name(c))) return false;
  const CallModel* model = call_model(c);  // resolved once for both questions
  return model && model->accumulates_grads && !backward_subjects(c, model).empty();
}

bool Model::is_environment_check(TSNode condition) const {
  condition = unparenthesize(condition);
  Kind k = kind_of(condition);
  if (k == Kind::BooleanOperator && text(ts_node_child(condition, 1)) == "and")
    return is_environment_check(field(condition, "left")) && is_environment_check(field(condition, "right"));
  if (k == Kind::NotOperator) return is_environment_check(field(condition, "argument"));
  // `dist.get_rank() == 0`, `args.local_rank in (-1, 0)`: a test of the process compared with a constant.
  if (k == Kind::ComparisonOperator && ts_node_named_child_count(condition) == 2) {
    TSNode right = unparenthesize(ts_node_named_child(condition, 1));
    Kind rk = kind_of(right);
    bool constant = rk == Kind::Integer || rk == Kind::String || rk == Kind::True || rk == Kind::False ||
                    rk == Kind::None || rk == Kind::Tuple || rk == Kind::List;
    return constant && is_environment_check(ts_node_named_child(condition, 0));
  }
  // A property of the process (`state.is_world_process_zero`,
  // `accelerator.is_main_process`) or a method of an object (`trainer.is_world_process_zero()`).
  TSNode member = k == Kind::Attribute ? condition : TSNode{};
  if (k == Kind::Call && kind_of(unparenthesize(field(condition, "function"))) == Kind::Attribute)
    member = unparenthesize(field(condition, "function"));
  if (!is_null(member)) {
    std::string_view name = text(field(member, "attribute"));
    if (library().may_check_environment(name)) {
      std::string cls = class_of(field(member, "object"));
      if (cls.empty()) return true;  // the name decides for an object of unknown class
      const CallModel* model = library().method(cls, name);
      if (model) return model->environment_check;
    }
  }
  if (k != Kind::Call) return false;
  const CallModel* model = library().call(qualify(field(condition, "function")));
  return model && model->environment_check;
}

bool Model::releases_cache(const Call& c) const {
  if (!library().may_release_cache(call_name(c))) return false;
  const CallModel* model = call_model(c);
  return model && model->releases_cache;
}

const HookModel* Model::hook_model(int function) const {
  if (function < 0) return nullptr;
  const Function& f = functions_[static_cast<size_t>(function)];
  const LibraryModels& lib = library();
  if (f.cls < 0 || !lib.is_hook_name(f.name)) return nullptr;
  std::vector<int> work{f.cls};
  std::unordered_set<int> seen;
  while (!work.empty()) {
    int c = work.back();
    work.pop_back();
    if (!seen.insert(c).second) continue;
    for (const auto& base : classes_[static_cast<size_t>(c)].bases) {
      if (const HookModel* h = lib.hook(base, f.name)) return h;
      for (size_t i = 0; i < classes_.size(); ++i)
        if (classes_[i].name == base) work.push_back(static_cast<int>(i));
    }
  }
  return nullptr;
}

bool Model::registered_class(int cls) const {
  if (cls < 0) return false;
  const auto& d = classes_[cls].decorators;
  return std::any_of(d.begin(), d.end(), [&](const std::string& q) { return library().registry_key(q) != nullptr; });
}

bool Model::function_has_decorator(int function, std::string_view qualified) const {
  if (function < 0) return false;
  const auto& d = functions_[function].decorators;
  return std::find(d.begin(), d.end(), qualified) != d.end();
}

bool Model::loop_contains(int loop, uint32_t byte) const {
  return loop >= 0 && loops_[loop].start <= byte && byte < loops_[loop].end;
}

int Model::innermost_loop(uint32_t byte, int function) const {
  // Loops are in source order and nest: every loop containing `byte` encloses
  // the last loop starting at or before it, innermost first along loop_outer_.
  auto after = std::upper_bound(loops_.begin(), loops_.end(), byte,
                                [](uint32_t b, const Loop& l) { return b < start_byte(l.node); });
  for (int i = static_cast<int>(after - loops_.begin()) - 1; i >= 0; i = loop_outer_[i])
    if (loops_[i].function == function && loop_contains(i, byte)) return i;
  return -1;
}

std::vector<int> Model::enclosing_loops(uint32_t byte, int function) const {
  std::vector<int> out;
  for (int l = innermost_loop(byte, function); l >= 0; l = loops_[l].parent) {
    if (loop_contains(l, byte)) out.push_back(l);
  }
  return out;
}

GradState Model::grad_state(uint32_t byte) const {
  // Regions are sorted by start; the last containing one is the innermost.
  GradState state = GradState::Enabled;
  bool decided = false;
  for (const auto& r : regions_) {
    if (r.start > byte) break;
    if (byte < r.end) {
      state = r.state;
      decided = true;
    }
  }
  // No region of its own: the mode its callers run it under.
  if (!decided) state = entry_grad(function_at(byte));
  return state;
}

std::vector<const Binding*> Model::bindings_of(std::string_view name, int function) const {
  std::vector<const Binding*> out;
  auto it = bindings_by_name_.find(name);
  if (it == bindings_by_name_.end()) return out;
  for (int i : it->second)
    if (bindings_[i].function == function) out.push_back(&bindings_[i]);
  return out;
}

const Binding* Model::attribute_binding(std::string_view name, int function) const {
  // self.x is shared by every method of the class: prefer __init__.
  int cls = class_of_function(function);
  if (cls < 0) return nullptr;
  auto it = bindings_by_name_.find(name);
  if (it == bindings_by_name_.end()) return nullptr;
  const Binding* best = nullptr;
  for (int i : it->second) {
    const Binding& b = bindings_[i];
    if (b.kind != BindingKind::Assign || b.function < 0 || functions_[b.function].cls != cls) continue;
    if (!best || functions_[b.function].name == "__init__") best = &b;
  }
  return best;
}

const Binding* Model::reaching(std::string_view name, uint32_t use, int function) const {
  auto it = bindings_by_name_.find(name);
  if (it == bindings_by_name_.end()) return nullptr;
  const std::vector<int>& all = it->second;
  auto is_comprehension_target = [&](const Binding& b) {
    return b.kind == BindingKind::ForTarget && b.loop >= 0 && loops_[b.loop].kind == LoopKind::Comprehension;
  };
  const Binding* best = nullptr;
  const Binding* module_level = nullptr;
  const Binding* comprehension = nullptr;  // the innermost comprehension variable around `use`
  bool global = false;
  auto consider_comprehension = [&](const Binding& b) {
    // A comprehension's variables are visible only inside it.
    if (b.function == function && loop_contains(b.loop, use) &&
        (!comprehension || loops_[b.loop].start >= loops_[comprehension->loop].start))
      comprehension = &b;
  };
  if (all.size() <= 16) {  // a few bindings: one scan
    for (int i : all) {
      const Binding& b = bindings_[i];
      if (b.kind == BindingKind::SubscriptStore) continue;
      if (is_comprehension_target(b)) {
        consider_comprehension(b);
        continue;
      }
      if (b.function == function) {
        if (b.kind == BindingKind::Global) {
          global = true;
          continue;
        }
        if (b.end <= use && (!best || b.end >= best->end)) best = &b;
      } else if (b.function == -1 && b.kind != BindingKind::Global) {
        if (!module_level || b.start > module_level->start) module_level = &b;
      }
    }
  } else {
    auto [slot, fresh] = reach_index_.try_emplace(&all);
    ReachIndex& index = slot->second;
    if (fresh) {
      for (int i : all) {
        const Binding& b = bindings_[i];
        if (b.kind == BindingKind::SubscriptStore) continue;
        if (is_comprehension_target(b)) {
          index.comprehension.push_back(i);
        } else if (b.kind == BindingKind::Global) {
          index.declares_global.insert(b.function);
        } else {
          index.by_function[b.function].push_back(i);
          if (b.function == -1 && (index.module_level < 0 || b.start > bindings_[index.module_level].start))
            index.module_level = i;
        }
      }
      for (auto& [f, list] : index.by_function)
        std::stable_sort(list.begin(), list.end(), [&](int a, int b) { return bindings_[a].end < bindings_[b].end; });
    }
    for (int i : index.comprehension) consider_comprehension(bindings_[i]);
    global = index.declares_global.count(function) > 0;
    if (auto f = index.by_function.find(function); f != index.by_function.end()) {
      // The last binding ending at or before `use` (the latest of equal ends).
      auto after = std::upper_bound(f->second.begin(), f->second.end(), use,
                                    [&](uint32_t at, int b) { return at < bindings_[b].end; });
      if (after != f->second.begin()) best = &bindings_[*(after - 1)];
    }
    if (function != -1 && index.module_level >= 0) module_level = &bindings_[index.module_level];
  }
  if (comprehension) return comprehension;
  if (best && !global) return best;
  if (function >= 0 && module_level) return module_level;
  return best;
}

bool Model::bound_before_loop(std::string_view name, int loop) const {
  if (loop < 0) return false;
  const Loop& l = loops_[loop];
  if (name.find('.') != std::string_view::npos) return true;  // attributes outlive the loop
  bool any = false;
  for (const Binding* b : bindings_of(name, l.function)) {
    if (b->kind == BindingKind::Global) return true;
    if (b->kind == BindingKind::SubscriptStore) continue;
    if (b->end <= l.start || b->kind == BindingKind::Parameter) return true;
    any = true;
  }
  if (any) return false;
  // Not bound in this function at all: a module-level or enclosing name.
  return l.function >= 0 && !bindings_of(name, -1).empty();
}

bool Model::rebound_in_loop(std::string_view name, int loop, const Binding* except) const {
  if (loop < 0) return false;
  const Loop& l = loops_[loop];
  for (const Binding* b : bindings_of(name, l.function)) {
    if (b == except) continue;
    if (b->kind != BindingKind::Assign && b->kind != BindingKind::ForTarget &&
        b->kind != BindingKind::WithTarget && b->kind != BindingKind::NamedExpr)
      continue;
    if (loop_contains(loop, b->start)) return true;
  }
  return false;
}

bool Model::is_backward_subject(std::string_view name, int function) const {
  return backward_subjects_.count(binding_key(function, name)) > 0;
}

bool Model::mentions(TSNode expr, std::string_view name) const {
  std::vector<TSNode> work{expr};
  while (!work.empty()) {
    TSNode n = work.back();
    work.pop_back();
    if (is_null(n)) continue;
    Kind k = kind_of(n);
    if ((k == Kind::Identifier || k == Kind::Attribute) && qualify(n) == name) return true;
    if (k == Kind::Identifier) continue;
    if (k == Kind::Attribute) {  // `a.total` does not read `total`
      work.push_back(field(n, "object"));
      continue;
    }
    if (k == Kind::KeywordArgument) {  // `f(total=1)` does not read `total`
      work.push_back(field(n, "value"));
      continue;
    }
    push_named_children(n, work);
  }
  return false;
}

bool Model::feeds_backward(std::string_view name, int function) const {
  if (backward_subjects_.empty()) return false;  // a file with no backward() at all
  // The functions where `name` (or what is computed from it) may be read.
  auto nested_in = [&](int f, int outer) {
    for (; f >= 0; f = functions_[f].parent)
      if (f == outer) return true;
    return false;
  };
  auto owning_class = [&](int f) {  // the class of a method, or of the method a function is nested in
    for (; f >= 0; f = functions_[f].parent)
      if (functions_[f].cls >= 0) return functions_[f].cls;
    return -1;
  };
  bool global = function < 0;
  for (const Binding* b : bindings_of(name, function)) global = global || b->kind == BindingKind::Global;
  int cls = starts_with(name, "self.") ? owning_class(function) : -1;
  std::vector<bool> in_scope(functions_.size() + 1, false);  // index f + 1; 0 is module level
  in_scope[0] = global;
  for (size_t f = 0; f < functions_.size(); ++f) {
    int fi = static_cast<int>(f);
    in_scope[f + 1] = global || nested_in(fi, function) || (cls >= 0 && owning_class(fi) == cls);
  }

  std::vector<std::string> work{std::string(name)};
  std::unordered_set<std::string> seen{std::string(name)};
  while (!work.empty()) {
    std::string n = std::move(work.back());
    work.pop_back();
    for (size_t f = 0; f < in_scope.size(); ++f)
      if (in_scope[f] && is_backward_subject(n, static_cast<int>(f) - 1)) return true;
    for (const Binding& b : bindings_) {
      if (!in_scope[static_cast<size_t>(b.function + 1)] || is_null(b.value) || seen.count(b.name)) continue;
      if (b.kind == BindingKind::Parameter || b.kind == BindingKind::Import) continue;
      if (!mentions(b.kind == BindingKind::Assign ? element_value(b) : b.value, n)) continue;
      seen.insert(b.name);
      work.push_back(b.name);
    }
  }
  return false;
}

namespace {
// `xs[:]`: a slice with neither bounds nor step.
bool whole_slice(TSNode subscript) {
  if (kind_of(subscript) != Kind::Subscript) return false;
  TSNode index = field(subscript, "subscript");
  return std::string_view(ts_node_type(index)) == "slice" && ts_node_named_child_count(index) == 0;
}
}  // namespace

bool Model::reset_in_loop(std::string_view name, int loop, bool every_iteration) const {
  if (loop < 0) return false;
  const Loop& l = loops_[loop];
  return reset_in_region(name, l.function, field(l.node, "body"), every_iteration,
                         [&](uint32_t at) { return loop_contains(loop, at); });
}

bool Model::reset_in_region(std::string_view name, int function, TSNode body, bool every_time,
                            const std::function<bool(uint32_t)>& inside) const {
  // Whether `node` runs every time the region does.
  auto every = [&](TSNode node) { return !every_time || is_null(body) || unconditional_within(node, body); };
  // `stats.total` starts afresh with `stats.total = 0` and with `stats = Stats()`.
  for (std::string_view n = name;; n = n.substr(0, n.rfind('.'))) {
    for (const Binding* b : bindings_of(n, function)) {
      if (!inside(b->start)) continue;
      switch (b->kind) {
        case BindingKind::ForTarget:
        case BindingKind::WithTarget:
          if (every(b->statement)) return true;
          break;
        case BindingKind::Assign:
        case BindingKind::NamedExpr:
          if ((is_null(b->value) || !mentions(element_value(*b), n)) && every(b->statement)) return true;
          break;
        case BindingKind::SubscriptStore:
          // `xs[:] = []`: the whole content replaced.
          if (whole_slice(b->target) && !is_null(b->value) && !mentions(element_value(*b), n) && every(b->statement))
            return true;
          break;
        default: break;
      }
    }
    for (int i : calls_named("clear")) {
      const Call& c = calls_[static_cast<size_t>(i)];
      if (c.function == function && c.method == "clear" && inside(start_byte(c.node)) && qualify(c.receiver) == n &&
          every(c.node))
        return true;
    }
    // `del xs[:]`.
    if (!slice_deletes_) {
      slice_deletes_.emplace();
      // The subscript of `xs[:]`, `self.xs[:]`, `self.a.xs[:]` (the
      // ancestors each reference keeps), in a file with a `del` at all.
      bool deletes = source_.text().find("del ") != std::string_view::npos;
      for (const Reference& r : references_) {
        if (!deletes) break;
        TSNode sub = r.parent;
        if (kind_of(sub) == Kind::Attribute) sub = r.grandparent;
        if (kind_of(sub) == Kind::Attribute) sub = r.great_grandparent;
        if (!whole_slice(sub)) continue;
        TSNode statement = ts_node_parent(sub);
        if (kind_of(statement) == Kind::ExpressionList) statement = ts_node_parent(statement);
        if (std::string_view(ts_node_type(statement)) == "delete_statement") slice_deletes_->push_back({sub, r.function});
      }
    }
    for (const auto& [sub, in] : *slice_deletes_)
      if (in == function && inside(start_byte(sub)) && qualify(field(sub, "value")) == n && every(ts_node_parent(sub)))
        return true;
    if (n.rfind('.') == std::string_view::npos) break;
  }
  return false;
}

bool Model::reset_per_step(std::string_view name, int function) const {
  if (function < 0) return false;
  auto whole = [](uint32_t) { return true; };
  const Function& f = functions_[function];
  if (reset_in_region(name, function, f.body, true, whole)) return true;
  if (!name.starts_with("self.") || f.cls < 0) return false;
  for (size_t g = 0; g < functions_.size(); ++g) {
    const Function& other = functions_[g];
    if (static_cast<int>(g) == function || other.cls != f.cls || !other.hook) continue;
    if (other.hook->role != HookRole::TrainingStep && other.hook->role != HookRole::PerStep) continue;
    if (reset_in_region(name, static_cast<int>(g), other.body, true, whole)) return true;
  }
  return false;
}

bool Model::holds_list(std::string_view name, uint32_t use, int function) const {
  const Binding* b = starts_with(name, "self.") ? attribute_binding(name, function) : reaching(name, use, function);
  for (int guard = 0; b && b->kind == BindingKind::AugAssign && guard < kMaxDepth; ++guard)
    b = reaching(name, b->start, b->function);
  if (!b || (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr && b->kind != BindingKind::Parameter))
    return false;
  TSNode v = element_value(*b);
  switch (kind_of(v)) {
    case Kind::List:
    case Kind::ListComprehension: return true;
    case Kind::Call: return qualify(field(v, "function")) == "list";
    case Kind::BinaryOperator:  // [None] * n
      return text(field(v, "operator")) == "*" &&
             (kind_of(unparenthesize(field(v, "left"))) == Kind::List ||
              kind_of(unparenthesize(field(v, "right"))) == Kind::List);
    default: return false;
  }
}

bool Model::stores_attached(std::string_view name, uint32_t use, int function, int depth) const {
  if (auto it = stores_by_container_.find(std::string(name)); it != stores_by_container_.end()) {
    for (int i : it->second) {
      const Call& c = calls_[i];
      if (start_byte(c.node) >= use) break;  // in source order
      if (c.function != function) continue;
      TSNode value = positional_argument(c, c.method == "insert" ? 1 : 0);
      if (provenance_at(value, depth + 1) == Provenance::Attached) return true;
    }
  }
  for (const Binding* b : bindings_of(name, function)) {
    if (b->kind != BindingKind::SubscriptStore || b->end > use) continue;
    if (provenance_at(element_value(*b), depth + 1) == Provenance::Attached) return true;
  }
  return false;
}

bool Model::is_data_loader(TSNode expr) const { return data_loader_at(expr, 0); }

bool Model::data_loader_at(TSNode expr, int depth) const {
  expr = unparenthesize(expr);
  if (is_null(expr) || depth > kMaxDepth) return false;
  switch (kind_of(expr)) {
    case Kind::Call: {
      std::string callee = qualify(field(expr, "function"));
      std::string_view last = last_component(callee);
      if (ends_with(last, "DataLoader")) return true;
      if (!one_of(last, kIterableWrappers)) return false;
      TSNode args = field(expr, "arguments");
      uint32_t n = is_null(args) ? 0 : ts_node_named_child_count(args);
      for (uint32_t i = 0; i < n; ++i) {
        TSNode a = ts_node_named_child(args, i);
        if (kind_of(a) != Kind::KeywordArgument && data_loader_at(a, depth + 1)) return true;
      }
      return false;
    }
    case Kind::Subscript: {  // dataloaders[phase]: an element of a collection of loaders
      std::string collection(last_component(qualify(field(expr, "value"))));
      for (auto& c : collection) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (ends_with(collection, "loaders") || ends_with(collection, "datasets")) return true;
      return data_loader_at(field(expr, "value"), depth + 1);
    }
    case Kind::Identifier:
    case Kind::Attribute: {
      std::string name = qualify(expr);
      if (name.empty()) return false;
      int fn = function_at(start_byte(expr));
      const Binding* b = kind_of(expr) == Kind::Attribute ? attribute_binding(name, fn)
                                                          : reaching(name, start_byte(expr), fn);
      // The chunks of a tensor, whatever the name says: `face_batches =
      // torch.split(x, n)`, `x.chunk(k)`. A torch function other than
      // torch.utils.data's builds tensors, not a loader.
      if (b && b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value) &&
          kind_of(unparenthesize(b->value)) == Kind::Call) {
        TSNode func = unparenthesize(field(unparenthesize(b->value), "function"));
        std::string callee = qualify(func);
        if (starts_with(callee, "torch.") && !starts_with(callee, "torch.utils.data")) return false;
        if (kind_of(func) == Kind::Attribute &&
            one_of(text(field(func, "attribute")), std::array<std::string_view, 4>{"split", "chunk", "unbind",
                                                                                   "tensor_split"}))
          return false;
      }
      std::string leaf(last_component(name));
      for (auto& c : leaf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (ends_with(leaf, "loader") || leaf == "dl" || ends_with(leaf, "_dl") || ends_with(leaf, "dataset") ||
          ends_with(leaf, "batches"))
        return true;
      if (!b || (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) || b->element >= 0)
        return false;
      return data_loader_at(b->value, depth + 1);
    }
    default: return false;
  }
}

bool Model::runs_per_step(int function) const {
  if (function < 0) return false;
  const Function& f = functions_[function];
  if (f.hook && (f.hook->role == HookRole::TrainingStep || f.hook->role == HookRole::PerStep)) return true;
  for (const Call& c : calls_)
    if (c.function == function && c.loop < 0 && !is_null(stepped_optimizer(c))) return true;
  for (const Call* c : call_sites(f)) {
    int loop = innermost_loop(start_byte(c->node), c->function);
    if (loop >= 0 && is_step_loop(loop)) return true;
  }
  for (const HookSite& site : hook_sites(function)) {
    if (!site.call) continue;
    int loop = innermost_loop(start_byte(site.call->node), site.call->function);
    if (loop >= 0 && is_step_loop(loop)) return true;
  }
  if (!step_closures_) {
    step_closures_.emplace();
    for (const Call& c : calls_) {
      if (c.method != "step" || is_null(stepped_optimizer(c))) continue;
      int loop = innermost_loop(start_byte(c.node), c.function);
      if (loop < 0 || !is_step_loop(loop)) continue;
      TSNode closure = keyword_argument(c, "closure");
      if (is_null(closure)) closure = positional_argument(c, 0);
      if (kind_of(unparenthesize(closure)) != Kind::Identifier) continue;
      for (const Designated& g : designated_functions(closure, c.function)) step_closures_->push_back(g.function);
    }
  }
  return std::find(step_closures_->begin(), step_closures_->end(), function) != step_closures_->end();
}

std::vector<Model::Designated> Model::designated_functions(TSNode expr, int scope, int depth) const {
  std::vector<Designated> out;
  expr = unparenthesize(expr);
  if (is_null(expr) || depth > 3) return out;
  // The function of the file that `name`, read in `scope`, names: one
  // nested in the scope (or in a scope around it), else a module-level one.
  auto function_named = [&](std::string_view name, int in) -> int {
    for (int s = in; s >= 0; s = functions_[s].parent)
      for (size_t i = 0; i < functions_.size(); ++i)
        if (functions_[i].parent == s && functions_[i].name == name) return static_cast<int>(i);
    for (size_t i = 0; i < functions_.size(); ++i)
      if (functions_[i].parent < 0 && functions_[i].cls < 0 && functions_[i].name == name) return static_cast<int>(i);
    return -1;
  };
  auto add = [&](int g) { out.push_back({g, 0, {}}); };
  // The nested functions a maker returns.
  auto returned_by = [&](int maker) {
    for (TSNode r : returned_values(functions_[maker])) {
      r = unparenthesize(r);
      if (kind_of(r) != Kind::Identifier) continue;
      for (size_t i = 0; i < functions_.size(); ++i)
        if (functions_[i].parent == maker && functions_[i].name == text(r)) add(static_cast<int>(i));
    }
  };
  auto method_of_self = [&](TSNode attribute) -> int {
    if (text(unparenthesize(attribute_object(attribute))) != "self") return -1;
    const Function* method = find_method(class_of_function(scope), text(attribute_name(attribute)));
    return method ? static_cast<int>(method - functions_.data()) : -1;
  };
  switch (kind_of(expr)) {
    case Kind::Identifier: {
      std::string_view name = text(expr);
      const Binding* b = reaching(name, start_byte(expr), scope);
      if (!b) {  // a def
        if (int g = function_named(name, scope); g >= 0) add(g);
      } else if (b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value) &&
                 kind_of(unparenthesize(b->value)) == Kind::Call) {
        return designated_functions(b->value, b->function, depth + 1);  // `hook = make_hook(name)`
      } else if (b->kind == BindingKind::Parameter && b->function >= 0) {
        // A helper's parameter: what the file's calls of the helper pass.
        const Function& f = functions_[b->function];
        auto p = std::find(f.params.begin(), f.params.end(), name);
        if (p == f.params.end()) break;
        for (const Call* c : call_sites(f)) {
          TSNode arg = argument_for(*c, f, static_cast<size_t>(p - f.params.begin()), f.cls >= 0);
          for (Designated& d : designated_functions(arg, c->function, depth + 1))
            if (std::none_of(out.begin(), out.end(), [&](const Designated& x) { return x.function == d.function; }))
              out.push_back(std::move(d));
        }
      }
      break;
    }
    case Kind::Attribute:
      if (int g = method_of_self(expr); g >= 0) add(g);
      break;
    case Kind::Call: {
      TSNode func = unparenthesize(field(expr, "function"));
      if (qualify(func) == "functools.partial") {
        // `partial(hook, name)`, `partial(hook, store=feats)`: what it binds
        // comes before the arguments of a call of the partial.
        Call partial{};
        partial.args = field(expr, "arguments");
        size_t positional = 0;
        std::vector<std::string_view> keywords;
        uint32_t n = ts_node_named_child_count(partial.args);
        for (uint32_t i = 0; i < n; ++i) {
          TSNode arg = ts_node_named_child(partial.args, i);
          if (kind_of(arg) == Kind::KeywordArgument) keywords.push_back(text(field(arg, "name")));
          else if (kind_of(arg) == Kind::ListSplat || kind_of(arg) == Kind::DictionarySplat) return {};  // not followed
          else if (kind_of(arg) != Kind::Comment) ++positional;
        }
        if (positional == 0) return out;
        out = designated_functions(positional_argument(partial, 0), scope, depth + 1);
        for (Designated& d : out) {
          d.bound += positional - 1;
          d.keywords.insert(d.keywords.end(), keywords.begin(), keywords.end());
        }
        return out;
      }
      int maker = kind_of(func) == Kind::Identifier  ? function_named(text(func), scope)
                  : kind_of(func) == Kind::Attribute ? method_of_self(func)
                                                     : -1;
      if (maker >= 0) returned_by(maker);
      break;
    }
    default: break;
  }
  return out;
}

void Model::module_calls(TSNode expr, int function, int depth, std::vector<const Call*>& out) const {
  expr = unparenthesize(expr);
  // A submodule: `model.layer4`, `model.blocks[3]`.
  while (kind_of(expr) == Kind::Attribute || kind_of(expr) == Kind::Subscript)
    expr = unparenthesize(kind_of(expr) == Kind::Attribute ? attribute_object(expr) : field(expr, "value"));
  if (kind_of(expr) != Kind::Identifier || depth > 3) return;
  std::string_view name = text(expr);
  if (name == "self") return;  // the instance's calls are its users'
  const Binding* b = reaching(name, start_byte(expr), function);
  if (b && b->kind == BindingKind::ForTarget) {
    // `for name, m in model.named_modules()`: a submodule of `model`.
    TSNode it = unparenthesize(field(b->statement, "right"));
    if (kind_of(it) != Kind::Call) return;
    TSNode func = unparenthesize(field(it, "function"));
    static constexpr std::array<std::string_view, 4> kSubmodules = {"modules", "named_modules", "children",
                                                                    "named_children"};
    if (kind_of(func) == Kind::Attribute &&
        std::find(kSubmodules.begin(), kSubmodules.end(), text(attribute_name(func))) != kSubmodules.end())
      module_calls(attribute_object(func), b->function, depth + 1, out);
    return;
  }
  if (b && b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value) &&
      (kind_of(unparenthesize(b->value)) == Kind::Attribute || kind_of(unparenthesize(b->value)) == Kind::Subscript)) {
    module_calls(b->value, b->function, depth + 1, out);  // `layer = model.layer4`
    return;
  }
  if (b && b->kind == BindingKind::Parameter && function >= 0) {
    // Its calls here, and those of what the function's callers in the file pass.
    const Function& f = functions_[function];
    auto p = std::find(f.params.begin(), f.params.end(), name);
    if (p == f.params.end()) return;
    for (const Call* c : call_sites(f)) {
      TSNode arg = argument_for(*c, f, static_cast<size_t>(p - f.params.begin()), f.cls >= 0);
      if (!is_null(arg)) module_calls(arg, c->function, depth + 1, out);
    }
  }
  if (b && b->function != function) function = b->function;  // a module-level model
  for (int i : calls_named(name)) {
    const Call& c = calls_[static_cast<size_t>(i)];
    if (c.method.empty() && kind_of(unparenthesize(c.func)) == Kind::Identifier && text(unparenthesize(c.func)) == name &&
        (c.function == function || (function < 0 && reaching(name, start_byte(c.node), c.function) == b)))
      out.push_back(&c);
  }
}

const std::vector<Model::HookSite>& Model::hook_sites(int function) const {
  static const std::vector<HookSite> kNone;
  if (!hook_sites_) {
    // Built once, whole: a question asked while building (through a call's
    // value) finds no hooks rather than a part of them.
    if (hook_sites_building_) return kNone;
    hook_sites_building_ = true;
    std::vector<std::vector<HookSite>> built(functions_.size());
    for (const Call& r : calls_) {
      if (r.method.empty() || !library().may_register_hook(r.method)) continue;
      const CallModel* model = call_model(r);
      // A receiver of unknown class: nn.Module's method of that name.
      if ((!model || !model->hook) && class_of(r.receiver).empty()) model = library().method("torch.nn.Module", r.method);
      if (!model || !model->hook) continue;
      std::vector<Designated> hooks = designated_functions(operand(r, *model->hook), r.function);
      if (hooks.empty()) continue;
      std::vector<const Call*> calls;
      module_calls(r.receiver, r.function, 0, calls);
      std::vector<const Call*> sites;
      for (const Call* c : calls)
        if (hook_registered_at(r, *c)) sites.push_back(c);
      if (calls.empty()) sites.push_back(nullptr);  // registered on a module whose calls are not known
      for (const Designated& h : hooks)
        for (const Call* site : sites) {
          auto& list = built[static_cast<size_t>(h.function)];
          if (std::none_of(list.begin(), list.end(), [&](const HookSite& x) { return x.call == site; }))
            list.push_back({site, model->hook_runs, h.bound, h.keywords});
        }
    }
    hook_sites_ = std::move(built);
    hook_sites_building_ = false;
  }
  if (function < 0 || static_cast<size_t>(function) >= hook_sites_->size()) return kNone;
  return (*hook_sites_)[static_cast<size_t>(function)];
}

bool Model::hook_registered_at(const Call& r, const Call& site) const {
  // Where the registration's handle is held: the name it is bound to
  // (`h = m.register_forward_hook(...)`, `handles = [m.register...(...) for
  // ...]`), or the list it is appended to, in the registering function from
  // the registration on, and in each caller that binds what it returns from
  // that call on.
  struct Holder {
    int function;
    uint32_t from;
    std::string_view handle;
  };
  std::vector<Holder> holders;
  TSNode n = r.node;
  for (TSNode p = ts_node_parent(n); !is_null(p); p = ts_node_parent(n)) {
    Kind k = kind_of(p);
    if (k != Kind::ListComprehension && k != Kind::GeneratorExpression && k != Kind::List && k != Kind::Tuple &&
        k != Kind::ParenthesizedExpression && k != Kind::ExpressionList)
      break;
    n = p;
  }
  TSNode parent = ts_node_parent(n);
  auto bound_name = [&](TSNode value) -> std::string_view {
    TSNode assignment = ts_node_parent(value);
    if (kind_of(assignment) != Kind::Assignment || !ts_node_eq(field(assignment, "right"), value)) return {};
    TSNode left = unparenthesize(field(assignment, "left"));
    return kind_of(left) == Kind::Identifier || kind_of(left) == Kind::Attribute ? text(left) : std::string_view{};
  };
  uint32_t at = start_byte(r.node);
  if (std::string_view name = bound_name(n); !name.empty()) {
    holders.push_back({r.function, at, name});
  } else if (kind_of(parent) == Kind::ArgumentList && kind_of(ts_node_parent(parent)) == Kind::Call) {
    TSNode func = unparenthesize(field(ts_node_parent(parent), "function"));
    if (kind_of(func) == Kind::Attribute && (text(attribute_name(func)) == "append" || text(attribute_name(func)) == "extend"))
      holders.push_back({r.function, at, text(unparenthesize(attribute_object(func)))});
  } else if (kind_of(parent) == Kind::ReturnStatement && r.function >= 0) {
    for (const Call* c : call_sites(functions_[r.function]))
      if (std::string_view name = bound_name(c->node); !name.empty())
        holders.push_back({c->function, start_byte(c->node), name});
  }
  // A loop around both the call and `from` comes back to the call.
  auto shared_loop = [&](uint32_t a, uint32_t b, int function) {
    for (int l = innermost_loop(a, function); l >= 0; l = loops_[l].parent)
      if (loop_contains(l, b)) return true;
    return false;
  };
  uint32_t call = start_byte(site.node);
  if (site.function == r.function && call < at && !shared_loop(call, at, r.function)) return false;
  for (const Holder& h : holders) {
    // The first removal of the handle after `from`.
    uint32_t removed = UINT32_MAX;
    for (const Call& c : calls_) {
      if (c.function != h.function || c.method != "remove" || start_byte(c.node) <= h.from ||
          start_byte(c.node) >= removed || ts_node_named_child_count(c.args) != 0)
        continue;
      TSNode receiver = unparenthesize(c.receiver);
      bool handle = text(receiver) == h.handle;
      if (!handle && kind_of(receiver) == Kind::Identifier) {
        // `for h in handles: h.remove()`, `[h.remove() for h in handles]`.
        const Binding* b = reaching(text(receiver), start_byte(receiver), c.function);
        handle = b && b->kind == BindingKind::ForTarget && text(unparenthesize(field(b->statement, "right"))) == h.handle;
      }
      if (handle) removed = start_byte(c.node);
    }
    if (site.function == h.function && call < h.from && !shared_loop(call, h.from, h.function)) return false;
    if (removed == UINT32_MAX) continue;
    if (site.function == h.function) {
      if (call > removed) return false;
    } else if (h.function == r.function && site.function >= 0) {
      // Removed before the registering function returns: the call runs the
      // hook only from a function it calls in between.
      bool between = false;
      for (const Call* c : call_sites(functions_[site.function]))
        between |= c->function == h.function && start_byte(c->node) > h.from && start_byte(c->node) < removed;
      if (!between) return false;
    }
  }
  return true;
}

namespace {
// `False` or `None`: a switch left off.
bool off_literal(TSNode v) {
  Kind k = kind_of(unparenthesize(v));
  return k == Kind::False || k == Kind::None;
}
}  // namespace

bool Model::parameter_switched_off(int function, TSNode flag) const {
  // A parameter of `function` defaulting to False or None that no call
  // passes, or passes only another such parameter of its own (a block
  // handing its switch on to its attention layer).
  if (function < 0 || kind_of(flag) != Kind::Identifier) return false;
  const Function& f = functions_[function];
  std::string_view name = text(flag);
  std::string key = std::to_string(function) + ":" + std::string(name);
  if (auto known = switches_.find(key); known != switches_.end()) return known->second;
  // A switch handed round in a cycle is turned on only by what comes into
  // the cycle: asked again while deciding, it is taken as off. An answer
  // "off" given under that assumption is kept only once the first question
  // is decided off; "on" holds whatever the assumption.
  if (std::find(switches_asked_.begin(), switches_asked_.end(), key) != switches_asked_.end()) return true;
  switches_asked_.push_back(key);
  auto passes_off = [&](TSNode arg, int in) {
    arg = unparenthesize(arg);
    return off_literal(arg) || (kind_of(arg) == Kind::Identifier && parameter_switched_off(in, arg));
  };
  auto decide = [&]() {
    auto p = std::find(f.params.begin(), f.params.end(), name);
    if (p == f.params.end()) return false;
    const Binding* b = reaching(name, start_byte(flag), function);
    if (!b || b->kind != BindingKind::Parameter || is_null(b->value) || !off_literal(b->value)) return false;
    if (bindings_of(name, function).size() != 1) return false;  // reassigned in the body
    for (const Call* c : call_sites(f)) {
      TSNode arg = argument_for(*c, f, static_cast<size_t>(p - f.params.begin()), f.cls >= 0);
      if (!is_null(arg) && !passes_off(arg, c->function)) return false;
    }
    // A module's forward is called through the module: a keyword of that
    // name anywhere in the file may turn it on, and so may a call of an
    // instance of the class passing it by position (`block(x, True)`).
    for (const Call& c : calls_)
      if (TSNode arg = keyword_argument(c, name); !is_null(arg) && !passes_off(arg, c.function)) return false;
    if (f.cls >= 0 && f.name == "forward" && p != f.params.begin()) {
      auto position = static_cast<uint32_t>(p - f.params.begin() - 1);
      for (const Call& c : calls_) {
        TSNode arg = positional_argument(c, position);
        if (is_null(arg) || passes_off(arg, c.function)) continue;
        // An instance of the class, or a module of unknown class given
        // True there (`block(x, True)` over a ModuleList).
        Value v = value_at(c.func, nullptr, 0);
        if (v.cls == f.cls && v.home == nullptr) return false;
        if (v.cls < 0 && v.kind == ValueKind::Module && kind_of(unparenthesize(arg)) == Kind::True) return false;
      }
    }
    return true;
  };
  bool answer = decide();
  switches_asked_.pop_back();
  if (!answer || switches_asked_.empty()) switches_[key] = answer;
  return answer;
}

bool Model::switched_off(TSNode node, int function) const {
  if (function < 0) return false;
  const Function& f = functions_[function];
  // `self.attr`: every assignment of `<anything>.attr` in the file is a
  // literal False or None.
  auto attribute_off = [&](std::string_view attr) {
    bool assigned = false;
    for (const Binding& b : bindings_) {
      if (b.kind == BindingKind::Parameter || b.kind == BindingKind::Import) continue;
      std::string_view name = b.name;
      size_t dot = name.rfind('.');
      if (dot == std::string_view::npos || name.substr(dot + 1) != attr) continue;
      if (b.kind != BindingKind::Assign || b.element >= 0 || is_null(b.value) || !off_literal(b.value)) return false;
      assigned = true;
    }
    // `setattr(obj, "attr", ...)` or a keyword of that name can set it too.
    for (const Call& c : calls_)
      if (c.callee == "setattr" || !is_null(keyword_argument(c, attr))) return false;
    // So can an assignment to the attribute of an object no name stands for:
    // `net.blocks[-1].save_attn = True`, `get_layer().save_attn = True`.
    std::string_view src = source_.text();
    for (size_t at = src.find(attr); at != std::string_view::npos; at = src.find(attr, at + 1)) {
      TSNode id = ts_node_named_descendant_for_byte_range(root(), static_cast<uint32_t>(at),
                                                          static_cast<uint32_t>(at + attr.size()));
      TSNode attribute = ts_node_parent(id);
      if (kind_of(id) != Kind::Identifier || text(id) != attr || kind_of(attribute) != Kind::Attribute ||
          !ts_node_eq(attribute_name(attribute), id))
        continue;
      TSNode statement = ts_node_parent(attribute);
      while (kind_of(statement) == Kind::PatternList || kind_of(statement) == Kind::TuplePattern ||
             kind_of(statement) == Kind::ExpressionList || kind_of(statement) == Kind::Tuple)
        statement = ts_node_parent(statement);
      if (kind_of(statement) == Kind::AugmentedAssignment) return false;
      if (kind_of(statement) != Kind::Assignment) continue;
      TSNode right = field(statement, "right");
      if (is_null(right) || start_byte(attribute) >= start_byte(right)) continue;  // read, not written
      if (!off_literal(right)) return false;
    }
    return assigned;
  };
  // Each answer depends on the flag alone (an attribute's name, or a
  // parameter of `function`, bound once) and scans the file: every statement
  // under the same `if` asks again, so the answers are kept.
  auto off = [&](TSNode flag) {
    flag = unparenthesize(flag);
    bool attribute = kind_of(flag) == Kind::Attribute && text(unparenthesize(attribute_object(flag))) == "self";
    if (!attribute && kind_of(flag) != Kind::Identifier) return false;
    if (!attribute) return parameter_switched_off(function, flag);
    std::string key = "self." + std::string(text(attribute_name(flag)));
    if (auto known = switches_.find(key); known != switches_.end()) return known->second;
    bool answer = attribute_off(text(attribute_name(flag)));
    switches_.emplace(std::move(key), answer);
    return answer;
  };
  // The `if` statements of the function whose consequence holds the node
  // (the engine's table, in source order: no walk up the tree).
  uint32_t at = start_byte(node), body = start_byte(f.body);
  auto first = std::lower_bound(conditionals_.begin(), conditionals_.end(), body,
                                [](const Conditional& c, uint32_t b) { return c.start < b; });
  for (auto it = first; it != conditionals_.end() && it->start <= at; ++it) {
    if (at < it->consequence_start || at >= it->consequence_end || end_byte(node) > it->consequence_end) continue;
    // `if flag:` or `if flag and other:`.
    std::vector<TSNode> tests{unparenthesize(it->condition)};
    while (!tests.empty()) {
      TSNode t = tests.back();
      tests.pop_back();
      if (kind_of(t) == Kind::BooleanOperator && text(field(t, "operator")) == "and") {
        tests.push_back(unparenthesize(field(t, "left")));
        tests.push_back(unparenthesize(field(t, "right")));
      } else if (off(t)) {
        return true;
      }
    }
  }
  return false;
}

std::string Model::name_in_caller(std::string_view name, int function, int at) const {
  std::string_view root = name.substr(0, name.find('.'));
  std::string_view rest = name.substr(root.size());
  if (root == "self" || function < 0) return {};
  for (int scope = function; scope >= 0; scope = functions_[scope].parent) {
    const Function& f = functions_[scope];
    auto p = std::find(f.params.begin(), f.params.end(), root);
    bool bound = p != f.params.end();
    for (const Binding* b : bindings_of(root, scope))
      if (b->kind == BindingKind::Global) return std::string(name);  // `global x` / `nonlocal x`
      else bound = true;
    if (!bound) continue;
    if (scope == function) return {};  // the hook's own: fresh on each call
    if (scope == at) return std::string(name);
    if (p == f.params.end()) return {};  // a closure's own state: not followed
    // A parameter of an enclosing function: what `at` passes when it calls it.
    for (const Call* c : call_sites(f)) {
      if (c->function != at) continue;
      TSNode arg = unparenthesize(argument_for(*c, f, static_cast<size_t>(p - f.params.begin()), f.cls >= 0));
      if (kind_of(arg) == Kind::Identifier) return std::string(text(arg)) + std::string(rest);
    }
    return {};
  }
  // Module-level, unless `at` has a name of its own that hides it.
  if (at >= 0)
    for (const Binding* b : bindings_of(root, at))
      if (b->kind != BindingKind::Global) return {};
  return std::string(name);
}

bool Model::is_step_loop(int loop) const {
  if (loop < 0) return false;
  if (step_loops_.empty()) step_loops_.assign(loops_.size(), -1);
  signed char& known = step_loops_[static_cast<size_t>(loop)];
  if (known < 0) known = step_loop_uncached(loop) ? 1 : 0;
  return known != 0;
}

bool Model::step_loop_uncached(int loop) const {
  const Loop& l = loops_[loop];
  // The calls in the loop's node.
  std::span<const Call> calls = calls_in(start_byte(l.node), end_byte(l.node));
  auto in_loop = [&](auto&& visit) { return std::any_of(calls.begin(), calls.end(), visit); };
  // Loops are in source order: the ones nested in `loop` follow it.
  for (size_t i = static_cast<size_t>(loop); i < loops_.size(); ++i) {
    const Loop& inner = loops_[i];
    if (start_byte(inner.node) >= end_byte(l.node)) break;
    if (inner.function != l.function) continue;
    if (static_cast<int>(i) != loop && !loop_contains(loop, start_byte(inner.node))) continue;
    if (inner.kind == LoopKind::For && is_data_loader(field(inner.node, "right"))) return true;
    if (inner.kind != LoopKind::Comprehension) continue;
    uint32_t n = ts_node_named_child_count(inner.node);
    for (uint32_t j = 0; j < n; ++j) {
      TSNode clause = ts_node_named_child(inner.node, j);
      if (kind_of(clause) == Kind::ForInClause && is_data_loader(field(clause, "right"))) return true;
    }
  }
  // A batch fetched from a loader on each iteration: `batch = next(it)` with
  // `it = iter(loader)` (iteration-based training, `for _ in range(steps)`).
  if (in_loop([&](const Call& c) {
        return c.callee == "next" && c.method.empty() && c.function == l.function &&
               loop_contains(loop, start_byte(c.node)) && is_data_loader(positional_argument(c, 0));
      }))
    return true;
  // An optimizer built in the loop's iteration and stepped by a loop nested
  // in it is a fresh optimization per iteration (one per timestep, image or
  // item): the nested loop is the one that steps.
  auto fresh_per_iteration = [&](const Call& c, TSNode optimizer) {
    optimizer = unparenthesize(optimizer);
    if (kind_of(optimizer) != Kind::Identifier || innermost_loop(start_byte(c.node), c.function) == loop) return false;
    const Binding* b = reaching(text(optimizer), start_byte(c.node), c.function);
    return b && loop_contains(loop, b->start);
  };
  return in_loop([&](const Call& c) {
    if (c.method != "step" || c.function != l.function || !loop_contains(loop, start_byte(c.node))) return false;
    if (is_optimizer(c.receiver)) return !fresh_per_iteration(c, c.receiver);
    TSNode optimizer = positional_argument(c, 0);  // scaler.step(optimizer)
    return !is_null(optimizer) && is_optimizer(optimizer) && !fresh_per_iteration(c, optimizer);
  });
}

// ---------------------------------------------------------------------------
// Provenance.

Provenance Model::provenance(TSNode expr) const { return provenance_at(expr, 0); }

Provenance Model::provenance_at(TSNode expr, int depth) const {
  if (is_null(expr) || depth > kMaxDepth) return Provenance::Unknown;
  uint64_t key = node_key(expr);
  if (auto it = provenance_cache_.find(key); it != provenance_cache_.end()) return it->second;
  if (!in_progress_.insert(key).second) return Provenance::Unknown;  // a cycle
  // Under a grad-disabled region nothing computed records history; reading a
  // name, an attribute or building a tuple computes nothing: `history.append(
  // loss)` under no_grad still keeps the graph of a `loss` computed outside.
  Kind k = kind_of(expr);
  bool reads = k == Kind::Identifier || k == Kind::Attribute || k == Kind::ParenthesizedExpression ||
               k == Kind::Tuple || k == Kind::List || k == Kind::Set || k == Kind::Dictionary ||
               k == Kind::ExpressionList || k == Kind::ConditionalExpression;
  Provenance p = reads || grad_state(start_byte(expr)) == GradState::Enabled ? provenance_uncached(expr, depth)
                                                                             : Provenance::Detached;
  in_progress_.erase(key);
  provenance_cache_[key] = p;
  return p;
}

Provenance Model::binding_provenance(const Binding& b, int depth) const {
  // An assignment's value answers for itself (provenance_at): `kept = out`
  // under no_grad is as attached as `out`.
  if (b.kind != BindingKind::Assign && b.kind != BindingKind::NamedExpr && grad_state(b.start) != GradState::Enabled)
    return Provenance::Detached;
  switch (b.kind) {
    case BindingKind::Assign:
    case BindingKind::NamedExpr: {
      TSNode v = element_value(b);
      // `loss, n = step(...)`, `a, b = result`: the value engine's answer for
      // the position when it knows the positions; the whole value's history
      // is the other positions' (a batch size returned beside the loss).
      if (b.element >= 0 && b.inner < 0 && !is_null(b.value) && start_byte(v) == start_byte(unparenthesize(b.value))) {
        Value whole = value(b.value);
        if (whole.parts && static_cast<size_t>(b.element) < whole.parts->items.size())
          return whole.parts->items[static_cast<size_t>(b.element)].grad;
      }
      // `_, predicted = out.max(1)`: the indices carry no history.
      if (b.element == 1 && kind_of(v) == Kind::Call && start_byte(v) == start_byte(unparenthesize(b.value))) {
        TSNode func = unparenthesize(field(v, "function"));  // out.max(1) or torch.max(out, 1)
        if (kind_of(func) == Kind::Attribute && returns_values_and_indices(text(field(func, "attribute"))))
          return Provenance::Detached;
      }
      return provenance_at(v, depth + 1);
    }
    case BindingKind::AugAssign: {
      const Binding* prev = reaching(b.name, b.start, b.function);
      Provenance before = prev ? binding_provenance(*prev, depth + 1) : Provenance::Unknown;
      return join(before, provenance_at(b.value, depth + 1));
    }
    case BindingKind::Parameter:
      return is_null(b.value) ? Provenance::Unknown : provenance_at(b.value, depth + 1);
    case BindingKind::Import: return Provenance::Detached;
    default: return Provenance::Unknown;
  }
}

Provenance Model::provenance_uncached(TSNode expr, int depth) const {
  switch (kind_of(expr)) {
    case Kind::Integer:
    case Kind::Float:
    case Kind::String:
    case Kind::True:
    case Kind::False:
    case Kind::None:
    case Kind::ComparisonOperator:
    case Kind::NotOperator: return Provenance::Detached;
    case Kind::ParenthesizedExpression:
    case Kind::UnaryOperator:
    case Kind::Await: {
      uint32_t n = ts_node_named_child_count(expr);
      return n ? provenance_at(ts_node_named_child(expr, n - 1), depth + 1) : Provenance::Unknown;
    }
    case Kind::BinaryOperator:
    case Kind::BooleanOperator:
      return join(provenance_at(field(expr, "left"), depth + 1), provenance_at(field(expr, "right"), depth + 1));
    case Kind::ConditionalExpression: {
      uint32_t n = ts_node_named_child_count(expr);
      if (n < 3) return Provenance::Unknown;
      return join(provenance_at(ts_node_named_child(expr, 0), depth + 1),
                  provenance_at(ts_node_named_child(expr, 2), depth + 1));
    }
    case Kind::Tuple:
    case Kind::List:
    case Kind::Set:
    case Kind::ExpressionList: {
      uint32_t n = ts_node_named_child_count(expr);
      Provenance p = Provenance::Detached;
      for (uint32_t i = 0; i < n; ++i) p = join(p, provenance_at(ts_node_named_child(expr, i), depth + 1));
      return p;
    }
    case Kind::Dictionary: {  // the values; `**other` counts as a value
      uint32_t n = ts_node_named_child_count(expr);
      Provenance p = Provenance::Detached;
      for (uint32_t i = 0; i < n; ++i) {
        TSNode item = ts_node_named_child(expr, i);
        if (kind_of(item) == Kind::Comment) continue;
        TSNode value = field(item, "value");
        if (is_null(value) && ts_node_named_child_count(item)) value = ts_node_named_child(item, 0);
        p = join(p, provenance_at(value, depth + 1));
      }
      return p;
    }
    // A comprehension holds what its element expression computes.
    case Kind::ListComprehension:
    case Kind::SetComprehension:
    case Kind::GeneratorExpression: return provenance_at(field(expr, "body"), depth + 1);
    case Kind::DictionaryComprehension: {
      TSNode body = field(expr, "body");
      TSNode value = field(body, "value");
      return provenance_at(is_null(value) ? body : value, depth + 1);
    }
    case Kind::Subscript: return provenance_at(field(expr, "value"), depth + 1);
    case Kind::Call: return call_provenance(expr, depth);
    case Kind::Attribute: {
      std::string_view attr = text(field(expr, "attribute"));
      if (one_of(attr, kNonTensorAttributes)) return Provenance::Detached;
      std::string q = qualify(expr);
      if (starts_with(q, "self.")) {
        const Binding* b = attribute_binding(q, function_at(start_byte(expr)));
        return b ? binding_provenance(*b, depth + 1) : Provenance::Unknown;
      }
      return provenance_at(field(expr, "object"), depth + 1);
    }
    case Kind::Identifier: {
      std::string_view name = text(expr);
      int fn = function_at(start_byte(expr));
      const Binding* b = reaching(name, start_byte(expr), fn);
      Provenance p = b ? binding_provenance(*b, depth + 1) : Provenance::Unknown;
      if (p == Provenance::Unknown && is_backward_subject(name, fn)) p = Provenance::Attached;
      // A list that attached values were appended to holds their graphs.
      if (p != Provenance::Attached && stores_attached(name, start_byte(expr), fn, depth)) p = Provenance::Attached;
      return p;
    }
    default: return Provenance::Unknown;
  }
}

Provenance Model::call_provenance(TSNode call, int depth) const {
  TSNode func = unparenthesize(field(call, "function"));
  TSNode args = field(call, "arguments");
  auto args_provenance = [&]() {
    Provenance p = Provenance::Detached;
    uint32_t n = is_null(args) ? 0 : ts_node_named_child_count(args);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = ts_node_named_child(args, i);
      if (kind_of(a) == Kind::KeywordArgument) a = field(a, "value");
      p = join(p, provenance_at(a, depth + 1));
    }
    return p;
  };
  std::string callee = qualify(func);
  std::string_view last = last_component(callee);
  if (kind_of(func) == Kind::Attribute) {
    std::string_view method = text(field(func, "attribute"));
    if (one_of(method, kDetachingMethods) || one_of(method, kNoGradMethods)) return Provenance::Detached;
  }
  if (!callee.empty()) {
    if (callee.find('.') == std::string::npos && one_of(std::string_view(callee), kDetachingBuiltins))
      return Provenance::Detached;
    if (starts_with(callee, "numpy.") || starts_with(callee, "math.") || starts_with(callee, "random."))
      return Provenance::Detached;
    if (callee.find('.') == std::string::npos && one_of(std::string_view(callee), kPropagatingBuiltins) &&
        !find_function(callee))
      return args_provenance();
    if (starts_with(callee, "torch.")) {
      if (callee.rfind('.') == 5 && one_of(last, kTorchFactories)) return Provenance::Detached;
      if (callee.rfind('.') == 5 && one_of(last, kNoGradMethods)) return Provenance::Detached;  // torch.argmax
      if (starts_with(callee, "torch.nn.functional.") || callee.rfind('.') == 5) return args_provenance();
    }
  }
  // `dice_loss(pred, mask)`, `self.compute_loss(out, y)` from elsewhere: a
  // function named for a loss, given values with history, returns one.
  auto loss_of_attached = [&]() {
    std::string_view name = kind_of(func) == Kind::Attribute ? text(field(func, "attribute")) : text(func);
    return ends_with(name, "_loss") && args_provenance() == Provenance::Attached;
  };
  // A module's output carries history; a frozen module's only what its inputs carry.
  auto module_output = [&](TSNode module) {
    return frozen_modules_.count(qualify(module)) ? args_provenance() : Provenance::Attached;
  };
  if (kind_of(func) == Kind::Attribute) {
    std::string_view method = text(field(func, "attribute"));
    TSNode receiver = field(func, "object");
    if (module_instance_at(receiver, depth + 1)) {
      if (one_of(method, kModuleNonTensorMethods)) return Provenance::Unknown;
      return module_output(receiver);
    }
    // self.helper(...) defined in this class: its summary.
    if (kind_of(receiver) == Kind::Identifier && text(receiver) == "self") {
      int cls = class_of_function(function_at(start_byte(call)));
      if (const Function* f = find_method(cls, method)) {
        if (method == "forward" && class_is_module(cls)) return Provenance::Attached;
        return function_returns(*f, depth + 1);
      }
    }
    if (module_instance_at(func, depth + 1)) return module_output(func);
    if (is_loss_function(func) || loss_of_attached()) return Provenance::Attached;
    // A method of an object that is no tensor (an Accelerator, an optimizer,
    // a loader, a generator) given values without history: the object has no
    // graph of its own to add (`accelerator.gather(logits)` of logits
    // computed under no_grad).
    ValueKind object = value(receiver).kind;
    if (object == ValueKind::Other || object == ValueKind::Optimizer || object == ValueKind::Loader ||
        object == ValueKind::Generator) {
      bool none_attached = true, any = false;
      for_each_named_child(field(call, "arguments"), [&](TSNode a) {
        if (kind_of(a) == Kind::Comment) return;
        any = true;
        if (value(kind_of(a) == Kind::KeywordArgument ? field(a, "value") : a).grad != Provenance::Detached)
          none_attached = false;
      });
      if (any && none_attached) return Provenance::Detached;
    }
    Provenance recv = provenance_at(receiver, depth + 1);
    if (recv == Provenance::Unknown) return Provenance::Unknown;
    return join(recv, args_provenance());
  }
  // A function defined in this file answers with its returns, whatever its
  // name: `def loss_fn(...): return ....item()` returns a number.
  if (kind_of(func) == Kind::Identifier) {
    if (const Function* f = find_function(text(func))) return function_returns(*f, depth + 1);
  }
  if (module_instance_at(func, depth + 1)) return module_output(func);
  if (is_loss_function(func) || loss_of_attached()) return Provenance::Attached;
  return Provenance::Unknown;
}

Provenance Model::function_returns(const Function& f, int depth) const {
  // The join of every `return <expr>` directly in f (not in nested functions).
  std::vector<TSNode> values = returned_values(f);
  if (values.empty()) return Provenance::Detached;
  Provenance p = provenance_at(values.front(), depth + 1);
  for (size_t i = 1; i < values.size(); ++i) p = join(p, provenance_at(values[i], depth + 1));
  return p;
}

bool Model::named_like(std::string_view name, std::initializer_list<std::string_view> exact,
                       std::initializer_list<std::string_view> suffixes) const {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto e : exact)
    if (lower == e) return true;
  for (auto s : suffixes)
    if (ends_with(lower, s)) return true;
  return false;
}

bool Model::is_module_instance(TSNode expr) const {
  if (module_instance_at(expr, 0)) return true;
  // An instance of a module class of another file (`dec = Decoder(...)`, imported).
  Kind k = kind_of(unparenthesize(expr));
  if (k != Kind::Identifier && k != Kind::Attribute) return false;
  Value v = value(expr);
  return v.kind == ValueKind::Module && v.home != nullptr && v.cls >= 0;
}

bool Model::module_instance_at(TSNode expr, int depth) const {
  expr = unparenthesize(expr);
  if (is_null(expr) || depth > kMaxDepth) return false;
  Kind k = kind_of(expr);
  if (k == Kind::Call) {
    TSNode func = unparenthesize(field(expr, "function"));
    std::string callee = qualify(func);
    if (!callee.empty()) {
      auto& extra = config_.extra_models;
      if (std::find(extra.begin(), extra.end(), callee) != extra.end() ||
          std::find(extra.begin(), extra.end(), std::string(last_component(callee))) != extra.end())
        return true;
      if (starts_with(callee, "torch.nn.") && !starts_with(callee, "torch.nn.functional.") &&
          is_capitalized(callee) && !ends_with(callee, "Loss") && !starts_with(callee, "torch.nn.utils."))
        return true;
      if (starts_with(callee, "torchvision.models.")) return true;
      if (const Class* c = find_class(callee)) return class_is_module(static_cast<int>(c - classes_.data()));
      if (is_capitalized(callee) && module_evidence_.count(callee)) return true;
    }
    if (kind_of(func) == Kind::Attribute) {
      std::string_view method = text(field(func, "attribute"));
      if (one_of(method, kModuleNonTensorMethods)) return module_instance_at(field(func, "object"), depth + 1);
    }
    return false;
  }
  if (k != Kind::Identifier && k != Kind::Attribute) return false;
  std::string name = qualify(expr);
  if (name.empty()) return false;
  // A function of the file (`def step_model(...)`) is not a module, whatever its name.
  if (k == Kind::Identifier && find_function(name) && !reaching(name, start_byte(expr), function_at(start_byte(expr))))
    return false;
  if (module_evidence_.count(name)) return true;
  std::string_view leaf = last_component(name);
  if (named_like(leaf, {"model", "net", "network", "encoder", "decoder", "generator", "discriminator",
                        "backbone", "classifier", "rnn", "lstm", "gru", "transformer", "critic", "actor"},
                 {"_model", "_net", "_encoder", "_decoder"}) ||
      (leaf.size() > 5 && starts_with(leaf, "model")))
    return true;
  int fn = function_at(start_byte(expr));
  const Binding* b = k == Kind::Attribute ? attribute_binding(name, fn) : reaching(name, start_byte(expr), fn);
  if (!b || (b->kind != BindingKind::Assign && b->kind != BindingKind::Parameter) || is_null(b->value) ||
      b->element >= 0)
    return false;
  TSNode v = unparenthesize(b->value);
  if (kind_of(v) == Kind::Call) {
    std::string callee = qualify(field(v, "function"));
    auto& extra = config_.extra_data_parallel;
    bool wrapper = callee == "torch.nn.DataParallel" || callee == "torch.nn.parallel.DistributedDataParallel" ||
                   callee == "torch.nn.parallel.DataParallel" ||
                   std::find(extra.begin(), extra.end(), callee) != extra.end() ||
                   std::find(extra.begin(), extra.end(), std::string(last_component(callee))) != extra.end();
    if (wrapper) return true;
  }
  return module_instance_at(v, depth + 1);
}

bool Model::is_loss_function(TSNode expr) const {
  expr = unparenthesize(expr);
  Kind k = kind_of(expr);
  if (k != Kind::Identifier && k != Kind::Attribute) return false;
  std::string name = qualify(expr);
  if (name.empty()) return false;
  auto& extra = config_.extra_losses;
  std::string_view leaf = last_component(name);
  if (std::find(extra.begin(), extra.end(), name) != extra.end() ||
      std::find(extra.begin(), extra.end(), std::string(leaf)) != extra.end())
    return true;
  if (named_like(leaf, {"criterion", "loss_fn", "loss_func", "loss_function", "lossfn", "loss_fct"},
                 {"_criterion", "_loss_fn", "_loss_func"}) ||
      starts_with(leaf, "criterion"))
    return true;
  int fn = function_at(start_byte(expr));
  const Binding* b = k == Kind::Attribute ? attribute_binding(name, fn) : reaching(name, start_byte(expr), fn);
  if (!b || b->kind != BindingKind::Assign || is_null(b->value)) return false;
  TSNode v = unparenthesize(b->value);
  if (kind_of(v) != Kind::Call) return false;
  // nn.CrossEntropyLoss(), and any class named for a loss: FocalLoss(), DiceLoss().
  std::string callee = qualify(field(v, "function"));
  return ends_with(last_component(callee), "Loss");
}

bool Model::trains() const {
  for (const Call& c : calls_) {
    if (is_torch_optimizer_class(c.callee) || is_backward_call(c)) return true;
  }
  return false;
}

bool Model::is_optimizer(TSNode expr) const {
  expr = unparenthesize(expr);
  Kind k = kind_of(expr);
  if (k != Kind::Identifier && k != Kind::Attribute) return false;
  std::string name = qualify(expr);
  if (name.empty()) return false;
  auto& extra = config_.extra_optimizers;
  if (std::find(extra.begin(), extra.end(), name) != extra.end() ||
      std::find(extra.begin(), extra.end(), std::string(last_component(name))) != extra.end())
    return true;
  int fn = function_at(start_byte(expr));
  const Binding* b = k == Kind::Attribute ? attribute_binding(name, fn) : reaching(name, start_byte(expr), fn);
  if (b && b->kind == BindingKind::Assign && !is_null(b->value) && kind_of(unparenthesize(b->value)) == Kind::Call) {
    std::string callee = qualify(field(unparenthesize(b->value), "function"));
    if (is_torch_optimizer_class(callee)) return true;
    if (std::find(extra.begin(), extra.end(), callee) != extra.end() ||
        std::find(extra.begin(), extra.end(), std::string(last_component(callee))) != extra.end())
      return true;
    return false;
  }
  std::string_view leaf = last_component(name);
  return named_like(leaf, {"optimizer", "optim", "opt"}, {"_optimizer", "_optim", "_opt"});
}

TSNode Model::keyword_argument(const Call& call, std::string_view name) const {
  uint32_t n = is_null(call.args) ? 0 : ts_node_named_child_count(call.args);
  for (uint32_t i = 0; i < n; ++i) {
    TSNode a = ts_node_named_child(call.args, i);
    if (kind_of(a) == Kind::KeywordArgument && text(field(a, "name")) == name) return field(a, "value");
  }
  return TSNode{};
}

TSNode Model::positional_argument(const Call& call, uint32_t index) const {
  uint32_t n = is_null(call.args) ? 0 : ts_node_named_child_count(call.args);
  uint32_t pos = 0;
  for (uint32_t i = 0; i < n; ++i) {
    TSNode a = ts_node_named_child(call.args, i);
    Kind k = kind_of(a);
    if (k == Kind::KeywordArgument || k == Kind::DictionarySplat || k == Kind::Comment) continue;
    if (k == Kind::ListSplat) return TSNode{};  // positions after *args are unknown
    if (pos++ == index) return a;
  }
  return TSNode{};
}

TSNode Model::argument_for(const Call& call, const Function& f, size_t index, bool method) const {
  if (index >= f.params.size() || (method && index == 0)) return {};
  TSNode arg = keyword_argument(call, f.params[index]);
  return is_null(arg) ? positional_argument(call, static_cast<uint32_t>(index - (method ? 1 : 0))) : arg;
}

uint32_t Model::positional_count(const Call& call) const {
  uint32_t n = is_null(call.args) ? 0 : ts_node_named_child_count(call.args);
  uint32_t pos = 0;
  for (uint32_t i = 0; i < n; ++i) {
    Kind k = kind_of(ts_node_named_child(call.args, i));
    if (k != Kind::KeywordArgument && k != Kind::DictionarySplat && k != Kind::Comment) ++pos;
  }
  return pos;
}

}  // namespace torchleak::python
