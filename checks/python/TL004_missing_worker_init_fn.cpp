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
// The dataset class usually lives in another file than the DataLoader, so the
// work is split in two:
//  - collect: every file records, per class, per method and per module-level
//    function, what its code reads (self attributes, module-level names,
//    imported names, methods it calls, numpy's global RNG) and which
//    attributes and module-level names hold generators or other objects.
//  - check: each DataLoader call that starts workers without a
//    worker_init_fn is deferred with the dataset's class and constructor
//    arguments; once every file's facts are in, the resolver follows the
//    dataset's `__getitem__` / `__iter__` through methods, base classes,
//    helper functions and transform objects, looking for a generator that is
//    drawn from but never re-created or re-seeded inside the worker.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <string>
#include <vector>

#include "checks/python/check.h"
#include "python/fold.h"
#include "core/project_index.h"

namespace torchleak::python {

namespace {

// ---------------------------------------------------------------------------
// Vocabulary.

constexpr char kSep = '\x1f';  // separates the fields of a fact value

// rng-class values: def<method> for each method, bound<attr> for each
// attribute assigned in a method, attr<attr><ValueRef> for what it holds,
// default<parameter><ValueRef> for what __init__'s defaults hold.
constexpr std::string_view kClassFact = "rng-class";        // key: class name
constexpr std::string_view kMethodFact = "rng-method";      // key: "Class.method"
constexpr std::string_view kFunctionFact = "rng-function";  // key: module-level function name
constexpr std::string_view kGlobalFact = "rng-global";      // key: module-level variable name

// The kinds of generator objects, as written in facts.
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

std::string module_of(std::string_view qualified) {
  auto dot = qualified.rfind('.');
  return dot == std::string_view::npos ? std::string() : std::string(qualified.substr(0, dot));
}

// A field never contains the separator, even when source text does.
void append_field(std::string& out, std::string_view field) {
  size_t at = out.size();
  out.append(field);
  if (field.find(kSep) != std::string_view::npos) std::replace(out.begin() + static_cast<std::ptrdiff_t>(at), out.end(), kSep, ' ');
}

// Into a buffer the caller reuses: most values a function's reads encode
// are already recorded, and looking them up needs no new string.
void encode_into(std::string& out, std::initializer_list<std::string_view> fields) {
  out.clear();
  bool first = true;
  for (auto f : fields) {
    if (!first) out += kSep;
    first = false;
    append_field(out, f);
  }
}

std::string encode(std::initializer_list<std::string_view> fields) {
  std::string out;
  encode_into(out, fields);
  return out;
}

// Whether the source text of an expression may hold a name: an identifier
// outside string literals and comments, other than True, False and None.
// The values ValueCollector records all start from a name, so a table of
// numbers and plain strings (thousands of nodes to visit) holds none.
// Anything this scan does not follow exactly (an f-string, which may hold
// expressions, a keyword, a non-ASCII byte, an unterminated string) counts
// as a name; the caller also skips it on a tree with parse errors.
bool may_hold_name(std::string_view t) {
  auto string_prefix = [](std::string_view w) {  // not f or t: those strings may hold expressions
    if (w.empty() || w.size() > 2) return false;
    std::string lower;
    for (char ch : w) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return lower == "r" || lower == "u" || lower == "b" || lower == "br" || lower == "rb";
  };
  size_t i = 0, n = t.size();
  while (i < n) {
    char c = t[i];
    if (c == '#') {
      i = t.find('\n', i);
      if (i == std::string_view::npos) return false;
    } else if (c == '"' || c == '\'') {
      bool triple = i + 2 < n && t[i + 1] == c && t[i + 2] == c;
      size_t j = i + (triple ? 3 : 1);
      while (true) {
        if (j >= n) return true;
        if (t[j] == '\\') {
          j += 2;
        } else if (t[j] == c && (!triple || (j + 2 < n && t[j + 1] == c && t[j + 2] == c))) {
          i = j + (triple ? 3 : 1);
          break;
        } else if (t[j] == '\n' && !triple) {
          return true;
        } else {
          ++j;
        }
      }
    } else if (c >= '0' && c <= '9') {
      while (i < n && (word_byte(t[i]) || t[i] == '.')) ++i;  // 0x1F, 1e5, 2j, 1_000, 1.5
    } else if (word_byte(c)) {
      size_t start = i;
      while (i < n && word_byte(t[i])) ++i;
      std::string_view w = t.substr(start, i - start);
      if (i < n && (t[i] == '"' || t[i] == '\'')) {
        if (!string_prefix(w)) return true;
      } else if (w != "True" && w != "False" && w != "None") {
        return true;
      }
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      return true;
    } else {
      ++i;
    }
  }
  return false;
}

uint32_t to_line(std::string_view s) {
  uint32_t n = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9' || n > 100'000'000) return 0;
    n = n * 10 + static_cast<uint32_t>(ch - '0');
  }
  return n;
}

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(kSep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    out.emplace_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// One line of source, for messages: the text of `n` if it fits on a line.
std::string one_line(const Model& m, TSNode n) {
  std::string_view t = m.text(n);
  if (t.find('\n') != std::string_view::npos || t.size() > 100) return {};
  return std::string(t);
}

// ---------------------------------------------------------------------------
// Where a value comes from: a generator constructor, an object of some class,
// a module-level name or function (resolved through the index), or a
// constructor parameter (resolved against the arguments at the DataLoader).

struct ValueRef {
  char kind = 0;  // 'G' generator, 'C' object of a class, 'R' name, 'P' parameter
  // G: generator kind, display text, line, constructor text, where created,
  //    path from the holder ("" the value itself, "?" somewhere inside it)
  // C: qualified class, path from the holder ("" the value itself, "?" unknown),
  //    the arguments given ("#0,#1,name"; "*" when a splat hides them)
  // R: qualified name
  // P: parameter name, index (without self), "1" when the value is the parameter itself
  std::array<std::string, 6> f;

  std::string encoded() const {
    std::string out(1, kind);
    for (const auto& x : f) {
      out += kSep;
      append_field(out, x);
    }
    return out;
  }
  static std::optional<ValueRef> decode(const std::vector<std::string>& parts, size_t from) {
    if (parts.size() < from + 7 || parts[from].size() != 1) return std::nullopt;
    ValueRef r;
    r.kind = parts[from][0];
    for (size_t i = 0; i < r.f.size(); ++i) r.f[i] = parts[from + 1 + i];
    return r;
  }
};

// Per-file lookups the collectors share, built once: the model answers these
// questions by scanning, which is too slow when asked for every name read.
// Built for every file, so kept to a few flat arrays.
class FileIndex {
 public:
  // Everything the collectors ask about one name, found with one lookup.
  struct Name {
    std::string_view text;
    const Binding* module = nullptr;  // the last module-level binding (not in a class body)
    bool module_function = false;     // a module-level def
    // The functions binding it other than by `global` (only for a name the
    // module binds), and those declaring it `global`: ranges of binders_ and
    // globals_, sorted.
    uint32_t binders_begin = 0, binders_end = 0;
    uint32_t globals_begin = 0, globals_end = 0;
  };

  explicit FileIndex(const Model& m) : m_(m) {
    const auto& fns = m.functions();
    std::vector<int> root(fns.size());
    has_globals_.resize(fns.size());
    ids_.reserve(fns.size() + m.bindings().size() / 4);
    for (size_t i = 0; i < fns.size(); ++i) {
      int r = static_cast<int>(i);
      while (fns[r].cls < 0 && fns[r].parent >= 0) r = fns[r].parent;
      root[i] = r;
      if (fns[i].parent < 0 && fns[i].cls < 0) names_[intern(fns[i].name)].module_function = true;
    }
    for (const Class& c : m.classes()) {
      TSNode body = field(c.node, "body");
      class_bodies_.push_back({start_byte(body), end_byte(body)});
    }
    class_body_bindings_.resize(m.classes().size());
    std::vector<char> functions_with_classes(fns.size() + 1);  // by function + 1
    for (const Class& c : m.classes()) functions_with_classes[static_cast<size_t>(c.function + 1)] = 1;
    std::vector<std::pair<uint32_t, int>> binders, globals;  // name id, function
    root_bindings_start_.assign(fns.size() + 1, 0);
    for (const Binding& b : m.bindings()) {
      int cls = functions_with_classes[static_cast<size_t>(b.function + 1)] ? class_body_of(b.start, b.function) : -1;
      if (cls >= 0) class_body_bindings_[cls].push_back(&b);
      if (b.function >= 0) {
        if (b.kind == BindingKind::Global) {
          globals.push_back({intern(b.name), b.function});
          has_globals_[b.function] = 1;
        }
        ++root_bindings_start_[static_cast<size_t>(root[b.function]) + 1];
        continue;
      }
      if (cls >= 0 || b.kind == BindingKind::Global || b.kind == BindingKind::SubscriptStore) continue;
      const Binding*& last = names_[intern(b.name)].module;
      if (!last || b.start > last->start) last = &b;
    }
    for (const Name& name : names_)
      if (name.module || name.module_function) module_names_.add(name.text);
    // Which functions bind a name matters only for the names the module
    // binds: a local shadowing one of them. The others are not looked up.
    for (const Binding& b : m.bindings()) {
      if (b.function < 0 || b.kind == BindingKind::Global || !module_names_.may_hold(b.name)) continue;
      auto it = ids_.find(std::string_view(b.name));
      if (it == ids_.end()) continue;
      const Name& name = names_[it->second];
      if (name.module || name.module_function) binders.push_back({it->second, b.function});
    }
    ranges(binders, binders_, &Name::binders_begin, &Name::binders_end);
    ranges(globals, globals_, &Name::globals_begin, &Name::globals_end);
    // Each root's bindings and calls, in the model's order, by counting.
    for (size_t i = 0; i < fns.size(); ++i) root_bindings_start_[i + 1] += root_bindings_start_[i];
    root_bindings_.resize(root_bindings_start_.back());
    std::vector<uint32_t> next(root_bindings_start_.begin(), root_bindings_start_.end() - 1);
    for (const Binding& b : m.bindings())
      if (b.function >= 0) root_bindings_[next[static_cast<size_t>(root[b.function])]++] = &b;
    root_calls_start_.assign(fns.size() + 1, 0);
    for (const Call& c : m.calls())
      if (c.function >= 0) ++root_calls_start_[static_cast<size_t>(root[c.function]) + 1];
    for (size_t i = 0; i < fns.size(); ++i) root_calls_start_[i + 1] += root_calls_start_[i];
    root_calls_.resize(root_calls_start_.back());
    next.assign(root_calls_start_.begin(), root_calls_start_.end() - 1);
    for (const Call& c : m.calls())
      if (c.function >= 0) root_calls_[next[static_cast<size_t>(root[c.function])]++] = &c;
  }

  // Whether `name` may be one the module binds (a module-level binding or
  // def): false for most locals and builtins, without hashing the name.
  bool may_be_module_name(std::string_view name) const { return module_names_.may_hold(name); }
  // What the file binds under `name`, or null when it never binds it.
  // (Which functions bind it is known only for the names the module binds.)
  const Name* name(std::string_view name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? nullptr : &names_[it->second];
  }
  // Module-level bindings (not in a class body): the last one of each name,
  // in no particular order.
  template <class F>
  void for_each_module_binding(F&& f) const {
    for (const Name& name : names_)
      if (name.module) f(name.module);
  }
  // Bindings directly in the body of class `cls` (class attributes).
  const std::vector<const Binding*>& class_body_bindings(int cls) const { return class_body_bindings_[cls]; }
  // The module-level binding of `name` (not one in a class body), if any.
  const Binding* module_binding(std::string_view name) const {
    const Name* n = this->name(name);
    return n ? n->module : nullptr;
  }
  bool is_module_function(std::string_view name) const {
    const Name* n = this->name(name);
    return n && n->module_function;
  }
  // Whether `function` itself binds `name` (a local, a parameter, an import),
  // other than through `global name`.
  bool binds(const Name& name, int function) const {
    return function >= 0 && has(binders_, name.binders_begin, name.binders_end, function) &&
           !has(globals_, name.globals_begin, name.globals_end, function);
  }
  bool binds_anywhere(const Name& name) const { return name.binders_begin != name.binders_end; }
  bool declares_global(int function, std::string_view name) const {
    if (function < 0 || !has_globals_[function]) return false;
    const Name* n = this->name(name);
    return n && has(globals_, n->globals_begin, n->globals_end, function);
  }
  // Bindings and calls of a method or module-level function and the
  // functions nested in it.
  std::span<const Binding* const> bindings_of_root(int function) const {
    return std::span<const Binding* const>(root_bindings_).subspan(
        root_bindings_start_[function], root_bindings_start_[function + 1] - root_bindings_start_[function]);
  }
  std::span<const Call* const> calls_of_root(int function) const {
    return std::span<const Call* const>(root_calls_).subspan(
        root_calls_start_[function], root_calls_start_[function + 1] - root_calls_start_[function]);
  }

  // The innermost class whose body (not a method) directly holds `byte`.
  int class_body_of(uint32_t byte, int function) const {
    int best = -1;
    for (size_t i = 0; i < class_bodies_.size(); ++i) {
      if (m_.classes()[i].function != function) continue;
      if (class_bodies_[i].first <= byte && byte < class_bodies_[i].second) best = static_cast<int>(i);
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
  uint32_t intern(std::string_view name) {
    auto [it, fresh] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (fresh) names_.emplace_back().text = name;
    return it->second;
  }
  // Sorts (name, function) pairs into `out` and gives each name its range.
  void ranges(std::vector<std::pair<uint32_t, int>>& pairs, std::vector<int>& out, uint32_t Name::*begin,
              uint32_t Name::*end) {
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    out.reserve(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      Name& name = names_[pairs[i].first];
      if (i == 0 || pairs[i - 1].first != pairs[i].first) name.*begin = static_cast<uint32_t>(i);
      name.*end = static_cast<uint32_t>(i + 1);
      out.push_back(pairs[i].second);
    }
  }
  static bool has(const std::vector<int>& list, uint32_t begin, uint32_t end, int function) {
    return std::binary_search(list.begin() + begin, list.begin() + end, function);
  }

  // A filter on names: a bit for each (length, first, last character) seen.
  class NameFilter {
   public:
    void add(std::string_view name) { bits_[bit(name) / 64] |= uint64_t{1} << (bit(name) % 64); }
    bool may_hold(std::string_view name) const { return bits_[bit(name) / 64] >> (bit(name) % 64) & 1; }

   private:
    static size_t bit(std::string_view name) {
      if (name.empty()) return 0;
      return (name.size() * 131 + static_cast<unsigned char>(name.front()) * 31 +
              static_cast<unsigned char>(name.back())) % 1024;
    }
    std::array<uint64_t, 16> bits_{};
  };

  const Model& m_;
  NameFilter module_names_;  // the names with a module-level binding or def
  std::vector<char> has_globals_;  // by function: whether it declares any name `global`
  // Keys view the names held by the model's bindings and functions.
  std::unordered_map<std::string_view, uint32_t> ids_;
  std::vector<Name> names_;  // by id
  std::vector<int> binders_, globals_;
  std::vector<const Binding*> root_bindings_;  // grouped by root function
  std::vector<uint32_t> root_bindings_start_;  // by root function, and one past the last
  std::vector<const Call*> root_calls_;
  std::vector<uint32_t> root_calls_start_;
  std::vector<std::pair<uint32_t, uint32_t>> class_bodies_;
  std::vector<std::vector<const Binding*>> class_body_bindings_;
};

class ValueCollector {
 public:
  // `init` is the function whose parameters count as constructor parameters.
  // `owner` is the class whose facts are being collected (-1 at a
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
        std::string_view head_name = m_.text(expr);
        if (plain_dotted_name(head_name)) {
          head_name = head_name.substr(0, head_name.find('.'));
        } else {
          TSNode head = expr;
          while (kind_of(head) == Kind::Attribute) head = unparenthesize(field(head, "object"));
          if (kind_of(head) != Kind::Identifier) return;
          head_name = m_.text(head);
        }
        const Binding* b = file_.module_binding(head_name);
        if (!b || b->kind != BindingKind::Import) return;
        if (std::string q = m_.qualify(expr); !q.empty()) out.push_back({'R', {std::move(q)}});
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
        if (!may_hold_name(expr)) return;
        for_each_named_child(expr, [&](TSNode c) { collect(c, "?", out, depth + 1); });
        return;
      default:
        if (kind_of(expr) == Kind::Other && may_hold_name(expr))  // a dictionary pair, a splat: look inside
          for_each_named_child(expr, [&](TSNode c) { collect(c, "?", out, depth + 1); });
        return;
    }
  }

 private:
  void call(TSNode expr, std::string path, std::vector<ValueRef>& out, int depth) const {
    TSNode func = unparenthesize(call_function(expr));
    // torch.Generator().manual_seed(0) returns the generator it seeds.
    if (kind_of(func) == Kind::Attribute && ends_with_reseed(m_.text(func)) &&
        kind_of(unparenthesize(field(func, "object"))) == Kind::Call &&
        one_of(m_.text(field(func, "attribute")), kReseedMethods)) {
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
      std::string display = one_line(m_, shown);
      if (display.empty()) display = one_line(m_, expr);
      if (display.empty()) display = std::string(m_.text(func)) + "(...)";
      out.push_back({'G',
                     {std::string(kind), display, std::to_string(m_.position(expr).line),
                      std::string(m_.text(func)), file_.where_created(expr), path}});
      return;
    }
    TSNode args = call_arguments(expr);
    if (!callee.empty() && capitalized(callee)) {
      // The object first, then what its arguments hold, in one pass over them.
      size_t object = out.size();
      out.push_back({'C', {callee, path, ""}});
      // The arguments given, as "#0,#1,name", or "*" when a splat hides them.
      std::string keys;
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
          if (!keys.empty()) keys += ',';
          if (k == Kind::KeywordArgument) {
            keys += m_.text(keyword_name(a));
          } else {
            keys += '#';
            keys += std::to_string(position++);
          }
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
      out[object].f[2] = splat ? "*" : std::move(keys);
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
    if (!may_hold_name(args)) return;
    for_each_named_child(args, [&](TSNode a) {
      if (kind_of(a) == Kind::KeywordArgument) a = keyword_value(a);
      collect(a, "?", out, depth + 1);
    });
  }

  // Whether `text` ends with the name of a method that re-seeds a generator
  // (a quick test before looking for the attribute in the tree).
  static bool ends_with_reseed(std::string_view text) {
    return std::any_of(kReseedMethods.begin(), kReseedMethods.end(),
                       [&](std::string_view m) { return ends_with(text, m); });
  }

  // The values recorded all start from a name: a table of constants holds
  // none, and scanning its text is cheaper than visiting its nodes.
  bool may_hold_name(TSNode n) const {
    return is_null(n) || ts_node_has_error(n) || torchleak::python::may_hold_name(m_.text(n));
  }

  void identifier(TSNode expr, const std::string& path, std::vector<ValueRef>& out, int depth) const {
    std::string_view name = m_.text(expr);
    if (init_) {
      const auto& params = init_->params;
      auto it = std::find(params.begin(), params.end(), name);
      if (it != params.end() && it != params.begin()) {
        out.push_back({'P', {std::string(name), std::to_string(it - params.begin() - 1), path.empty() ? "1" : "0"}});
        return;
      }
    }
    // At module level reaching() can only give a module-level binding: the
    // lookup below answers that.
    if (int fn = m_.function_at(start_byte(expr)); fn >= 0) {
      const Binding* b = m_.reaching(name, start_byte(expr), fn);
      if (b && b->function >= 0) {
        if ((b->kind == BindingKind::Assign || b->kind == BindingKind::NamedExpr) && b->element < 0 &&
            !is_null(b->value))
          collect(b->value, path, out, depth + 1);
        else if (b->kind == BindingKind::Parameter)
          parameter(*b, path, out, depth);
        return;
      }
    }
    // Module level: an assignment, a function or an import, resolved through
    // the index (the name may be defined in this file or imported).
    const FileIndex::Name* n = file_.name(name);
    if (!n) return;
    if (const Binding* g = n->module) {
      if (g->kind == BindingKind::Import) {
        std::string q = m_.resolve_alias(name);
        if (q.find('.') != std::string::npos) out.push_back({'R', {std::move(q)}});
        return;
      }
      out.push_back({'R', {std::string(name)}});
      return;
    }
    if (n->module_function) out.push_back({'R', {std::string(name)}});
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
// What one method or module-level function reads, as fact values:
//   self<attr><method called on it, or "">   a read of self.<attr>
//   reseed<attr>                             self.<attr> re-created or re-seeded here
//   reseedglobal<name>                       a module-level name of this file re-created
//                                            (`global name; name = ...`) or re-seeded here
//   callself<method>  super<method>          self.m(...), super().m(...)
//   ref<qualified>                           a module-level or imported name
//   numpy<line><text>                        a draw from numpy's global RNG

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

  std::vector<std::string> run() {
    writes();
    calls();
    walk();
    return std::move(out_);
  }

 private:
  // Records the value encoded in buf_, once. Most functions record a few
  // values: a scan of them is cheaper than hashing.
  void add() {
    constexpr size_t kScan = 16;
    if (out_.size() < kScan) {
      if (std::find(out_.begin(), out_.end(), buf_) != out_.end()) return;
      out_.push_back(buf_);
      if (out_.size() == kScan) seen_.insert(out_.begin(), out_.end());
      return;
    }
    if (seen_.find(std::string_view(buf_)) != seen_.end()) return;
    seen_.insert(buf_);
    out_.push_back(buf_);
  }
  void add(std::initializer_list<std::string_view> fields) {
    encode_into(buf_, fields);
    add();
  }

  // self.<attr> = ... (or self.<attr>.x.y = ...) anywhere in the function.
  void writes() {
    for (const Binding* bp : file_.bindings_of_root(index_)) {
      const Binding& b = *bp;
      if (b.kind == BindingKind::SubscriptStore || b.kind == BindingKind::Parameter) continue;
      TSNode target = unparenthesize(b.target);
      if (kind_of(target) == Kind::Attribute) targets_.insert(start_byte(target));
      std::string_view attr = self_attribute(b.name);
      if (!attr.empty()) add({"reseed", attr});
      if (b.kind != BindingKind::Global && file_.declares_global(b.function, b.name)) add({"reseedglobal", b.name});
    }
  }

  void calls() {
    for (const Call* cp : file_.calls_of_root(index_)) {
      const Call& c = *cp;
      if (!c.method.empty() && !is_null(c.receiver)) {
        TSNode recv = unparenthesize(c.receiver);
        Kind rk = kind_of(recv);
        if (!self_.empty() && rk == Kind::Identifier && m_.text(recv) == self_) {
          add({"callself", c.method});
        } else if (rk == Kind::Call && m_.qualify(unparenthesize(field(recv, "function"))) == "super") {
          add({"super", c.method});
        } else if (one_of(std::string_view(c.method), kReseedMethods)) {
          std::string q = m_.qualify(recv);
          std::string_view attr = self_attribute(q);
          // self.<attr> itself, not self.<attr>.more
          if (!attr.empty() && q.size() == self_.size() + 1 + attr.size()) add({"reseed", attr});
          if (rk == Kind::Identifier) {
            std::string_view name = m_.text(recv);
            const FileIndex::Name* n = file_.name(name);
            if (n && n->module && !bound_locally(*n, c.function)) add({"reseedglobal", name});
          }
        }
      }
      if (starts_with(c.callee, "numpy.random.") && c.callee.rfind('.') == 12 &&
          one_of(last_component(c.callee), kNumpyGlobalDraws))
        add({"numpy", std::to_string(m_.position(c.node).line), m_.text(c.func)});
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
    std::pair<std::string_view, std::string_view> read{attr, method};
    auto end = self_reads_.begin() + self_reads_count_;
    if (std::find(self_reads_.begin(), end, read) != end) return;
    if (self_reads_count_ < self_reads_.size()) self_reads_[self_reads_count_++] = read;
    add({"self", attr, method});
  }

  void identifier(TSNode n, TSNode parent, int function) {
    // References hold neither an attribute's name nor a keyword argument's.
    std::string_view name = m_.text(n);
    // Not bound at module level (a local, a builtin, a name from a star
    // import): nothing to record.
    if (name == self_ || !file_.may_be_module_name(name)) return;
    const FileIndex::Name* info = file_.name(name);
    if (!info || (!info->module && !info->module_function)) return;
    // A name read again whose value was recorded already: the same value.
    if (std::find(recorded_.begin(), recorded_.begin() + recorded_count_, info) != recorded_.begin() + recorded_count_)
      return;
    if (bound_locally(*info, function)) return;
    bool same_everywhere = true;  // whether any other read of the name records the same
    auto record = [&](std::initializer_list<std::string_view> fields) {
      add(fields);
      if (same_everywhere && recorded_count_ < recorded_.size()) recorded_[recorded_count_++] = info;
    };
    if (const Binding* b = info->module) {
      if (b->kind == BindingKind::Import) {
        std::string q = m_.resolve_alias(name);
        // `import augment` then `augment.jitter(...)`: the dotted name.
        // (The name is the attribute's object: qualify(parent) is q.NAME.)
        if (q.find('.') == std::string::npos) {
          same_everywhere = false;
          if (kind_of(parent) == Kind::Attribute) {
            q += '.';
            q += m_.text(attribute_name(parent));
          }
        }
        if (q.find('.') != std::string::npos) record({"ref", q});
        return;
      }
      if (b->kind == BindingKind::Assign || b->kind == BindingKind::NamedExpr) record({"ref", name});
      return;
    }
    if (info->module_function) record({"ref", name});
  }

  // Bound in the function holding the use or in one enclosing it, up to
  // this method or function.
  bool bound_locally(const FileIndex::Name& name, int function) const {
    if (!file_.binds_anywhere(name)) return false;
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
  std::vector<std::string> out_;
  NameSet seen_;     // the values in out_, once it holds more than a few
  std::string buf_;  // the value being recorded
  // Module-level names whose read recorded a value that every read of the
  // name records (when not shadowed by a local).
  std::array<const FileIndex::Name*, 32> recorded_;
  size_t recorded_count_ = 0;
  // The first `self.X` reads recorded, as (X, method) in the source text.
  std::array<std::pair<std::string_view, std::string_view>, 32> self_reads_;
  size_t self_reads_count_ = 0;
  std::unordered_set<uint32_t> targets_;  // start bytes of attribute targets
};

// ---------------------------------------------------------------------------
// The second phase: from a dataset class to the generators its workers draw
// from.

// Constructor arguments: "#0", "#1", ... by position, and keyword names.
using Args = std::map<std::string, std::vector<ValueRef>>;

struct SiteDataset {
  std::string qualified;  // the class, as named at the DataLoader's file
  std::string path;       // from `info.dataset` to it: "", ".dataset", ".datasets[1]"
  Args args;
  bool args_known = true;  // false when a splat hides some
};

struct Candidate {
  std::string kind;  // one of the generator kinds
  std::string display;
  std::string file;
  uint32_t line = 0;
  std::string ctor;    // the constructor as written: "np.random.default_rng"
  std::string where;   // "in `NoisyDataset.__init__`", "at module level"
  std::string target;  // how a worker_init_fn reaches it, "" when unknown
  std::string holder;  // the class holding it ("" for a module-level variable)
  std::string attr;    // the attribute or variable name
  std::string via;     // the transform class it was reached through, if not the dataset
};

struct NumpyUse {
  std::string file;
  uint32_t line = 0;
  std::string text;
};

// Whether `file` is where `module` (a dotted import path) lives: a module file,
// a package's __init__, or a module inside the package (a re-export).
bool module_matches(std::string_view module, std::string_view file) {
  std::string path(file);
  std::replace(path.begin(), path.end(), '\\', '/');
  for (std::string_view ext : {".pyi", ".py"})
    if (ends_with(path, ext)) {
      path.resize(path.size() - ext.size());
      break;
    }
  std::string mod(module);
  std::replace(mod.begin(), mod.end(), '.', '/');
  auto at_boundary = [&](std::string_view p, std::string_view suffix) {
    return ends_with(p, suffix) && (p.size() == suffix.size() || p[p.size() - suffix.size() - 1] == '/');
  };
  if (at_boundary(path, mod)) return true;
  if (ends_with(path, "/__init__") && at_boundary(std::string_view(path).substr(0, path.size() - 9), mod)) return true;
  auto slash = path.rfind('/');
  return slash != std::string::npos && at_boundary(std::string_view(path).substr(0, slash), mod);
}

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
  Resolver(const ProjectIndex& index, std::string site_file) : index_(index), site_(std::move(site_file)) {}

  std::vector<Candidate> candidates;
  std::optional<NumpyUse> numpy;

  const Fact* find(std::string_view kind, std::string_view qualified, std::string_view from_file) const {
    std::string module = module_of(qualified);
    for (const Fact* f : index_.find(kind, last_component(qualified))) {
      if (module.empty() ? f->file == from_file : module_matches(module, f->file)) return f;
    }
    return nullptr;
  }

  void dataset(const SiteDataset& d) {
    const Fact* cls = find(kClassFact, d.qualified, site_);
    if (!cls) return;
    object(cls, kDatasetEntries, "info.dataset" + d.path, d.args_known ? &d.args : nullptr, "");
    // A module-level generator that a worker re-creates or re-seeds itself.
    std::erase_if(candidates, [&](const Candidate& c) {
      return c.holder.empty() && reseeded_globals_.count(encode({c.file, c.attr}));
    });
  }

 private:
  struct Work {
    const Fact* fact;       // rng-method or rng-function
    const Fact* def_class;  // the class defining the method, null for a function
  };

  // A worker calls `entries` on an object of class `cls`; `path` is how a
  // worker_init_fn reaches that object ("" when unknown).
  void object(const Fact* cls, const std::vector<std::string>& entries, const std::string& path,
              const Args* args, const std::string& via) {
    if (!cls || ++objects_ > 64 || !active_.insert(cls).second) return;
    std::vector<Work> work;
    std::set<const Fact*> visited;
    std::map<std::string, std::vector<std::string>> used;  // attr -> methods called on it
    std::vector<std::string> used_order;
    std::set<std::string> reseeded;
    auto push_method = [&](const Fact* def, const std::string& method) {
      if (!def) return;
      for (const Fact* f : index_.find(kMethodFact, def->key + "." + method))
        if (f->file == def->file && visited.insert(f).second) work.push_back({f, def});
    };
    for (const auto& e : entries) push_method(defining(cls, e), e);
    auto drain = [&]() {
      for (size_t i = 0; i < work.size(); ++i) {
        Work w = work[i];
        for (const auto& v : w.fact->values) {
          auto parts = split(v);
          const std::string& tag = parts[0];
          if (tag == "self" && parts.size() == 3 && w.def_class) {
            if (!used.count(parts[1])) used_order.push_back(parts[1]);
            used[parts[1]].push_back(parts[2]);
          } else if (tag == "reseed" && parts.size() == 2) {
            reseeded.insert(parts[1]);
          } else if (tag == "reseedglobal" && parts.size() == 2) {
            reseeded_globals_.insert(encode({w.fact->file, parts[1]}));
          } else if (tag == "callself" && parts.size() == 2 && w.def_class) {
            push_method(defining(cls, parts[1]), parts[1]);
          } else if (tag == "super" && parts.size() == 2 && w.def_class) {
            for (const Fact* base : bases(w.def_class)) {
              if (const Fact* def = defining(base, parts[1])) {
                push_method(def, parts[1]);
                break;
              }
            }
          } else if (tag == "ref" && parts.size() == 2) {
            reference(parts[1], w.fact->file, work, visited, via);
          } else if (tag == "numpy" && parts.size() == 3 && !numpy) {
            numpy = NumpyUse{w.fact->file, to_line(parts[1]), parts[2]};
          }
        }
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
      for (const ValueRef& r : refs) {
        std::string attr_path = path.empty() ? "" : path + "." + attr;
        // Constructor arguments match the parameters of the class that was
        // constructed by position, and an inherited __init__'s by name.
        value(r, holder, holder->file, attr_path, methods, args, holder == cls, cls->key, attr, via, work, visited);
      }
    }
    drain();
    active_.erase(cls);
  }

  // A value held in `attr` (or a module-level variable), read by a worker.
  // `defined_in` is the class whose attribute binding gave `r`, if any: its
  // __init__'s parameter defaults apply when the argument was not passed.
  void value(const ValueRef& r, const Fact* defined_in, const std::string& file, const std::string& path,
             const std::vector<std::string>& methods, const Args* args,
             bool by_position, const std::string& holder,
             const std::string& attr, const std::string& via, std::vector<Work>& work,
             std::set<const Fact*>& visited) {
    switch (r.kind) {
      case 'G': {
        bool draws = methods.empty() || std::any_of(methods.begin(), methods.end(), [](const std::string& m) {
                       return !one_of(std::string_view(m), kNonDrawMethods);
                     });
        if (!draws) return;
        Candidate c;
        c.kind = r.f[0];
        c.display = r.f[1];
        c.file = file;
        c.line = to_line(r.f[2]);
        c.ctor = r.f[3];
        c.where = r.f[4];
        c.target = r.f[5].empty() ? path : "";
        c.holder = holder;
        c.attr = attr;
        c.via = via;
        candidates.push_back(std::move(c));
        return;
      }
      case 'C': {
        std::vector<std::string> entries;
        for (const auto& m : methods)
          if (!m.empty()) entries.push_back(m);
        if (entries.empty() || std::find(methods.begin(), methods.end(), "") != methods.end())
          entries.insert(entries.end(), kCallableEntries.begin(), kCallableEntries.end());
        std::string sub = path.empty() || r.f[1] == "?" ? "" : path + r.f[1];
        // Which arguments were given (their values were collected as refs
        // of their own): the parameters not given hold their defaults.
        std::optional<Args> given;
        if (r.f[2] != "*") {
          given.emplace();
          for (const auto& key : split_list(r.f[2])) (*given)[key];
        }
        object(find(kClassFact, r.f[0], file), entries, sub, given ? &*given : nullptr,
               std::string(last_component(r.f[0])));
        return;
      }
      case 'R':
        reference(r.f[0], file, work, visited, via);
        return;
      case 'P': {
        if (!args) return;  // the constructor call is not known
        std::string sub = r.f[2] == "1" ? path : "";
        auto given = args->find(r.f[0]);
        if (given == args->end() && by_position) given = args->find("#" + r.f[1]);
        if (given != args->end()) {
          for (const ValueRef& g : given->second)
            value(g, nullptr, site_, sub, methods, nullptr, false, holder, attr, via, work, visited);
          return;
        }
        // Not passed: the default, evaluated once when `def __init__` ran.
        if (!defined_in) return;
        for (const auto& v : defined_in->values) {
          auto parts = split(v);
          if (parts.size() < 3 || parts[0] != "default" || parts[1] != r.f[0]) continue;
          if (auto d = ValueRef::decode(parts, 2))
            value(*d, nullptr, defined_in->file, sub, methods, nullptr, false, holder, attr, via, work, visited);
        }
        return;
      }
      default: return;
    }
  }

  // A module-level or imported name read by a worker: a helper function to
  // follow, or a variable holding a generator or an object.
  void reference(const std::string& qualified, const std::string& from_file, std::vector<Work>& work,
                 std::set<const Fact*>& visited, const std::string& via) {
    if (++references_ > 256) return;
    if (const Fact* f = find(kFunctionFact, qualified, from_file); f && visited.insert(f).second)
      work.push_back({f, nullptr});
    const Fact* g = find(kGlobalFact, qualified, from_file);
    if (!g || !visited.insert(g).second) return;
    std::string stem = module_stem(g->file);
    std::string path = g->file == site_ ? g->key : stem + "." + g->key;
    for (const auto& v : g->values) {
      auto ref = ValueRef::decode(split(v), 0);
      if (!ref) continue;
      value(*ref, nullptr, g->file, path, {""}, nullptr, false, "", g->key, via, work, visited);
    }
  }

  // Bases of a class, as their rng-class facts.
  std::vector<const Fact*> bases(const Fact* cls) const {
    std::vector<const Fact*> out;
    for (const Fact* f : index_.find("class", cls->key)) {
      if (f->file != cls->file || f->line != cls->line) continue;
      for (const auto& b : f->values)
        if (const Fact* base = find(kClassFact, b, cls->file)) out.push_back(base);
    }
    return out;
  }

  // The class defining `method` for an object of class `cls` (depth-first,
  // bases in order), or null.
  const Fact* defining(const Fact* cls, const std::string& method, int depth = 0) const {
    if (!cls || depth > 16) return nullptr;
    for (const auto& v : cls->values)
      if (v == encode({"def", method})) return cls;
    for (const Fact* base : bases(cls))
      if (const Fact* d = defining(base, method, depth + 1)) return d;
    return nullptr;
  }

  // What `attr` holds on an object of class `cls`: the bindings of the first
  // class in its hierarchy that assigns it (null when none does).
  std::pair<const Fact*, std::vector<ValueRef>> attribute(const Fact* cls, const std::string& attr,
                                                          int depth = 0) const {
    if (!cls || depth > 16) return {nullptr, {}};
    std::vector<ValueRef> refs;
    bool bound = false;
    for (const auto& v : cls->values) {
      auto parts = split(v);
      if (parts.size() < 2 || parts[1] != attr) continue;
      if (parts[0] == "bound") bound = true;
      if (parts[0] != "attr") continue;
      bound = true;
      if (auto r = ValueRef::decode(parts, 2)) refs.push_back(*r);
    }
    if (bound) return {cls, refs};
    for (const Fact* base : bases(cls)) {
      auto found = attribute(base, attr, depth + 1);
      if (found.first) return found;
    }
    return {nullptr, {}};
  }

  const ProjectIndex& index_;
  std::string site_;
  std::set<const Fact*> active_;
  std::set<std::string> reseeded_globals_;  // file and name
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
  void collect(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    FileIndex file(m);
    collect_globals(ctx, m, file);
    for (size_t ci = 0; ci < m.classes().size(); ++ci) collect_class(ctx, m, file, static_cast<int>(ci));
    for (size_t fi = 0; fi < m.functions().size(); ++fi) {
      const Function& f = m.functions()[fi];
      if (f.parent >= 0 || f.cls >= 0) continue;  // nested functions are read with their enclosing one
      auto reads = FunctionReads(m, file, static_cast<int>(fi)).run();
      if (!reads.empty()) ctx.fact(std::string(kFunctionFact), f.name, f.node, std::move(reads));
    }
  }

  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    std::optional<FileIndex> file;
    for (const Call& c : m.calls()) {
      if (!is_data_loader(c.callee) || has_splat(m, c)) continue;
      TSNode workers = argument(m, c, "num_workers", 5);
      if (is_null(workers)) continue;
      if (no_workers(m, c, workers)) continue;
      TSNode init = argument(m, c, "worker_init_fn", 10);
      if (!is_null(init) && kind_of(unparenthesize(init)) != Kind::None) continue;
      std::vector<SiteDataset> datasets;
      if (!file) file.emplace(m);
      site_datasets(m, *file, argument(m, c, "dataset", 0), "", datasets, 0, loader_workers(m, c, workers));
      if (datasets.empty()) continue;
      // Persistent workers keep their generator across epochs: only the
      // workers replay each other's stream, not the epochs.
      bool persistent = kind_of(unparenthesize(m.keyword_argument(c, "persistent_workers"))) == Kind::True;
      defer(ctx, c, workers, persistent, std::move(datasets));
    }
  }

 private:
  static void collect_globals(CheckContext& ctx, const Model& m, const FileIndex& file) {
    ValueCollector values(m, file, nullptr);
    // In name order, as facts have always been recorded.
    std::vector<const Binding*> sorted;
    file.for_each_module_binding([&](const Binding* b) {
      if (b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value)) sorted.push_back(b);
    });
    std::sort(sorted.begin(), sorted.end(), [](const Binding* a, const Binding* b) { return a->name < b->name; });
    std::vector<ValueRef> refs;
    for (const Binding* b : sorted) {
      refs.clear();
      values.collect(b->value, "", refs);
      std::vector<std::string> encoded;
      for (const auto& r : refs)
        if (r.kind != 'P') encoded.push_back(r.encoded());
      if (!encoded.empty()) ctx.fact(std::string(kGlobalFact), b->name, b->statement, std::move(encoded));
    }
  }

  static void collect_class(CheckContext& ctx, const Model& m, const FileIndex& file, int ci) {
    const Class& c = m.classes()[ci];
    std::vector<std::string> values;
    std::set<std::string> bound;
    const Function* init = m.find_method(ci, "__init__");
    if (init && init->cls != ci) init = nullptr;
    for (int mi : c.methods) {
      const Function& f = m.functions()[mi];
      values.push_back(encode({"def", f.name}));
      auto r = FunctionReads(m, file, mi).run();
      if (!r.empty()) ctx.fact(std::string(kMethodFact), c.name + "." + f.name, f.node, std::move(r));
      // self.<attr> = value anywhere in the method.
      if (f.params.empty()) continue;
      std::string self = f.params[0] + ".";
      ValueCollector collector(m, file, &f == init ? init : nullptr, ci);
      for (const Binding* bp : file.bindings_of_root(mi)) {
        const Binding& b = *bp;
        if (b.kind != BindingKind::Assign && b.kind != BindingKind::NamedExpr) continue;
        if (b.element >= 0 || is_null(b.value) || !starts_with(b.name, self)) continue;
        std::string attr = b.name.substr(self.size());
        if (attr.find('.') != std::string::npos) continue;
        std::vector<ValueRef> refs;
        collector.collect(b.value, "", refs);
        if (bound.insert(attr).second) values.push_back(encode({"bound", attr}));
        for (const auto& ref : refs) values.push_back(encode({"attr", attr}) + kSep + ref.encoded());
      }
    }
    // Defaults of __init__'s parameters: evaluated once, when the class is defined.
    if (init) {
      ValueCollector defaults(m, file, nullptr);
      int init_index = static_cast<int>(init - m.functions().data());
      for (const Binding* b : file.bindings_of_root(init_index)) {
        if (b->kind != BindingKind::Parameter || b->function != init_index || is_null(b->value)) continue;
        std::vector<ValueRef> refs;
        defaults.collect(b->value, "", refs);
        for (const auto& ref : refs) values.push_back(encode({"default", b->name}) + kSep + ref.encoded());
      }
    }
    // Class attributes: `rng = np.random.default_rng(0)` in the class body.
    ValueCollector collector(m, file, nullptr);
    for (const Binding* bp : file.class_body_bindings(ci)) {
      const Binding& b = *bp;
      if (b.kind != BindingKind::Assign || b.element >= 0 || is_null(b.value)) continue;
      if (b.name.find('.') != std::string::npos) continue;
      std::vector<ValueRef> refs;
      collector.collect(b.value, "", refs);
      for (const auto& ref : refs)
        if (ref.kind == 'G') values.push_back(encode({"attr", b.name}) + kSep + ref.encoded());
    }
    ctx.fact(std::string(kClassFact), c.name, c.node, std::move(values));
  }

  static bool has_splat(const Model& m, const Call& c) {
    (void)m;
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
        SiteDataset d{callee, path, {}, true};
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

  static void defer(CheckContext& ctx, const Call& c, TSNode workers, bool persistent,
                    std::vector<SiteDataset> datasets) {
    const Model& m = ctx.model();
    std::string workers_text = fmt::format("num_workers={}", m.text(workers));
    if (workers_text.size() > 60 || workers_text.find('\n') != std::string::npos) workers_text = "num_workers";
    auto [major, minor] = ctx.config().torch_version();
    bool global_numpy_counts = major < 1 || (major == 1 && minor < 9);
    std::string version = fmt::format("{}.{}", major, minor);
    std::string site = ctx.path();
    Diagnostic d = ctx.diagnostic(c.node, "");
    std::string replay = persistent ? "every worker gets a copy of the same generator and replays the same random "
                                      "numbers as the others"
                                    : "every worker gets a copy of the same generator and replays the same random "
                                      "numbers, every epoch";
    ctx.defer(std::move(d), [datasets = std::move(datasets), workers_text, global_numpy_counts, version, site,
                             replay](const ProjectIndex& index, Diagnostic& diag) {
      for (const SiteDataset& ds : datasets) {
        Resolver r(index, site);
        r.dataset(ds);
        std::string dataset(last_component(ds.qualified));
        if (!r.candidates.empty()) {
          const Candidate& g = r.candidates.front();
          std::string through = g.via.empty() ? "" : fmt::format(", through `{}`,", g.via);
          std::string what = g.holder.empty() ? fmt::format("the module-level generator `{}`", g.display)
                                              : fmt::format("`{}`", g.display);
          diag.message = fmt::format(
              "this `DataLoader` starts worker processes (`{}`) without a `worker_init_fn`, and `{}`{} draws "
              "from {} (created once {}, {}): {}",
              workers_text, dataset, through, what, g.where, location(index, g.file, g.line, site), replay);
          diag.help = generator_help(g);
          return true;
        }
        if (global_numpy_counts && r.numpy) {
          std::string where = location(index, r.numpy->file, r.numpy->line, site);
          diag.message = fmt::format(
              "this `DataLoader` starts worker processes (`{}`) without a `worker_init_fn`, and `{}` draws from "
              "numpy's global RNG (`{}`, {}): before PyTorch 1.9 (target-torch-version {}) every worker starts "
              "from the same numpy seed and draws the same numbers",
              workers_text, dataset, r.numpy->text, where, version);
          diag.help =
              "seed numpy in each worker: `def worker_init_fn(worker_id): "
              "np.random.seed(torch.utils.data.get_worker_info().seed % 2**32)`, then pass "
              "`worker_init_fn=worker_init_fn` to the `DataLoader`";
          return true;
        }
      }
      return false;
    });
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(MissingWorkerInitFn, "TL004")

}  // namespace torchleak::python
