// TL004 missing-worker-init-fn: a DataLoader with worker processes and no
// `worker_init_fn`, whose dataset draws from a random generator object made
// before the workers start (`np.random.default_rng(0)` in `__init__`, a
// module-level `random.Random()`, a transform's `torch.Generator()`). Every
// worker receives a copy of the same generator and replays the same stream.
//
// Since PyTorch 1.9 each worker re-seeds `random`, `torch` and numpy's global
// RNG itself, so numpy's global RNG only counts when target-torch-version is
// older than 1.9.
//
// At each DataLoader that starts workers without a worker_init_fn, the
// dataset argument is followed to the classes it is built from, and from
// their `__getitem__` / `__iter__` through methods, base classes, helper
// functions and the transform objects they hold, to a generator that is
// drawn from but never re-created or re-seeded inside the worker. Classes,
// helpers and module-level names of other files are found through the
// imports of the file naming them (the engine's import resolution), so a
// class of the same name in an unrelated file never answers; what a file
// holds is read from its model, on demand, as typed references.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "checks/python/check.h"
#include "core/project_index.h"
#include "python/fold.h"

namespace torchleak::python {

namespace {

// ---------------------------------------------------------------------------
// Vocabulary.

// The kinds of generator objects.
constexpr std::string_view kNumpyGenerator = "numpy.random.Generator";
constexpr std::string_view kRandomState = "numpy.random.RandomState";
constexpr std::string_view kPyRandom = "random.Random";
constexpr std::string_view kTorchGenerator = "torch.Generator";

std::string_view generator_kind(std::string_view callee) {
  if (callee == "numpy.random.default_rng" || callee == "numpy.random.Generator") return kNumpyGenerator;
  if (callee == "numpy.random.RandomState" || callee == "numpy.random.mtrand.RandomState") return kRandomState;
  if (callee == "random.Random") return kPyRandom;  // random.SystemRandom reads the OS: no replay
  if (callee == "torch.Generator" || callee == "torch._C.Generator") return kTorchGenerator;
  return {};
}

// Functions of numpy's global RNG that draw numbers (np.random.seed does not).
constexpr std::array<std::string_view, 34> kNumpyGlobalDraws = {
    "rand", "randn", "randint", "random", "random_sample", "random_integers", "ranf", "sample",
    "choice", "shuffle", "permutation", "normal", "uniform", "binomial", "poisson", "beta",
    "gamma", "exponential", "standard_normal", "standard_exponential", "standard_gamma",
    "standard_cauchy", "standard_t", "multivariate_normal", "multinomial", "dirichlet",
    "lognormal", "laplace", "logistic", "geometric", "bytes", "triangular", "rayleigh", "vonmises"};

// Methods that give a generator a new state: calling one inside the worker
// means the stream no longer depends on the copy the worker received.
constexpr std::array<std::string_view, 5> kReseedMethods = {"seed", "manual_seed", "set_state", "setstate",
                                                            "__setstate__"};
// Methods that read a generator without drawing from it.
constexpr std::array<std::string_view, 4> kNonDrawMethods = {"get_state", "getstate", "initial_seed", "__getstate__"};

// Entry points a worker calls.
const std::vector<std::string> kDatasetEntries = {"__getitem__", "__getitems__", "__iter__", "__next__"};
const std::vector<std::string> kCallableEntries = {"__call__", "forward"};

template <size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

bool capitalized(std::string_view dotted) {
  std::string_view last = last_component(dotted);
  return !last.empty() && std::isupper(static_cast<unsigned char>(last[0]));
}

// One line of source, for messages: the text of `n` if it fits on a line.
std::string one_line(const Model& m, TSNode n) {
  std::string_view t = m.text(n);
  if (t.find('\n') != std::string_view::npos || t.size() > 100) return {};
  return std::string(t);
}

// ---------------------------------------------------------------------------
// Typed references: a class, a function or a module-level variable of some
// file of the project, each with the model of its file.

struct ClassRef {
  const Model* m = nullptr;
  int cls = -1;
  explicit operator bool() const { return m && cls >= 0; }
  auto operator<=>(const ClassRef&) const = default;
};

struct FunctionRef {
  const Model* m = nullptr;
  int function = -1;
  auto operator<=>(const FunctionRef&) const = default;
};

// What a module-level or imported name stands for: a function, or a
// variable (its last module-level binding).
struct Target {
  const Model* m = nullptr;
  int function = -1;
  const Binding* global = nullptr;
};

int index_of(const Model& m, const Function* f) { return f ? static_cast<int>(f - m.functions().data()) : -1; }

// The class an expression names in `m`: a module-level class of the file,
// or one that an import names in another file of the project.
ClassRef resolve_class(const Model& m, TSNode expr) {
  expr = unparenthesize(expr);
  if (auto def = m.imported_definition(expr); def && def->cls >= 0) return {def->model, def->cls};
  if (kind_of(expr) != Kind::Identifier) return {};
  std::string_view name = m.text(expr);
  int scope = m.function_at(start_byte(expr));
  if (const Binding* b = m.reaching(name, start_byte(expr), scope); b && b->kind == BindingKind::Import)
    return {};  // an import of something the project does not define
  // The class of that name defined in the innermost function around the
  // use (a dataset class defined in `main()`), else at module level.
  int best = -1, best_depth = -1;
  for (size_t i = 0; i < m.classes().size(); ++i) {
    const Class& c = m.classes()[i];
    if (c.name != name) continue;
    int depth = 0;
    bool encloses = c.function < 0;
    for (int f = scope; f >= 0 && !encloses; f = m.functions()[f].parent, ++depth) encloses = f == c.function;
    if (!encloses) continue;
    int rank = c.function < 0 ? 0 : 1000 - depth;
    if (rank > best_depth) {
      best = static_cast<int>(i);
      best_depth = rank;
    }
  }
  return best < 0 ? ClassRef{} : ClassRef{&m, best};
}

// What an imported name (or `module.NAME`) stands for in another file.
std::optional<Target> imported_target(const Model& m, TSNode expr) {
  auto def = m.imported_definition(expr);
  if (!def || !def->model) return std::nullopt;
  if (def->function) return Target{def->model, index_of(*def->model, def->function), nullptr};
  if (def->binding && def->binding->kind == BindingKind::Assign) return Target{def->model, -1, def->binding};
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// What the collectors ask about a file's names, answered from the model's
// bindings and calls; a function's reads are asked only of the files a
// dataset's code reaches.
class FileIndex {
 public:
  explicit FileIndex(const Model& m) : m_(m) {}

  // The last module-level binding of `name` outside class bodies (an
  // assignment, an import, ...), or null.
  const Binding* module_binding(std::string_view name) const {
    auto [it, fresh] = module_bindings_.try_emplace(std::string(name), nullptr);
    if (!fresh) return it->second;
    for (const Binding* b : m_.bindings_of(name, -1)) {
      if (b->kind == BindingKind::Global || b->kind == BindingKind::SubscriptStore) continue;
      if (class_body_of(b->start, -1) >= 0) continue;
      if (!it->second || b->start > it->second->start) it->second = b;
    }
    return it->second;
  }
  bool is_module_function(std::string_view name) const { return m_.find_function(name) != nullptr; }
  // Whether `function` itself binds `name` (a local, a parameter, an import),
  // other than through `global name`.
  bool binds(std::string_view name, int function) const {
    if (function < 0 || declares_global(function, name)) return false;
    for (const Binding* b : m_.bindings_of(name, function))
      if (b->kind != BindingKind::Global) return true;
    return false;
  }
  bool declares_global(int function, std::string_view name) const {
    if (function < 0) return false;
    for (const Binding* b : m_.bindings_of(name, function))
      if (b->kind == BindingKind::Global) return true;
    return false;
  }
  // Bindings and calls of a method or module-level function and the
  // functions nested in it (not the methods of a class nested in it).
  std::vector<const Binding*> bindings_of_root(int function) const {
    std::vector<const Binding*> out;
    const Function& f = m_.functions()[function];
    uint32_t start = start_byte(f.node), end = end_byte(f.node);
    for (const Binding& b : m_.bindings())
      if (b.function >= 0 && b.start >= start && b.start < end && root(b.function) == function) out.push_back(&b);
    return out;
  }
  std::vector<const Call*> calls_of_root(int function) const {
    std::vector<const Call*> out;
    const Function& f = m_.functions()[function];
    for (const Call& c : m_.calls_in(start_byte(f.node), end_byte(f.node)))
      if (c.function >= 0 && root(c.function) == function) out.push_back(&c);
    return out;
  }
  // Bindings directly in the body of class `cls` (class attributes).
  std::vector<const Binding*> class_body_bindings(int cls) const {
    std::vector<const Binding*> out;
    const Class& c = m_.classes()[cls];
    for (const Binding& b : m_.bindings())
      if (b.function == c.function && class_body_of(b.start, b.function) == cls) out.push_back(&b);
    return out;
  }
  // The innermost class whose body (not a method) directly holds `byte`.
  int class_body_of(uint32_t byte, int function) const {
    int best = -1;
    for (size_t i = 0; i < m_.classes().size(); ++i) {
      const Class& c = m_.classes()[i];
      if (c.function != function) continue;
      TSNode body = field(c.node, "body");
      if (start_byte(body) <= byte && byte < end_byte(body)) best = static_cast<int>(i);
    }
    return best;
  }

  std::string where_created(TSNode n) const {
    int fn = m_.function_at(start_byte(n));
    if (fn >= 0) return fmt::format("in `{}`", m_.functions()[fn].qualified_name);
    int cls = class_body_of(start_byte(n), -1);
    if (cls >= 0) return fmt::format("in the body of class `{}`", m_.classes()[cls].name);
    return "at module level";
  }

 private:
  // The method or module-level function holding `function`.
  int root(int function) const {
    const auto& fns = m_.functions();
    while (fns[function].cls < 0 && fns[function].parent >= 0) function = fns[function].parent;
    return function;
  }

  const Model& m_;
  mutable std::unordered_map<std::string, const Binding*> module_bindings_;
};

// Where a value comes from: a generator constructor, an object of some class,
// a module-level or imported name (a helper function, a variable), or a
// constructor parameter (resolved against the arguments at the DataLoader).
struct ValueRef {
  enum class Kind : uint8_t { Generator, Object, Name, Parameter };
  Kind kind = Kind::Generator;
  // Generator and Object: the path from the holder ("" the value itself,
  // "?" somewhere inside it, ".transforms[0]" a Compose's first transform).
  std::string path;
  // Generator: its kind, how it reads in a message, the constructor as
  // written, where it is created (the model, its line, the scope).
  std::string_view generator;
  std::string display, ctor, where;
  const Model* model = nullptr;
  uint32_t line = 0;
  // Object: its class (empty when not of the project), as called, and the
  // arguments given ("#0", "#1", keyword names; nullopt when a splat hides them).
  ClassRef cls;
  std::string qualified;
  std::optional<std::vector<std::string>> given;
  // Name.
  Target target;
  std::string name;
  // Parameter: its name, its position (without self), whether the value is the parameter itself.
  size_t index = 0;
  bool itself = false;
};

class ValueCollector {
 public:
  // `init` is the function whose parameters count as constructor parameters.
  // `owner` is the class whose attributes are being collected (-1 at a
  // DataLoader's site): a `self.x` read in its methods follows the class's
  // bindings of `self.x`, with its __init__'s parameters as constructor
  // parameters; elsewhere a parameter is followed to the calls of its
  // function in the file.
  ValueCollector(const Model& m, const FileIndex& file, const Function* init, int owner = -1)
      : m_(m), file_(file), init_(init), owner_(owner), active_(&own_active_), budget_(&own_budget_) {}

  // At a DataLoader's site whose worker count is parameter `workers` of
  // `function`: a call of that function that passes no workers (0) starts
  // none, and what it passes for the dataset does not count.
  void only_calls_with_workers(int function, std::string workers) {
    loader_function_ = function;
    workers_param_ = std::move(workers);
  }

  void collect(TSNode expr, std::string path, std::vector<ValueRef>& out, int depth = 0) const {
    expr = unparenthesize(expr);
    if (is_null(expr) || depth > 6) return;
    switch (kind_of(expr)) {
      case Kind::Call: return call(expr, std::move(path), out, depth);
      case Kind::Identifier: return identifier(expr, path, out, depth);
      case Kind::Attribute: {
        if (self_attribute(expr, path, out, depth)) return;
        // module.NAME, where `module` is an imported module.
        if (auto t = imported_target(m_, expr)) name(*t, m_.text(attribute_name(expr)), out);
        return;
      }
      case Kind::ConditionalExpression:
      case Kind::BooleanOperator:
        for_each_named_child(expr, [&](TSNode c) { collect(c, path, out, depth + 1); });
        return;
      case Kind::List:
      case Kind::Tuple:
      case Kind::Set:
      case Kind::Dictionary:
        for_each_named_child(expr, [&](TSNode c) { collect(c, "?", out, depth + 1); });
        return;
      default:
        if (kind_of(expr) == Kind::Other)  // a dictionary pair, a splat: look inside
          for_each_named_child(expr, [&](TSNode c) { collect(c, "?", out, depth + 1); });
        return;
    }
  }

 private:
  static void name(const Target& t, std::string_view name, std::vector<ValueRef>& out) {
    ValueRef r;
    r.kind = ValueRef::Kind::Name;
    r.target = t;
    r.name = std::string(name);
    out.push_back(std::move(r));
  }

  void call(TSNode expr, std::string path, std::vector<ValueRef>& out, int depth) const {
    TSNode func = unparenthesize(call_function(expr));
    // torch.Generator().manual_seed(0) returns the generator it seeds.
    if (kind_of(func) == Kind::Attribute && one_of(m_.text(field(func, "attribute")), kReseedMethods) &&
        kind_of(unparenthesize(field(func, "object"))) == Kind::Call) {
      TSNode inner = unparenthesize(field(func, "object"));
      if (!generator_kind(m_.qualify(field(inner, "function"))).empty())
        return call(inner, std::move(path), out, depth);
    }
    std::string callee = m_.qualify(func);
    if (std::string_view kind = generator_kind(callee); !kind.empty()) {
      // The assignment holding it reads best: `self.rng = np.random.default_rng(0)`.
      TSNode shown = expr;
      for (TSNode p = ts_node_parent(expr); !is_null(p); p = ts_node_parent(p)) {
        Kind k = kind_of(p);
        if (k == Kind::Assignment) {
          shown = p;
          break;
        }
        if (k == Kind::Block || k == Kind::Module || k == Kind::ArgumentList) break;
      }
      ValueRef g;
      g.kind = ValueRef::Kind::Generator;
      g.path = std::move(path);
      g.generator = kind;
      g.display = one_line(m_, shown);
      if (g.display.empty()) g.display = one_line(m_, expr);
      if (g.display.empty()) g.display = std::string(m_.text(func)) + "(...)";
      g.ctor = std::string(m_.text(func));
      g.where = file_.where_created(expr);
      g.model = &m_;
      g.line = m_.position(expr).line;
      out.push_back(std::move(g));
      return;
    }
    TSNode args = call_arguments(expr);
    if (!callee.empty() && capitalized(callee)) {
      // The object first, then what its arguments hold, in one pass over them.
      size_t object = out.size();
      ValueRef o;
      o.kind = ValueRef::Kind::Object;
      o.cls = resolve_class(m_, func);
      o.qualified = callee;
      o.path = path;
      out.push_back(std::move(o));
      std::vector<std::string> keys;
      uint32_t position = 0;
      bool splat = false;
      // Compose([A(), B()]) keeps its transforms in `.transforms`.
      bool compose = last_component(callee) == "Compose";
      uint32_t i = 0;
      for_each_named_child(args, [&](TSNode a) {
        bool first = i++ == 0;
        Kind k = kind_of(a);
        if (k == Kind::ListSplat || k == Kind::DictionarySplat) {
          splat = true;
        } else if (k != Kind::Comment && !splat) {
          keys.push_back(k == Kind::KeywordArgument ? std::string(m_.text(keyword_name(a)))
                                                    : "#" + std::to_string(position++));
        }
        if (k == Kind::KeywordArgument) a = keyword_value(a);
        a = unparenthesize(a);
        if (compose && first && path != "?" && (kind_of(a) == Kind::List || kind_of(a) == Kind::Tuple)) {
          uint32_t j = 0;
          for_each_named_child(
              a, [&](TSNode t) { collect(t, fmt::format("{}.transforms[{}]", path, j++), out, depth + 1); });
          return;
        }
        collect(a, "?", out, depth + 1);
      });
      if (!splat) out[object].given = std::move(keys);
      return;
    }
    // A factory function: what it builds is not known here, but objects made
    // in its arguments are held by whatever it returns; unless the library
    // models say it returns a tensor or a number (`torch.randint(...,
    // generator=g)` draws from g once and keeps nothing of it).
    if (!callee.empty()) {
      const CallModel* model = m_.library().call(callee);
      if (model && (model->kind == ValueKind::Tensor || model->kind == ValueKind::Number)) return;
    }
    for_each_named_child(args, [&](TSNode a) {
      if (kind_of(a) == Kind::KeywordArgument) a = keyword_value(a);
      collect(a, "?", out, depth + 1);
    });
  }

  void identifier(TSNode expr, const std::string& path, std::vector<ValueRef>& out, int depth) const {
    std::string_view text = m_.text(expr);
    if (init_) {
      const auto& params = init_->params;
      auto it = std::find(params.begin(), params.end(), text);
      if (it != params.end() && it != params.begin()) {
        ValueRef p;
        p.kind = ValueRef::Kind::Parameter;
        p.name = std::string(text);
        p.index = static_cast<size_t>(it - params.begin() - 1);
        p.itself = path.empty();
        out.push_back(std::move(p));
        return;
      }
    }
    // At module level reaching() can only give a module-level binding: the
    // lookup below answers that.
    if (int fn = m_.function_at(start_byte(expr)); fn >= 0) {
      const Binding* b = m_.reaching(text, start_byte(expr), fn);
      if (b && b->function >= 0) {
        if ((b->kind == BindingKind::Assign || b->kind == BindingKind::NamedExpr) && b->element < 0 &&
            !is_null(b->value))
          collect(b->value, path, out, depth + 1);
        else if (b->kind == BindingKind::Parameter)
          parameter(*b, path, out, depth);
        return;
      }
    }
    // Module level: an assignment, a function or an import.
    if (const Binding* g = file_.module_binding(text)) {
      if (g->kind == BindingKind::Import) {
        if (auto t = imported_target(m_, expr)) name(*t, text, out);
        return;
      }
      if (g->kind == BindingKind::Assign) name(Target{&m_, -1, g}, text, out);
      return;
    }
    if (const Function* f = m_.find_function(text)) name(Target{&m_, index_of(m_, f), nullptr}, text, out);
  }

  // A parameter of a function of the file (not a constructor parameter):
  // what the calls of the function in the file pass for it, or its default
  // where a call passes nothing. A call whose splat hides the arguments
  // tells nothing.
  void parameter(const Binding& b, const std::string& path, std::vector<ValueRef>& out, int depth) const {
    const Function& f = m_.functions()[b.function];
    auto it = std::find(f.params.begin(), f.params.end(), b.name);
    if (it == f.params.end()) return;
    size_t index = static_cast<size_t>(it - f.params.begin());
    bool method = f.cls >= 0 && !m_.function_has_decorator(b.function, "staticmethod");
    if (method && index == 0) return;  // self, cls
    Following guard(*active_, fmt::format("P{}.{}", b.function, index));
    if (!guard.entered || !spend()) return;
    // Parameters after `*args` or `*` are keyword-only: no position reaches them.
    std::optional<uint32_t> keyword_only_from;
    for_each_named_child(field(f.node, "parameters"), [&](TSNode p) {
      std::string_view type = ts_node_type(p);
      if (!keyword_only_from &&
          (type == "list_splat_pattern" || type == "dictionary_splat_pattern" || type == "keyword_separator"))
        keyword_only_from = start_byte(p);
    });
    // What a call passes for parameter `name` of `f`, by keyword, by
    // position when it may be positional, else the parameter's default.
    auto passed = [&](const Call& site, std::string_view name) {
      const Binding* param = nullptr;
      for (const Binding* p : m_.bindings_of(name, b.function))
        if (p->kind == BindingKind::Parameter) param = p;
      if (!param) return TSNode{};
      size_t position = static_cast<size_t>(std::find(f.params.begin(), f.params.end(), name) - f.params.begin());
      bool keyword_only = keyword_only_from && start_byte(param->statement) > *keyword_only_from;
      TSNode given = keyword_only ? m_.keyword_argument(site, name) : m_.argument_for(site, f, position, method);
      return is_null(given) ? param->value : given;
    };
    // At the loader's own function, the worker count's parameter.
    bool workers = b.function == loader_function_ &&
                   std::find(f.params.begin(), f.params.end(), workers_param_) != f.params.end();
    for (const Call* site : m_.call_sites(f)) {
      bool splat = false;
      for_each_named_child(site->args, [&](TSNode a) {
        splat = splat || kind_of(a) == Kind::ListSplat || kind_of(a) == Kind::DictionarySplat;
      });
      if (splat) continue;
      if (workers) {
        TSNode count_node = passed(*site, workers_param_);
        auto count = is_null(count_node) ? std::nullopt : Folder(m_, site->function).integer(count_node);
        if (count && *count == 0) continue;  // this call starts no workers
      }
      collect(passed(*site, b.name), path, out, depth + 1);
    }
  }

  // `self.x` in a method: what the class's methods assign to it. In the
  // class whose facts are collected, its __init__'s parameters are
  // constructor parameters; elsewhere they are followed to the class's
  // constructions in the file.
  bool self_attribute(TSNode expr, const std::string& path, std::vector<ValueRef>& out, int depth) const {
    TSNode object = unparenthesize(field(expr, "object"));
    if (kind_of(object) != Kind::Identifier) return false;
    int fn = m_.function_at(start_byte(expr));
    if (fn < 0) return false;
    const Function& f = m_.functions()[fn];
    if (f.cls < 0 || f.params.empty() || m_.text(object) != f.params[0] ||
        m_.function_has_decorator(fn, "staticmethod") || m_.function_has_decorator(fn, "classmethod"))
      return false;
    std::string_view attr = m_.text(field(expr, "attribute"));
    Following guard(*active_, fmt::format("A{}.{}", f.cls, attr));
    if (!guard.entered || !spend()) return true;
    const Function* init = m_.find_method(f.cls, "__init__");
    for (int mi : m_.classes()[f.cls].methods) {
      const Function& method = m_.functions()[mi];
      if (method.params.empty()) continue;
      ValueCollector inner(m_, file_, owner_ == f.cls && &method == init ? init : nullptr, owner_);
      inner.active_ = active_;
      inner.budget_ = budget_;
      for (const Binding* b : m_.bindings_of(method.params[0] + "." + std::string(attr), mi)) {
        if ((b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) || b->element >= 0 ||
            is_null(b->value))
          continue;
        inner.collect(b->value, path, out, depth + 1);
      }
    }
    return true;
  }

  // The parameters and attributes being followed (a recursive function, an
  // attribute assigned from itself), shared with the collectors this one
  // starts: each is followed once on a path.
  struct Following {
    Following(std::set<std::string>& set, std::string key) : set_(set), key_(std::move(key)) {
      entered = set_.insert(key_).second;
    }
    ~Following() {
      if (entered) set_.erase(key_);
    }
    std::set<std::string>& set_;
    std::string key_;
    bool entered = false;
  };

  const Model& m_;
  const FileIndex& file_;
  const Function* init_;
  int owner_ = -1;
  // Parameters and attributes followed in all, shared like active_: each
  // level of pass-through fans out over every call site, so the work is
  // bounded, not the depth alone.
  bool spend() const { return (*budget_)-- > 0; }

  mutable std::set<std::string> own_active_;
  std::set<std::string>* active_;
  mutable int own_budget_ = 64;
  int* budget_;
  int loader_function_ = -2;
  std::string workers_param_;
};

// ---------------------------------------------------------------------------
// What one method or module-level function reads.

struct NumpyUse {
  const Model* model = nullptr;
  uint32_t line = 0;
  std::string text;
};

struct Reads {
  // `self.X` reads, with the method called on it ("" for none, "__getitem__"
  // for `self.X[i]`), in source order, each once.
  std::vector<std::pair<std::string, std::string>> self;
  std::set<std::string, std::less<>> reseed;  // self.X re-created or re-seeded here
  // Module-level names of this file re-created (`global name; name = ...`)
  // or re-seeded here.
  std::set<std::string, std::less<>> reseed_globals;
  std::vector<std::string> callself, super;  // self.m(...), super().m(...)
  std::vector<Target> refs;                  // module-level and imported names read
  std::optional<NumpyUse> numpy;             // a draw from numpy's global RNG
};

class FunctionReads {
 public:
  FunctionReads(const Model& m, const FileIndex& file, int function)
      : m_(m), file_(file), index_(function), f_(m.functions()[function]) {
    const Function& f = f_;
    bool plain_method = f.cls >= 0 && !f.params.empty() &&
                        std::find(f.decorators.begin(), f.decorators.end(), "staticmethod") == f.decorators.end() &&
                        std::find(f.decorators.begin(), f.decorators.end(), "classmethod") == f.decorators.end();
    if (plain_method) self_ = f.params[0];
  }

  Reads run() {
    writes();
    calls();
    walk();
    return std::move(out_);
  }

 private:
  static void add(std::vector<std::string>& list, std::string_view v) {
    if (std::find(list.begin(), list.end(), v) == list.end()) list.emplace_back(v);
  }

  // self.<attr> = ... (or self.<attr>.x.y = ...) anywhere in the function.
  void writes() {
    for (const Binding* bp : file_.bindings_of_root(index_)) {
      const Binding& b = *bp;
      if (b.kind == BindingKind::SubscriptStore || b.kind == BindingKind::Parameter) continue;
      TSNode target = unparenthesize(b.target);
      if (kind_of(target) == Kind::Attribute) targets_.insert(start_byte(target));
      std::string_view attr = self_attribute(b.name);
      if (!attr.empty()) out_.reseed.emplace(attr);
      if (b.kind != BindingKind::Global && file_.declares_global(b.function, b.name)) out_.reseed_globals.insert(b.name);
    }
  }

  void calls() {
    for (const Call* cp : file_.calls_of_root(index_)) {
      const Call& c = *cp;
      if (!c.method.empty() && !is_null(c.receiver)) {
        TSNode recv = unparenthesize(c.receiver);
        Kind rk = kind_of(recv);
        if (!self_.empty() && rk == Kind::Identifier && m_.text(recv) == self_) {
          add(out_.callself, c.method);
        } else if (rk == Kind::Call && m_.qualify(unparenthesize(field(recv, "function"))) == "super") {
          add(out_.super, c.method);
        } else if (one_of(std::string_view(c.method), kReseedMethods)) {
          std::string q = m_.qualify(recv);
          std::string_view attr = self_attribute(q);
          // self.<attr> itself, not self.<attr>.more
          if (!attr.empty() && q.size() == self_.size() + 1 + attr.size()) out_.reseed.emplace(attr);
          if (rk == Kind::Identifier) {
            std::string_view name = m_.text(recv);
            if (file_.module_binding(name) && !bound_locally(name, c.function)) out_.reseed_globals.emplace(name);
          }
        }
      }
      if (!out_.numpy && starts_with(c.callee, "numpy.random.") && c.callee.rfind('.') == 12 &&
          one_of(last_component(c.callee), kNumpyGlobalDraws))
        out_.numpy = NumpyUse{&m_, m_.position(c.node).line, std::string(m_.text(c.func))};
    }
  }

  // The attribute X of `self.X` or `self.X.more`; "" for anything else.
  std::string_view self_attribute(std::string_view name) const {
    if (self_.empty() || !starts_with(name, self_) || name.size() <= self_.size() + 1 || name[self_.size()] != '.')
      return {};
    std::string_view rest = name.substr(self_.size() + 1);
    return rest.substr(0, rest.find('.'));
  }

  // Every name in the body, in source order, from the model's references:
  // `self.X` reads (with the attribute's parent and grandparent), and other
  // names with the innermost function holding them.
  void walk() {
    const auto& refs = m_.references();
    uint32_t begin = start_byte(f_.body), end = end_byte(f_.body);
    auto it = std::lower_bound(refs.begin(), refs.end(), begin,
                               [](const Reference& r, uint32_t at) { return start_byte(r.node) < at; });
    for (; it != refs.end() && start_byte(it->node) < end; ++it) {
      const Reference& r = *it;
      // An identifier under an attribute, starting where it starts, is its object.
      if (!self_.empty() && start_byte(r.parent) == start_byte(r.node) && kind_of(r.parent) == Kind::Attribute &&
          m_.text(r.node) == self_) {
        self_read(r.parent, r.grandparent, r.great_grandparent);
        continue;
      }
      identifier(r.node, r.parent, r.function);
    }
  }

  // `self.X` read as `self.X.m(...)`, `self.X[i]`, `self.X(...)` or passed on.
  // The object of an attribute or subscript, and the function of a call,
  // start where their parent starts.
  void self_read(TSNode n, TSNode parent, TSNode grandparent) {
    // Part of a target (`self.rng.bit_generator.state = ...`): a write,
    // recorded by writes().
    if (targets_.count(start_byte(n))) return;
    std::string_view attr = m_.text(attribute_name(n));
    std::string_view method;
    bool leads = !is_null(parent) && start_byte(parent) == start_byte(n);
    if (leads && kind_of(parent) == Kind::Attribute && kind_of(grandparent) == Kind::Call &&
        start_byte(grandparent) == start_byte(parent))
      method = m_.text(attribute_name(parent));
    else if (leads && kind_of(parent) == Kind::Subscript)
      method = "__getitem__";
    if (one_of(method, kReseedMethods)) return;  // recorded by calls()
    auto read = std::pair<std::string, std::string>(attr, method);
    if (std::find(out_.self.begin(), out_.self.end(), read) == out_.self.end()) out_.self.push_back(std::move(read));
  }

  void identifier(TSNode n, TSNode parent, int function) {
    // References hold neither an attribute's name nor a keyword argument's.
    std::string_view name = m_.text(n);
    if (name == self_) return;
    // A name read again: the same target (an imported module's attribute
    // aside, `augment.jitter` and `augment.crop`).
    if (auto [it, fresh] = recorded_.insert(name); !fresh) return;
    const Binding* b = file_.module_binding(name);
    const Function* f = b ? nullptr : m_.find_function(name);
    // Not bound at module level (a local, a builtin, a name from a star
    // import), or shadowed here: nothing to record.
    if ((!b && !f) || bound_locally(name, function)) {
      recorded_.erase(name);
      return;
    }
    if (b) {
      if (b->kind == BindingKind::Import) {
        // `import augment` then `augment.jitter(...)`: the module's name.
        recorded_.erase(name);
        TSNode named = n;
        if (kind_of(parent) == Kind::Attribute && start_byte(parent) == start_byte(n)) named = parent;
        if (auto t = imported_target(m_, named)) add(*t);
        else if (auto u = imported_target(m_, n); u && named.id != n.id) add(*u);
        return;
      }
      if (b->kind == BindingKind::Assign || b->kind == BindingKind::NamedExpr) add({&m_, -1, b});
      return;
    }
    add({&m_, index_of(m_, f), nullptr});
  }

  // Each target once: an imported module's attributes are read again and again (`cfg.SIZE`).
  void add(const Target& t) {
    auto same = [&](const Target& o) { return o.m == t.m && o.function == t.function && o.global == t.global; };
    if (std::none_of(out_.refs.begin(), out_.refs.end(), same)) out_.refs.push_back(t);
  }

  // Bound in the function holding the use or in one enclosing it, up to
  // this method or function.
  bool bound_locally(std::string_view name, int function) const {
    for (int fn = function; fn >= 0; fn = m_.functions()[fn].parent) {
      if (file_.binds(name, fn)) return true;
      if (fn == index_) break;
    }
    return false;
  }

  const Model& m_;
  const FileIndex& file_;
  int index_;
  const Function& f_;
  std::string self_;
  Reads out_;
  std::unordered_set<std::string_view> recorded_;  // module-level names whose read was recorded
  std::unordered_set<uint32_t> targets_;                 // start bytes of attribute targets
};

// ---------------------------------------------------------------------------
// From a dataset class to the generators its workers draw from.

// Constructor arguments: "#0", "#1", ... by position, and keyword names.
using Args = std::map<std::string, std::vector<ValueRef>>;

struct SiteDataset {
  ClassRef cls;
  std::string name;  // the class, as named at the DataLoader's site
  std::string path;  // from `info.dataset` to it: "", ".dataset", ".datasets[1]"
  Args args;
  bool args_known = true;  // false when a splat hides some
};

struct Candidate {
  std::string_view kind;  // one of the generator kinds
  std::string display;
  const Model* model = nullptr;  // the file creating it
  uint32_t line = 0;
  std::string ctor;    // the constructor as written: "np.random.default_rng"
  std::string where;   // "in `NoisyDataset.__init__`", "at module level"
  std::string target;  // how a worker_init_fn reaches it, "" when unknown
  std::string holder;  // the class holding it ("" for a module-level variable)
  std::string attr;    // the attribute or variable name
  const Model* home = nullptr;  // for a module-level variable: the file binding it
  std::string via;     // the transform class it was reached through, if not the dataset
};

// The module a worker_init_fn imports to reach a file's variable: the file's
// stem, or its package's name for an __init__.py.
std::string module_stem(std::string_view file) {
  std::string path(file);
  std::replace(path.begin(), path.end(), '\\', '/');
  std::string_view base = std::string_view(path).substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  std::string stem(base.substr(0, base.find('.')));
  if (stem == "__init__") {
    std::string_view dir = std::string_view(path).substr(0, path.rfind('/'));
    stem = std::string(dir.substr(dir.rfind('/') == std::string_view::npos ? 0 : dir.rfind('/') + 1));
  }
  return stem;
}

class Resolver {
 public:
  explicit Resolver(const Model& site) : site_(site) {}

  std::vector<Candidate> candidates;
  std::optional<NumpyUse> numpy;

  void dataset(const SiteDataset& d) {
    object(d.cls, kDatasetEntries, "info.dataset" + d.path, d.args_known ? &d.args : nullptr, "");
    // A module-level generator that a worker re-creates or re-seeds itself.
    std::erase_if(candidates, [&](const Candidate& c) {
      return c.holder.empty() && reseeded_globals_.count({c.home, c.attr});
    });
  }

  const FileIndex& index(const Model& m) {
    auto& slot = indexes_[&m];
    if (!slot) slot = std::make_unique<FileIndex>(m);
    return *slot;
  }

 private:
  // What a class defines and holds, read from its model on first need.
  struct ClassInfo {
    std::set<std::string, std::less<>> defs;   // its methods
    std::set<std::string, std::less<>> bound;  // attributes its methods assign
    std::map<std::string, std::vector<ValueRef>, std::less<>> attrs;     // what they hold
    std::map<std::string, std::vector<ValueRef>, std::less<>> defaults;  // its __init__'s defaults
    std::vector<ClassRef> bases;
  };

  struct Work {
    FunctionRef fn;
    ClassRef def_class;  // the class defining the method, empty for a function
  };
  // What one object's walk has followed: functions and module-level variables.
  struct Visited {
    std::set<FunctionRef> functions;
    std::set<std::pair<const Model*, const Binding*>> globals;
  };

  const ClassInfo& info(ClassRef ref) {
    auto [it, fresh] = classes_.try_emplace(ref);
    if (!fresh) return it->second;
    ClassInfo& out = it->second;
    const Model& m = *ref.m;
    const FileIndex& file = index(m);
    const Class& c = m.classes()[ref.cls];
    const Function* init = m.find_method(ref.cls, "__init__");
    if (init && init->cls != ref.cls) init = nullptr;
    for (int mi : c.methods) {
      const Function& f = m.functions()[mi];
      out.defs.insert(f.name);
      // self.<attr> = value anywhere in the method.
      if (f.params.empty()) continue;
      std::string self = f.params[0] + ".";
      ValueCollector collector(m, file, &f == init ? init : nullptr, ref.cls);
      for (const Binding* bp : file.bindings_of_root(mi)) {
        const Binding& b = *bp;
        if (b.kind != BindingKind::Assign && b.kind != BindingKind::NamedExpr) continue;
        if (b.element >= 0 || is_null(b.value) || !starts_with(b.name, self)) continue;
        std::string attr = b.name.substr(self.size());
        if (attr.find('.') != std::string::npos) continue;
        out.bound.insert(attr);
        collector.collect(b.value, "", out.attrs[attr]);
      }
    }
    // Defaults of __init__'s parameters: evaluated once, when the class is defined.
    if (init) {
      ValueCollector defaults(m, file, nullptr);
      int init_index = index_of(m, init);
      for (const Binding* b : file.bindings_of_root(init_index)) {
        if (b->kind != BindingKind::Parameter || b->function != init_index || is_null(b->value)) continue;
        defaults.collect(b->value, "", out.defaults[b->name]);
      }
    }
    // Class attributes: `rng = np.random.default_rng(0)` in the class body.
    ValueCollector collector(m, file, nullptr);
    for (const Binding* bp : file.class_body_bindings(ref.cls)) {
      const Binding& b = *bp;
      if (b.kind != BindingKind::Assign || b.element >= 0 || is_null(b.value)) continue;
      if (b.name.find('.') != std::string::npos) continue;
      std::vector<ValueRef> refs;
      collector.collect(b.value, "", refs);
      for (auto& r : refs)
        if (r.kind == ValueRef::Kind::Generator) out.attrs[b.name].push_back(std::move(r));
    }
    for_each_named_child(field(c.node, "superclasses"), [&](TSNode base) {
      if (kind_of(base) == Kind::KeywordArgument || kind_of(base) == Kind::Comment) return;
      if (ClassRef b = resolve_class(m, base)) out.bases.push_back(b);
    });
    return out;
  }

  const Reads& reads(FunctionRef f) {
    auto [it, fresh] = reads_.try_emplace(f);
    if (fresh) it->second = FunctionReads(*f.m, index(*f.m), f.function).run();
    return it->second;
  }

  // A worker calls `entries` on an object of class `cls`; `path` is how a
  // worker_init_fn reaches that object ("" when unknown).
  void object(ClassRef cls, const std::vector<std::string>& entries, const std::string& path, const Args* args,
              const std::string& via) {
    if (!cls || ++objects_ > 64 || !active_.insert(cls).second) return;
    std::vector<Work> work;
    Visited visited;
    std::map<std::string, std::vector<std::string>> used;  // attr -> methods called on it
    std::vector<std::string> used_order;
    std::set<std::string> reseeded;
    auto push_method = [&](ClassRef def, const std::string& method) {
      if (!def) return;
      const Function* f = def.m->find_method(def.cls, method);
      if (!f || f->cls != def.cls) return;
      FunctionRef ref{def.m, index_of(*def.m, f)};
      if (visited.functions.insert(ref).second) work.push_back({ref, def});
    };
    for (const auto& e : entries) push_method(defining(cls, e), e);
    auto drain = [&]() {
      for (size_t i = 0; i < work.size(); ++i) {
        Work w = work[i];
        const Reads& r = reads(w.fn);
        if (w.def_class) {
          for (const auto& [attr, method] : r.self) {
            if (!used.count(attr)) used_order.push_back(attr);
            used[attr].push_back(method);
          }
          for (const auto& m : r.callself) push_method(defining(cls, m), m);
          for (const auto& m : r.super) {
            for (ClassRef base : info(w.def_class).bases) {
              if (ClassRef def = defining(base, m)) {
                push_method(def, m);
                break;
              }
            }
          }
        }
        reseeded.insert(r.reseed.begin(), r.reseed.end());
        for (const auto& g : r.reseed_globals) reseeded_globals_.insert({w.fn.m, g});
        for (const Target& t : r.refs) reference(t, work, visited, via);
        if (r.numpy && !numpy) numpy = r.numpy;
      }
      work.clear();
    };
    // Every method a worker reaches, also those passed on as callbacks
    // (`map(self.augment, xs)`: a read of `self.augment` that no method assigns).
    for (size_t seen = 0; true;) {
      drain();
      if (seen == used_order.size()) break;
      for (; seen < used_order.size(); ++seen)
        if (!attribute(cls, used_order[seen]).first) push_method(defining(cls, used_order[seen]), used_order[seen]);
    }
    // Then what the attributes they read hold.
    for (const auto& attr : used_order) {
      if (reseeded.count(attr)) continue;
      const std::vector<std::string>& methods = used[attr];
      auto [holder, refs] = attribute(cls, attr);
      if (!holder) continue;
      std::string attr_path = path.empty() ? "" : path + "." + attr;
      std::string holder_name = cls.m->classes()[cls.cls].name;
      for (const ValueRef& r : *refs) {
        // Constructor arguments match the parameters of the class that was
        // constructed by position, and an inherited __init__'s by name.
        value(r, holder, attr_path, methods, args, holder == cls, holder_name, attr, via, work, visited);
      }
    }
    drain();
    active_.erase(cls);
  }

  // A value held in `attr` (or a module-level variable), read by a worker.
  // `defined_in` is the class whose attribute binding gave `r`, if any: its
  // __init__'s parameter defaults apply when the argument was not passed.
  void value(const ValueRef& r, ClassRef defined_in, const std::string& path, const std::vector<std::string>& methods,
             const Args* args, bool by_position, const std::string& holder, const std::string& attr,
             const std::string& via, std::vector<Work>& work, Visited& visited,
             const Model* home = nullptr) {
    switch (r.kind) {
      case ValueRef::Kind::Generator: {
        bool draws = methods.empty() || std::any_of(methods.begin(), methods.end(), [](const std::string& m) {
                       return !one_of(std::string_view(m), kNonDrawMethods);
                     });
        if (!draws) return;
        Candidate c;
        c.kind = r.generator;
        c.display = r.display;
        c.model = r.model;
        c.line = r.line;
        c.ctor = r.ctor;
        c.where = r.where;
        c.target = r.path.empty() ? path : "";
        c.holder = holder;
        c.attr = attr;
        c.home = home;
        c.via = via;
        candidates.push_back(std::move(c));
        return;
      }
      case ValueRef::Kind::Object: {
        std::vector<std::string> entries;
        for (const auto& m : methods)
          if (!m.empty()) entries.push_back(m);
        if (entries.empty() || std::find(methods.begin(), methods.end(), "") != methods.end())
          entries.insert(entries.end(), kCallableEntries.begin(), kCallableEntries.end());
        std::string sub = path.empty() || r.path == "?" ? "" : path + r.path;
        // Which arguments were given (their values were collected as refs
        // of their own): the parameters not given hold their defaults.
        std::optional<Args> given;
        if (r.given) {
          given.emplace();
          for (const auto& key : *r.given) (*given)[key];
        }
        object(r.cls, entries, sub, given ? &*given : nullptr, std::string(last_component(r.qualified)));
        return;
      }
      case ValueRef::Kind::Name:
        reference(r.target, work, visited, via);
        return;
      case ValueRef::Kind::Parameter: {
        if (!args) return;  // the constructor call is not known
        std::string sub = r.itself ? path : "";
        auto given = args->find(r.name);
        if (given == args->end() && by_position) given = args->find("#" + std::to_string(r.index));
        if (given != args->end()) {
          for (const ValueRef& g : given->second)
            value(g, {}, sub, methods, nullptr, false, holder, attr, via, work, visited, home);
          return;
        }
        // Not passed: the default, evaluated once when `def __init__` ran.
        if (!defined_in) return;
        const ClassInfo& defining_class = info(defined_in);
        auto d = defining_class.defaults.find(r.name);
        if (d == defining_class.defaults.end()) return;
        for (const ValueRef& v : d->second)
          value(v, {}, sub, methods, nullptr, false, holder, attr, via, work, visited, home);
        return;
      }
    }
  }

  // A module-level or imported name read by a worker: a helper function to
  // follow, or a variable holding a generator or an object.
  void reference(const Target& t, std::vector<Work>& work, Visited& visited, const std::string& via) {
    if (!t.m) return;
    if (t.function >= 0) {
      FunctionRef f{t.m, t.function};
      if (visited.functions.insert(f).second && ++references_ <= 256) work.push_back({f, {}});
      return;
    }
    const Binding* g = t.global;
    if (!g || g->element >= 0 || is_null(g->value) || !visited.globals.insert({t.m, g}).second) return;
    if (++references_ > 256) return;
    const std::string& name = g->name;
    std::string path = t.m == &site_ ? name : module_stem(t.m->path()) + "." + name;
    std::vector<ValueRef> refs;
    ValueCollector(*t.m, index(*t.m), nullptr).collect(g->value, "", refs);
    for (const ValueRef& r : refs) {
      if (r.kind == ValueRef::Kind::Parameter) continue;
      value(r, {}, path, {""}, nullptr, false, "", name, via, work, visited, t.m);
    }
  }

  // The class defining `method` for an object of class `cls` (depth-first,
  // bases in order), or an empty reference.
  ClassRef defining(ClassRef cls, const std::string& method, int depth = 0) {
    if (!cls || depth > 16) return {};
    const ClassInfo& c = info(cls);
    if (c.defs.count(method)) return cls;
    std::vector<ClassRef> bases = c.bases;  // info() may grow the table
    for (ClassRef base : bases)
      if (ClassRef d = defining(base, method, depth + 1)) return d;
    return {};
  }

  // What `attr` holds on an object of class `cls`: the bindings of the first
  // class in its hierarchy that assigns it (empty when none does).
  std::pair<ClassRef, const std::vector<ValueRef>*> attribute(ClassRef cls, const std::string& attr, int depth = 0) {
    static const std::vector<ValueRef> kNone;
    if (!cls || depth > 16) return {{}, &kNone};
    const ClassInfo& c = info(cls);
    auto held = c.attrs.find(attr);
    if (c.bound.count(attr) || held != c.attrs.end()) return {cls, held == c.attrs.end() ? &kNone : &held->second};
    std::vector<ClassRef> bases = c.bases;
    for (ClassRef base : bases) {
      auto found = attribute(base, attr, depth + 1);
      if (found.first) return found;
    }
    return {{}, &kNone};
  }

  const Model& site_;
  std::map<const Model*, std::unique_ptr<FileIndex>> indexes_;
  std::map<ClassRef, ClassInfo> classes_;  // node-stable: references into it stay valid
  std::map<FunctionRef, Reads> reads_;
  std::set<ClassRef> active_;
  std::set<std::pair<const Model*, std::string>> reseeded_globals_;  // file and name
  int objects_ = 0;
  int references_ = 0;
};

// ---------------------------------------------------------------------------
// Messages.

// "line 12" in the finding's own file, else "data.py:12" (in a notebook,
// "train.ipynb:cell 3:4": ProjectIndex::location).
std::string location(const ProjectIndex& index, const std::string& file, uint32_t line, const std::string& site) {
  std::string where = index.location(file, line);
  return file == site && where == fmt::format("{}:{}", file, line) ? fmt::format("line {}", line) : where;
}

std::string reseed_statement(const Candidate& c, const std::string& target) {
  if (c.kind == kNumpyGenerator) {
    std::string ctor = ends_with(c.ctor, "default_rng") ? c.ctor : "np.random.default_rng";
    return fmt::format("{} = {}(info.seed)", target, ctor);
  }
  if (c.kind == kRandomState) return fmt::format("{}.seed(info.seed % 2**32)", target);
  if (c.kind == kPyRandom) return fmt::format("{}.seed(info.seed)", target);
  return fmt::format("{}.manual_seed(info.seed)", target);
}

std::string generator_help(const Candidate& c) {
  if (c.target.empty()) {
    return fmt::format(
        "give each worker its own stream: pass the `DataLoader` a `worker_init_fn` that reaches this generator "
        "through `info = torch.utils.data.get_worker_info()` (`info.dataset` is the worker's copy of the dataset) "
        "and re-seeds it: `{}`",
        reseed_statement(c, "generator"));
  }
  std::string stmt = reseed_statement(c, c.target);
  if (c.holder.empty() && c.kind == kNumpyGenerator && c.target.find('.') == std::string::npos)
    stmt = "global " + c.target + "; " + stmt;
  return fmt::format(
      "give each worker its own stream: `def worker_init_fn(worker_id): info = "
      "torch.utils.data.get_worker_info(); {}`, then pass `worker_init_fn=worker_init_fn` to the `DataLoader`",
      stmt);
}

// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// The check.

bool is_data_loader(std::string_view callee) {
  return callee == "torch.utils.data.DataLoader" || callee == "torch.utils.data.dataloader.DataLoader";
}

bool is_torch_data(std::string_view callee, std::string_view name) {
  return last_component(callee) == name &&
         (callee == fmt::format("torch.utils.data.{}", name) ||
          callee == fmt::format("torch.utils.data.dataset.{}", name));
}

class MissingWorkerInitFn final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    std::optional<Resolver> resolver;
    for (const Call& c : m.calls()) {
      if (!is_data_loader(c.callee) || has_splat(c)) continue;
      TSNode workers = argument(m, c, "num_workers", 5);
      if (is_null(workers)) continue;
      if (no_workers(m, c, workers)) continue;
      TSNode init = argument(m, c, "worker_init_fn", 10);
      if (!is_null(init) && kind_of(unparenthesize(init)) != Kind::None) continue;
      if (!resolver) resolver.emplace(m);
      std::vector<SiteDataset> datasets;
      site_datasets(m, resolver->index(m), argument(m, c, "dataset", 0), "", datasets, 0,
                    loader_workers(m, c, workers));
      // Persistent workers keep their generator across epochs: only the
      // workers replay each other's stream, not the epochs.
      bool persistent = kind_of(unparenthesize(m.keyword_argument(c, "persistent_workers"))) == Kind::True;
      report(ctx, c, workers, persistent, datasets);
    }
  }

 private:
  static bool has_splat(const Call& c) {
    uint32_t n = is_null(c.args) ? 0 : ts_node_named_child_count(c.args);
    for (uint32_t i = 0; i < n; ++i) {
      Kind k = kind_of(ts_node_named_child(c.args, i));
      if (k == Kind::ListSplat || k == Kind::DictionarySplat) return true;
    }
    return false;
  }

  static TSNode argument(const Model& m, const Call& c, std::string_view name, uint32_t position) {
    TSNode a = m.keyword_argument(c, name);
    return is_null(a) ? m.positional_argument(c, position) : a;
  }
  // The literal worker count, following one assignment of a name; nullopt
  // when it is not a literal.
  // Whether the loader runs in the main process: num_workers folds to 0 (a
  // literal, a constant, a constant of another file, a parameter's default)
  // and, for a parameter, no call of the function in the file passes a value
  // that may not be 0.
  static bool no_workers(const Model& m, const Call& c, TSNode workers) {
    auto count = Folder(m, c.function).integer(workers);
    if (!count || *count > 0) return false;
    workers = unparenthesize(workers);
    if (kind_of(workers) != Kind::Identifier || c.function < 0) return true;
    const Binding* b = m.reaching(m.text(workers), start_byte(workers), c.function);
    if (!b || b->kind != BindingKind::Parameter) return true;
    const Function& f = m.functions()[c.function];
    auto param = std::find(f.params.begin(), f.params.end(), m.text(workers));
    size_t position = static_cast<size_t>(param - f.params.begin()) - (f.cls >= 0 ? 1 : 0);
    for (const Call* site : m.call_sites(f)) {
      TSNode given = m.keyword_argument(*site, m.text(workers));
      if (is_null(given)) given = m.positional_argument(*site, static_cast<uint32_t>(position));
      if (is_null(given)) continue;  // the default
      auto passed = Folder(m, site->function).integer(given);
      if (!passed || *passed > 0) return false;
    }
    return true;
  }

  // The parameter of the loader's function that gives its worker count
  // (`num_workers=workers`), if any.
  struct LoaderWorkers {
    int function = -1;
    std::string parameter;
  };
  static LoaderWorkers loader_workers(const Model& m, const Call& c, TSNode workers) {
    workers = unparenthesize(workers);
    if (kind_of(workers) != Kind::Identifier || c.function < 0) return {};
    const Binding* b = m.reaching(m.text(workers), start_byte(workers), c.function);
    if (!b || b->kind != BindingKind::Parameter || b->function != c.function) return {};
    return {c.function, b->name};
  }

  // The dataset classes a DataLoader's dataset argument is built from.
  static void site_datasets(const Model& m, const FileIndex& file, TSNode expr, const std::string& path,
                            std::vector<SiteDataset>& out, int depth,
                            const LoaderWorkers& workers) {
    expr = unparenthesize(expr);
    if (is_null(expr) || depth > 6) return;
    switch (kind_of(expr)) {
      case Kind::Call: {
        std::string callee = m.qualify(field(expr, "function"));
        Call call;
        call.node = expr;
        call.args = field(expr, "arguments");
        if (is_torch_data(callee, "Subset")) {
          return site_datasets(m, file, argument(m, call, "dataset", 0), path + ".dataset", out, depth + 1, workers);
        }
        if (is_torch_data(callee, "ConcatDataset") || is_torch_data(callee, "ChainDataset")) {
          TSNode list = unparenthesize(argument(m, call, "datasets", 0));
          if (kind_of(list) != Kind::List && kind_of(list) != Kind::Tuple) return;
          for (uint32_t i = 0; i < ts_node_named_child_count(list); ++i)
            site_datasets(m, file, ts_node_named_child(list, i), fmt::format("{}.datasets[{}]", path, i), out,
                          depth + 1, workers);
          return;
        }
        if (callee.empty() || !capitalized(callee) || !generator_kind(callee).empty()) return;
        ClassRef cls = resolve_class(m, field(expr, "function"));
        if (!cls) return;  // not a class of the project: nothing known of its items
        SiteDataset d{cls, std::string(last_component(callee)), path, {}, true};
        ValueCollector values(m, file, nullptr);
        if (!workers.parameter.empty()) values.only_calls_with_workers(workers.function, workers.parameter);
        uint32_t n = is_null(call.args) ? 0 : ts_node_named_child_count(call.args);
        uint32_t position = 0;
        for (uint32_t i = 0; i < n; ++i) {
          TSNode a = ts_node_named_child(call.args, i);
          Kind k = kind_of(a);
          if (k == Kind::ListSplat || k == Kind::DictionarySplat) {
            d.args_known = false;  // any parameter may be among them
            break;
          }
          if (k == Kind::Comment) continue;
          std::string key = k == Kind::KeywordArgument ? std::string(m.text(field(a, "name")))
                                                       : "#" + std::to_string(position++);
          values.collect(k == Kind::KeywordArgument ? field(a, "value") : a, "", d.args[key]);
        }
        out.push_back(std::move(d));
        return;
      }
      case Kind::Identifier: {
        const Binding* b = m.reaching(m.text(expr), start_byte(expr), m.function_at(start_byte(expr)));
        if (!b || (b->kind != BindingKind::Assign && b->kind != BindingKind::NamedExpr) || is_null(b->value)) return;
        if (b->element < 0) return site_datasets(m, file, b->value, path, out, depth + 1, workers);
        // train_set, val_set = random_split(full, [0.9, 0.1]): Subsets of `full`.
        TSNode v = unparenthesize(b->value);
        if (kind_of(v) != Kind::Call || !is_torch_data(m.qualify(field(v, "function")), "random_split")) return;
        Call split;
        split.node = v;
        split.args = field(v, "arguments");
        return site_datasets(m, file, argument(m, split, "dataset", 0), path + ".dataset", out, depth + 1, workers);
      }
      case Kind::Attribute: {
        // self.train_set, assigned once in the class.
        std::string name = m.qualify(expr);
        int cls = m.class_of_function(m.function_at(start_byte(expr)));
        if (name.empty() || cls < 0) return;
        const Binding* only = nullptr;
        for (const Binding& b : m.bindings()) {
          if (b.name != name || b.function < 0 || m.functions()[b.function].cls != cls) continue;
          if (only || b.kind != BindingKind::Assign || b.element >= 0 || is_null(b.value)) return;
          only = &b;
        }
        if (only) site_datasets(m, file, only->value, path, out, depth + 1, workers);
        return;
      }
      default: return;
    }
  }


  static void report(CheckContext& ctx, const Call& c, TSNode workers, bool persistent,
                     const std::vector<SiteDataset>& datasets) {
    const Model& m = ctx.model();
    if (datasets.empty()) return;
    std::string workers_text = fmt::format("num_workers={}", m.text(workers));
    if (workers_text.size() > 60 || workers_text.find('\n') != std::string::npos) workers_text = "num_workers";
    auto [major, minor] = ctx.config().torch_version();
    bool global_numpy_counts = major < 1 || (major == 1 && minor < 9);
    std::string version = fmt::format("{}.{}", major, minor);
    std::string site = ctx.path();
    // The file a reference lives in, as the finding names it.
    auto file_of = [&](const Model* model) { return model == &m ? site : model->path(); };
    std::string replay = persistent ? "every worker gets a copy of the same generator and replays the same random "
                                      "numbers as the others"
                                    : "every worker gets a copy of the same generator and replays the same random "
                                      "numbers, every epoch";
    for (const SiteDataset& ds : datasets) {
      Resolver r(m);
      r.dataset(ds);
      if (!r.candidates.empty()) {
        const Candidate& g = r.candidates.front();
        std::string through = g.via.empty() ? "" : fmt::format(", through `{}`,", g.via);
        std::string what = g.holder.empty() ? fmt::format("the module-level generator `{}`", g.display)
                                            : fmt::format("`{}`", g.display);
        std::string before = fmt::format(
            "this `DataLoader` starts worker processes (`{}`) without a `worker_init_fn`, and `{}`{} draws "
            "from {} (created once {}, ",
            workers_text, ds.name, through, what, g.where);
        std::string after = fmt::format("): {}", replay);
        std::string help = generator_help(g);
        // Where the generator is created reads as the project index words it
        // (a notebook's cells): said once every file is in.
        ctx.defer(ctx.diagnostic(c.node, ""),
                  [before = std::move(before), after = std::move(after), help = std::move(help),
                   file = file_of(g.model), line = g.line, site](const ProjectIndex& index, Diagnostic& diag) {
                    diag.message = before + location(index, file, line, site) + after;
                    diag.help = help;
                    return true;
                  });
        return;
      }
      if (global_numpy_counts && r.numpy) {
        std::string before = fmt::format(
            "this `DataLoader` starts worker processes (`{}`) without a `worker_init_fn`, and `{}` draws from "
            "numpy's global RNG (`{}`, ",
            workers_text, ds.name, r.numpy->text);
        std::string after = fmt::format(
            "): before PyTorch 1.9 (target-torch-version {}) every worker starts from the same numpy seed and draws "
            "the same numbers",
            version);
        ctx.defer(ctx.diagnostic(c.node, ""),
                  [before = std::move(before), after = std::move(after), file = file_of(r.numpy->model),
                   line = r.numpy->line, site](const ProjectIndex& index, Diagnostic& diag) {
                    diag.message = before + location(index, file, line, site) + after;
                    diag.help =
                        "seed numpy in each worker: `def worker_init_fn(worker_id): "
                        "np.random.seed(torch.utils.data.get_worker_info().seed % 2**32)`, then pass "
                        "`worker_init_fn=worker_init_fn` to the `DataLoader`";
                    return true;
                  });
        return;
      }
    }
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(MissingWorkerInitFn, "TL004")

}  // namespace torchleak::python
