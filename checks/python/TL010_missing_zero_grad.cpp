// TL010 missing-zero-grad: a loop runs `.backward()` and an optimizer's
// `.step()` on each iteration, and nothing in the iteration clears the
// gradients, so each step applies the sum of every gradient computed so far.
//
// A finding needs all of:
//   - a `.backward()` (or torch.autograd.backward) call in a loop of the same
//     function, and in that loop (the innermost one that holds both) a
//     `step()` whose receiver is an optimizer (Model::is_optimizer: a
//     torch.optim constructor, the config's extra_optimizers, a conventional
//     name), or `scaler.step(optimizer)`; a scheduler's step() is not one;
//   - nothing in the loop clears gradients, under a condition or not (gradient
//     accumulation clears every k steps): a call whose name says it clears
//     them (`zero_grad`, `clear_grads`, `reset_gradients`), `p.grad = ...`,
//     `p.grad.zero_()`, `del p.grad`, directly or in a function of this file
//     called from the loop (followed a few calls deep), or in a function of
//     another analyzed file (through the project index: each file records,
//     for its module-level functions and methods, whether they clear
//     gradients and which functions of other modules they call; `self.m()`
//     that the class does not define resolves to methods named `m` of other
//     files' classes, its bases among them). A call to a function that no
//     analyzed file defines, whose name speaks of gradients, is taken to
//     clear them: the finding stays silent rather than guess;
//   - the stepped optimizer is not built in the loop over tensors made
//     afresh there, nor over the parameters of a module constructed there
//     (its parameters are new leaves each iteration).
//
// With several optimizers stepped in the loop, each must be cleared: when
// every clearing in the loop is the `zero_grad()` of an optimizer built in
// the same function over one module's `parameters()` (no module's
// zero_grad, no helper, no `p.grad = ...`), an optimizer built the same way
// and stepped in the loop whose own zero_grad and its module's are not among
// them keeps accumulating (a GAN's discriminator optimizer stepped every
// iteration while only the generator's is cleared). An optimizer over
// anything else (a list, a parameter group, an attribute) is taken to be
// cleared by any clearing, and a module's zero_grad() to clear them all.
//
// The finding points at the backward call: that is where gradients are
// added to whatever `.grad` already holds, and where the fix's comment
// belongs in a reader's mind ("clear before you accumulate").
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "checks/python/check.h"
#include "rule_messages.h"
#include "core/project_index.h"

namespace torchleak::python {

namespace {

constexpr int kMaxCallDepth = 4;

// The project-index fact a file records for each of its module-level
// functions that clears gradients (values {"clears"}) or calls functions of
// other modules (values {"calls", qualified callee...}).
constexpr std::string_view kSummaryFact = "clears-gradients";
// Recorded by every analyzed file, keyed by its normal path: a callee whose
// file the engine found but the run did not analyze is not known to clear
// nothing.
constexpr std::string_view kAnalyzedFact = "clears-gradients-file";
// An external callee is "name" or, when the engine knows the file defining
// it, "name<kFileSep>file" (a normal path).
constexpr char kFileSep = '\x1f';

// A file's path however the run spells it (`train.py`, `./train.py`, its
// absolute path): facts are cached and reused by runs that name files
// differently.
std::string normal_path(const std::string& p) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(p, ec);
  return (ec ? std::filesystem::path(p) : absolute).lexically_normal().string();
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// `zero_grad`, `clear_grads`, `reset_gradients`, `zero_gradients`.
bool names_clearing(std::string_view name) {
  if (contains(name, "zero_grad")) return true;
  return contains(name, "grad") && (contains(name, "zero") || contains(name, "clear") || contains(name, "reset"));
}

// What clears_in_range asks of the file for every range it reads, built
// once per file.
struct ClearingIndex {
  // Module-level functions by name, the first definition winning as in
  // Model::find_function (which scans every function of the file).
  NameMap<int> functions;
  // Names a module-level import binds.
  NameSet imports;
  // Where `p.grad = ...` and `p.grad += ...` start, in order.
  std::vector<uint32_t> grad_stores;

  explicit ClearingIndex(const Model& m) {
    for (size_t i = 0; i < m.functions().size(); ++i) {
      const Function& f = m.functions()[i];
      if (f.parent < 0 && f.cls < 0) functions.emplace(f.name, static_cast<int>(i));
    }
    for (const Binding& b : m.bindings()) {
      if (b.kind == BindingKind::Import && b.function == -1) imports.insert(b.name);
      if (b.kind != BindingKind::Assign && b.kind != BindingKind::AugAssign) continue;
      std::string_view name = b.name;
      if (name.size() > 5 && name.substr(name.size() - 5) == ".grad") grad_stores.push_back(b.start);
    }
    std::sort(grad_stores.begin(), grad_stores.end());
    call_info.resize(m.calls().size());
    visited.assign(m.functions().size(), 0);
    std::string_view text = m.source().text();
    // No line before the first ".grad" can delete one.
    size_t first_grad = text.find(".grad");
    if (first_grad == std::string_view::npos) return;
    size_t line = text.rfind('\n', first_grad);
    for (size_t at = text.find("del ", line == std::string_view::npos ? 0 : line); at != std::string_view::npos;
         at = text.find("del ", at + 4)) {
      size_t eol = text.find('\n', at);
      size_t grad = text.substr(0, eol).find(".grad", at);
      if (grad != std::string_view::npos) grad_deletes.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(grad));
    }
  }

  // `del p.grad` in [start, end): the `del ` and the ".grad" after it on
  // its line both inside the range.
  bool grad_delete_in(uint32_t start, uint32_t end) const {
    auto it = std::lower_bound(grad_deletes.begin(), grad_deletes.end(), std::make_pair(start, uint32_t{0}));
    for (; it != grad_deletes.end() && it->first < end; ++it)
      if (it->first + 4 <= end && it->second + 5 <= end) return true;
    return false;
  }

  // What a scan asks of each call, worked out on its first visit: the same
  // calls are read again for every function that reaches them.
  struct CallInfo {
    bool known = false;
    bool clears = false;        // its name says it clears, or `p.grad.zero_()`
    bool plain = false;         // `helper(...)`: runs `plain_callee` when that is >= 0
    bool self_receiver = false;  // `self.helper(...)`: what it runs depends on the caller's class
    int plain_callee = -1;
    // What other_module_callee gives: nothing, the call's callee, or "self." + method.
    enum class External : uint8_t { None, Callee, SelfMethod } external = External::None;
  };
  std::vector<CallInfo> call_info;
  // The functions one scan has entered: those stamped with its generation.
  std::vector<unsigned> visited;
  unsigned generation = 0;
  // Each `del ` of the source followed by ".grad" on its line: where each
  // starts, in order.
  std::vector<std::pair<uint32_t, uint32_t>> grad_deletes;

  void new_scan() { ++generation; }
  bool first_visit(int function) {
    unsigned& stamp = visited[static_cast<size_t>(function)];
    if (stamp == generation) return false;
    stamp = generation;
    return true;
  }

  bool grad_store_in(uint32_t start, uint32_t end) const {
    auto it = std::lower_bound(grad_stores.begin(), grad_stores.end(), start);
    return it != grad_stores.end() && *it < end;
  }
};

class MissingZeroGrad final : public Check {
 public:
  // Summaries of this file's module-level functions and methods, for loops
  // in other files that call them.
  void collect(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    ctx.fact(std::string(kAnalyzedFact), normal_path(ctx.path()), m.root(), {});
    // A package's __init__.py also records the functions it defines that
    // neither clear nor call out ({"defines"}): a name it has no fact for is
    // one it may re-export.
    bool package = std::filesystem::path(ctx.path()).filename() == "__init__.py";
    ClearingIndex index(m);
    for (size_t i = 0; i < m.functions().size(); ++i) {
      const Function& f = m.functions()[i];
      if (f.parent >= 0 || is_null(f.body)) continue;
      // A method is keyed ".name": a call on `self` that its class does not
      // define resolves to a method of that name in another file's class.
      std::string key = f.cls >= 0 ? "." + f.name : f.name;
      index.new_scan();
      index.first_visit(static_cast<int>(i));
      std::vector<std::string> external;
      if (clears_in_range(m, index, start_byte(f.body), end_byte(f.body), static_cast<int>(i), 0, &external)) {
        ctx.fact(std::string(kSummaryFact), std::move(key), f.node, {"clears"});
      } else if (!external.empty()) {
        external.insert(external.begin(), "calls");
        ctx.fact(std::string(kSummaryFact), std::move(key), f.node, std::move(external));
      } else if (package && f.cls < 0) {
        ctx.fact(std::string(kSummaryFact), std::move(key), f.node, {"defines"});
      }
    }
  }

  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    // Each loop is decided once, however many backward calls it holds: the
    // first of them carries the finding.
    std::unordered_map<int, const Call*> steps;  // loop -> its optimizer step, or null
    std::unordered_set<int> decided;
    std::optional<ClearingIndex> index;
    for (const Call& c : m.calls()) {
      if (c.loop < 0 || !m.accumulates_grads(c)) continue;
      if (m.grad_state(start_byte(c.node)) == GradState::Disabled) continue;
      for (int loop : m.enclosing_loops(start_byte(c.node), c.function)) {
        if (m.loops()[loop].kind == LoopKind::Comprehension) break;
        auto found = steps.find(loop);
        if (found == steps.end()) found = steps.emplace(loop, optimizer_step(m, loop)).first;
        const Call* step = found->second;
        if (!step) continue;  // try the enclosing loop
        std::vector<std::string> external;
        if (!decided.insert(loop).second) break;
        if (fresh_parameters(m, *step, loop)) break;
        if (!index) index.emplace(m);
        if (!clears_in_loop(m, *index, loop, external)) {
          report(ctx, c, *step, loop, std::move(external));
        } else if (Uncleared forgotten = uncleared_optimizer(m, *index, loop, external); forgotten.step) {
          report(ctx, c, *forgotten.step, loop, std::move(external), &forgotten);
        }
        break;
      }
    }
  }

 private:
  // Whether the optimizer that `step` steps is built in the loop, every
  // iteration, over tensors also made afresh in it (`x = z.detach().clone()`
  // then `opt = SGD([x])`): each iteration's parameters are new leaves whose
  // .grad starts empty, and nothing accumulates. An optimizer over the
  // parameters of a module that outlives the loop still does.
  static bool fresh_parameters(const Model& m, const Call& step, int loop) {
    const Binding* b = nullptr;
    TSNode params = optimizer_params(m, m.stepped_optimizer(step), step.function, &b);
    if (is_null(params) || !m.loop_contains(loop, b->start)) return false;
    if (of_module_built_in(m, params, loop, step.function, 0)) return true;
    if (kind_of(params) != Kind::List && kind_of(params) != Kind::Tuple) return false;
    uint32_t n = ts_node_named_child_count(params);
    if (n == 0) return false;
    for (uint32_t i = 0; i < n; ++i) {
      TSNode p = unparenthesize(ts_node_named_child(params, i));
      if (kind_of(p) != Kind::Identifier) return false;
      const Binding* made = m.reaching(m.text(p), start_byte(p), step.function);
      if (!made || made->kind != BindingKind::Assign || made->element >= 0 || !m.loop_contains(loop, made->start) ||
          m.mentions(made->value, m.text(p)))
        return false;
    }
    return true;
  }

  // Whether `expr` holds only parameters of modules constructed in the
  // iteration of `loop` (a class of the project or of a library, built
  // there): a new module's parameters are new leaves whose .grad starts
  // empty. Followed through names bound in the loop, `.parameters()`,
  // `.named_parameters()`, a dict's `.values()`, comprehensions over them
  // and list(), tuple(), filter(). A module from anywhere else (a helper may
  // hand back the same module each time) is not fresh.
  static bool of_module_built_in(const Model& m, TSNode expr, int loop, int fn, int depth) {
    expr = unparenthesize(expr);
    if (depth > 6) return false;
    switch (kind_of(expr)) {
      case Kind::Identifier: {
        const Binding* b = m.reaching(m.text(expr), start_byte(expr), fn);
        return b && b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value) &&
               m.loop_contains(loop, b->start) && of_module_built_in(m, b->value, loop, fn, depth + 1);
      }
      case Kind::List:
      case Kind::Tuple: {
        uint32_t n = ts_node_named_child_count(expr);
        for (uint32_t i = 0; i < n; ++i)
          if (!of_module_built_in(m, ts_node_named_child(expr, i), loop, fn, depth + 1)) return false;
        return n > 0;
      }
      case Kind::ListComprehension:
      case Kind::DictionaryComprehension:
      case Kind::SetComprehension:
      case Kind::GeneratorExpression: {
        bool any = false;
        for (uint32_t i = 0; i < ts_node_named_child_count(expr); ++i) {
          TSNode clause = ts_node_named_child(expr, i);
          if (kind_of(clause) != Kind::ForInClause) continue;
          if (!of_module_built_in(m, field(clause, "right"), loop, fn, depth + 1)) return false;
          any = true;
        }
        return any;
      }
      case Kind::Call: {
        TSNode func = unparenthesize(field(expr, "function"));
        if (constructs_class(m, func)) return true;
        Call call{};
        call.args = field(expr, "arguments");
        if (kind_of(func) == Kind::Attribute) {
          std::string_view method = m.text(attribute_name(func));
          if (method == "parameters" || method == "named_parameters" || method == "values")
            return of_module_built_in(m, attribute_object(func), loop, fn, depth + 1);
          return false;
        }
        std::string callee = m.qualify(func);
        if (callee == "list" || callee == "tuple" || callee == "iter")
          return m.positional_count(call) == 1 && of_module_built_in(m, m.positional_argument(call, 0), loop, fn, depth + 1);
        if (callee == "filter")
          return m.positional_count(call) == 2 && of_module_built_in(m, m.positional_argument(call, 1), loop, fn, depth + 1);
        return false;
      }
      default:
        return false;
    }
  }

  // Whether calling `func` constructs an object: a class of this file, one
  // another file of the project defines, or one the library models know.
  static bool constructs_class(const Model& m, TSNode func) {
    if (kind_of(func) != Kind::Identifier && kind_of(func) != Kind::Attribute) return false;
    std::string callee = m.qualify(func);
    if (callee.empty()) return false;
    if (m.library().knows_class(callee)) return true;
    if (kind_of(func) == Kind::Identifier) {
      // A class of the file whose name nothing rebinds.
      if (m.find_class(callee) && !m.reaching(m.text(func), start_byte(func), m.function_at(start_byte(func))))
        return true;
    }
    std::optional<ForeignDefinition> def = m.foreign_definition(func);
    return def && def->cls >= 0 && !def->function;
  }

  // The first optimizer step() called directly in `loop` (same function).
  static const Call* optimizer_step(const Model& m, int loop) {
    const Loop& l = m.loops()[loop];
    for (const Call& c : m.calls_in(l.start, l.end)) {
      if (c.function != l.function || !m.loop_contains(loop, start_byte(c.node))) continue;
      if (!is_null(m.stepped_optimizer(c))) return &c;
    }
    return nullptr;
  }

  // What an optimizer is built over: `opt` bound in `function` (by
  // `*binding`) to `torch.optim.X(params, ...)` gives `params`; null
  // otherwise.
  static TSNode optimizer_params(const Model& m, TSNode optimizer, int function,
                                 const Binding** binding = nullptr) {
    optimizer = unparenthesize(optimizer);
    if (kind_of(optimizer) != Kind::Identifier) return TSNode{};
    const Binding* b = m.reaching(m.text(optimizer), start_byte(optimizer), function);
    if (!b || b->kind != BindingKind::Assign || b->element >= 0) return TSNode{};
    TSNode built = unparenthesize(b->value);
    if (kind_of(built) != Kind::Call || !is_torch_optimizer_class(m.qualify(field(built, "function"))))
      return TSNode{};
    Call construction{};
    construction.args = field(built, "arguments");
    TSNode params = m.keyword_argument(construction, "params");
    if (is_null(params)) params = m.positional_argument(construction, 0);
    if (binding) *binding = b;
    return unparenthesize(params);
  }

  // The module an optimizer is built over: `opt` bound in `function` to
  // `torch.optim.X(M.parameters(), ...)` gives "M"; "" otherwise.
  static std::string optimized_module(const Model& m, TSNode optimizer, int function) {
    TSNode params = optimizer_params(m, optimizer, function);
    if (kind_of(params) != Kind::Call || ts_node_named_child_count(field(params, "arguments")) != 0) return {};
    TSNode function_node = field(params, "function");
    if (kind_of(function_node) != Kind::Attribute || m.text(field(function_node, "attribute")) != "parameters")
      return {};
    TSNode module = unparenthesize(field(function_node, "object"));
    if (kind_of(module) != Kind::Identifier) return {};
    // A module of its own: a parameter of the function or a value it builds,
    // not another module's part (`backbone = model.backbone`), whose
    // parameters a zero_grad of the whole would clear.
    const Binding* made = m.reaching(m.text(module), start_byte(module), function);
    if (made && made->kind != BindingKind::Parameter &&
        (made->kind != BindingKind::Assign || kind_of(unparenthesize(made->value)) != Kind::Call))
      return {};
    return std::string(m.text(module));
  }

  // With every clearing in `loop` an optimizer's (or a module's) direct
  // zero_grad(), the step of an optimizer over one module that none of them
  // clears; null when there is none, or when anything else in this file may
  // clear. The functions of other modules the loop calls are added to
  // `external`, as clears_in_range does: the finding waits for them.
  struct Uncleared {
    const Call* step = nullptr;  // the step of the optimizer left uncleared
    std::string module;          // the module it optimizes
    std::vector<std::string> cleared;  // what the loop's zero_grad() calls clear, in order
  };
  static Uncleared uncleared_optimizer(const Model& m, ClearingIndex& index, int loop,
                                       std::vector<std::string>& external) {
    const Loop& l = m.loops()[loop];
    Uncleared out;
    std::unordered_set<const Call*> direct;
    NameSet cleared;  // the optimizers and modules whose zero_grad() the loop calls
    const auto& calls = m.calls();
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = calls[i];
      if (c.function != l.function || !m.loop_contains(loop, start_byte(c.node))) continue;
      if (!call_info(m, index, i).clears) continue;
      // Only optimizers built here over one module's parameters: a module's
      // zero_grad() (`model`, a compiled or wrapped `net`, an alias of a
      // submodule) may hold the stepped optimizer's parameters.
      TSNode receiver = unparenthesize(c.receiver);
      if (c.method != "zero_grad" || is_null(receiver) || kind_of(receiver) != Kind::Identifier) return {};
      std::string module = optimized_module(m, receiver, c.function);
      if (module.empty()) return {};
      direct.insert(&c);
      std::string name(m.text(receiver));
      if (std::find(out.cleared.begin(), out.cleared.end(), name) == out.cleared.end()) out.cleared.push_back(name);
      cleared.insert(std::move(name));
      cleared.insert(std::move(module));
    }
    if (direct.empty()) return {};
    // Nothing else clears: no helper, no `p.grad = ...`.
    index.new_scan();
    if (clears_in_range(m, index, l.start, l.end, l.function, 0, &external, &direct)) return {};
    // Of the optimizers stepped in the loop (two at least), one over a
    // module that none of those calls clears.
    NameSet stepped;
    for (const Call& c : calls) {
      if (c.function != l.function || !m.loop_contains(loop, start_byte(c.node))) continue;
      TSNode optimizer = unparenthesize(m.stepped_optimizer(c));
      if (is_null(optimizer) || kind_of(optimizer) != Kind::Identifier) continue;
      stepped.insert(std::string(m.text(optimizer)));
      if (out.step) continue;
      std::string module = optimized_module(m, optimizer, c.function);
      if (module.empty() || cleared.count(m.text(optimizer)) || cleared.count(module)) continue;
      out.step = &c;
      out.module = std::move(module);
    }
    if (stepped.size() < 2) return {};
    return out;
  }

  static bool clears_in_loop(const Model& m, ClearingIndex& index, int loop, std::vector<std::string>& external) {
    const Loop& l = m.loops()[loop];
    index.new_scan();
    return clears_in_range(m, index, l.start, l.end, l.function, 0, &external);
  }

  // Whether code in [start, end) of `function` clears gradients, directly or
  // through functions of this file it calls (the calls of `skip` aside). The
  // qualified names of the functions of other modules it calls are added to
  // `external`: whether they clear is known once every file is indexed.
  static bool clears_in_range(const Model& m, ClearingIndex& index, uint32_t start, uint32_t end, int function,
                              int depth, std::vector<std::string>* external,
                              const std::unordered_set<const Call*>* skip = nullptr) {
    // `p.grad = None`: a range whose text never says ".grad" assigns none.
    if (index.grad_store_in(start, end) &&
        m.source().text().substr(start, end - start).find(".grad") != std::string_view::npos)
      return true;
    for (const Call& c : m.calls_in(start, end)) {
      if (skip && skip->count(&c)) continue;
      const ClearingIndex::CallInfo& info = call_info(m, index, static_cast<size_t>(&c - m.calls().data()));
      if (info.clears) return true;
      if (depth >= kMaxCallDepth) continue;
      int callee = info.plain ? info.plain_callee : info.self_receiver ? self_callee(m, c, function) : -1;
      if (callee < 0) {
        if (!external || info.external == ClearingIndex::CallInfo::External::None) continue;
        std::string other =
            info.external == ClearingIndex::CallInfo::External::Callee ? c.callee : "self." + c.method;
        // The file the import names, when the engine finds it: a function
        // of the same name in another file is not the one called.
        if (info.external == ClearingIndex::CallInfo::External::Callee)
          if (std::string file = m.callee_file(c, true); !file.empty()) (other += kFileSep) += normal_path(file);
        if (std::find(external->begin(), external->end(), other) == external->end())
          external->push_back(std::move(other));
        continue;
      }
      if (!index.first_visit(callee)) continue;
      const Function& f = m.functions()[callee];
      if (clears_in_range(m, index, start_byte(f.body), end_byte(f.body), callee, depth + 1, external))
        return true;
    }
    return index.grad_delete_in(start, end);
  }

  static const ClearingIndex::CallInfo& call_info(const Model& m, ClearingIndex& index, size_t i) {
    ClearingIndex::CallInfo& info = index.call_info[i];
    if (info.known) return info;
    const Call& c = m.calls()[i];
    info.known = true;
    std::string_view name = call_name(c);
    // p.grad.zero_(), p.grad.data.zero_(), p.grad.fill_(0), p.grad.mul_(0)
    info.clears = names_clearing(name) || ((name == "zero_" || name == "fill_" || name == "mul_" || name == "detach_") &&
                                           !is_null(c.receiver) && contains(m.text(c.receiver), ".grad"));
    // The function of this file a call runs: `helper(...)` (a module-level
    // function) or `self.helper(...)` (a method of the caller's class).
    if (c.method.empty()) {
      info.plain = true;
      auto it = index.functions.find(c.callee);
      info.plain_callee = it == index.functions.end() ? -1 : it->second;
    } else {
      info.self_receiver = !is_null(c.receiver) && m.text(c.receiver) == "self";
    }
    info.external = other_module_callee(m, index, c);
    return info;
  }

  static int self_callee(const Model& m, const Call& c, int caller) {
    const Function* f = m.find_method(m.class_of_function(caller), c.method);
    return f ? static_cast<int>(f - m.functions().data()) : -1;
  }

  // The qualified name of a function that another module may define: a plain
  // call not defined in this file (`begin_step(...)`, imported or not), a
  // call through an imported module (`utils.start_iteration(...)`), or
  // `self.method(...)` that the class and its bases in this file do not
  // define (a base class in another file); None for methods of other objects
  // and for torch itself. The name is the call's callee, or "self." + method.
  static ClearingIndex::CallInfo::External other_module_callee(const Model& m, const ClearingIndex& index, const Call& c) {
    using External = ClearingIndex::CallInfo::External;
    if (c.callee.empty() || c.callee.rfind("torch.", 0) == 0) return External::None;
    if (c.method.empty()) return External::Callee;
    TSNode receiver = unparenthesize(c.receiver);
    if (is_null(receiver) || kind_of(receiver) != Kind::Identifier) return External::None;
    std::string_view name = m.text(receiver);
    if (name == "self") return External::SelfMethod;
    return index.imports.count(name) ? External::Callee : External::None;
  }

  // Whether one of `callees` (qualified names) clears gradients according to
  // the summaries of the analyzed files, following the functions they call in
  // turn. A callee's facts are those of the file the engine found for it (a
  // package's __init__.py with none of its own may re-export it: it may clear);
  // when it found none, those of the files whose name is the module's
  // (`engine.begin_step` -> engine.py) when there are some. A callee in a
  // file the run did not analyze may clear.
  static bool clears_through_index(const ProjectIndex& index, const std::vector<std::string>& callees) {
    std::deque<std::pair<std::string, int>> queue;
    for (const std::string& c : callees) queue.emplace_back(c, 1);
    std::unordered_set<std::string> visited;
    while (!queue.empty()) {
      auto [entry, depth] = queue.front();
      queue.pop_front();
      if (!visited.insert(entry).second) continue;
      size_t sep = entry.find(kFileSep);
      std::string callee = entry.substr(0, sep);
      std::string file = sep == std::string::npos ? std::string() : entry.substr(sep + 1);
      std::vector<const Fact*> facts;
      if (!file.empty()) {
        // Not analyzed in this run: what it does is not known.
        if (index.find(kAnalyzedFact, file).empty()) return true;
        for (const Fact* f : index.find(kSummaryFact, last_component(callee)))
          if (normal_path(f->file) == file) facts.push_back(f);
        // A package's __init__.py that says nothing of the name may only
        // re-export it from a module not followed here: it may clear.
        if (facts.empty() && std::filesystem::path(file).filename() == "__init__.py") return true;
      } else if (callee.rfind("self.", 0) == 0) {
        facts = index.find(kSummaryFact, callee.substr(4));  // ".method"
      } else {
        std::string_view name = last_component(callee);
        facts = index.find(kSummaryFact, name);
        std::string_view module = std::string_view(callee).substr(0, callee.size() - name.size());
        if (!module.empty()) module.remove_suffix(1);  // the dot
        module = last_component(module);
        std::vector<const Fact*> in_module;
        for (const Fact* f : facts)
          if (!module.empty() && std::filesystem::path(f->file).stem() == module) in_module.push_back(f);
        if (!in_module.empty()) facts = std::move(in_module);
      }
      for (const Fact* f : facts) {
        if (f->values.empty()) continue;
        if (f->values.front() == "clears") return true;
        if (depth >= kMaxCallDepth) continue;
        for (size_t i = 1; i < f->values.size(); ++i) queue.emplace_back(f->values[i], depth + 1);
      }
    }
    return false;
  }

  static void report(CheckContext& ctx, const Call& backward, const Call& step, int loop,
                     std::vector<std::string> external, const Uncleared* uncleared = nullptr) {
    const Model& m = ctx.model();
    TSNode optimizer = m.stepped_optimizer(step);
    std::string opt = code_snippet(m, optimizer, 40);
    std::string message;
    if (uncleared) {
      std::string cleared;
      for (size_t i = 0; i < uncleared->cleared.size(); ++i)
        cleared += (i == 0 ? "" : i + 1 == uncleared->cleared.size() ? " and " : ", ") +
                   fmt::format("`{}`'s gradients", uncleared->cleared[i]);
      message = fmt::format(fmt::runtime(messages::TL010::uncleared),
                            fmt::arg("backward", code_snippet(m, backward.node, 40)), fmt::arg("cleared", cleared),
                            fmt::arg("step", code_snippet(m, step.node, 40)), fmt::arg("module", uncleared->module));
    } else {
      message = fmt::format(fmt::runtime(messages::TL010::accumulates),
                            fmt::arg("backward", code_snippet(m, backward.node, 40)),
                            fmt::arg("step", code_snippet(m, step.node, 40)));
    }
    Diagnostic d = ctx.diagnostic(backward.node, std::move(message));
    d.help = fmt::format(fmt::runtime(messages::TL010::help), fmt::arg("clear", opt + ".zero_grad()"));
    // An optimizer built in the loop does not exist yet at the start of the
    // body (the first iteration would fail): no fix then, only the help.
    TSNode named = unparenthesize(optimizer);
    const Binding* built =
        kind_of(named) == Kind::Identifier ? m.reaching(m.text(named), start_byte(named), step.function) : nullptr;
    std::vector<Edit> edits;
    if (!built || !m.loop_contains(loop, built->start)) edits = insert_first(m, loop, opt + ".zero_grad()");
    if (!edits.empty())
      d.fix = Fix{fmt::format("Insert `{}.zero_grad()` at the start of the loop body", opt), FixSafety::Unsafe,
                  std::move(edits)};
    if (external.empty()) {
      ctx.report(std::move(d));
      return;
    }
    // Functions of other modules run in the loop: silent if one of them clears.
    ctx.defer(std::move(d), [external = std::move(external)](const ProjectIndex& index, Diagnostic&) {
      return !clears_through_index(index, external);
    });
  }

  // An edit that inserts `statement` before the first statement of the
  // loop's body, at its indentation; none when the body shares the loop's
  // line or the indentation is not plain whitespace.
  static std::vector<Edit> insert_first(const Model& m, int loop, const std::string& statement) {
    TSNode body = field(m.loops()[loop].node, "body");
    if (is_null(body) || ts_node_named_child_count(body) == 0) return {};
    TSNode first = ts_node_named_child(body, 0);
    std::string_view text = m.source().text();
    uint32_t at = start_byte(first);
    size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
    std::string_view indent = text.substr(line_start, at - line_start);
    if (indent.empty() || indent.find_first_not_of(" \t") != std::string_view::npos) return {};
    std::string newline = line_start >= 2 && text[line_start - 2] == '\r' ? "\r\n" : "\n";
    return {Edit{at, at, statement + newline + std::string(indent)}};
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(MissingZeroGrad, "TL010")

}  // namespace torchleak::python
