// TL003 module-tensor-cache: in `forward` of an nn.Module (or in a method that
// forward calls), a tensor that carries autograd history is stored on `self`
// without `.detach()`. The module then keeps the graph of its last forward
// alive between calls, or the graph of every call when the store appends to a
// container or updates a buffer in place.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

constexpr std::array<std::string_view, 4> kContainerStores = {"append", "extend", "insert", "appendleft"};
// Tensor methods that build a fresh tensor without history, whatever the receiver.
constexpr std::array<std::string_view, 5> kFreshTensorMethods = {"new_zeros", "new_ones", "new_empty",
                                                                 "new_full", "new_tensor"};
// In-place methods that never write a value into the receiver.
constexpr std::array<std::string_view, 3> kInPlaceNoValue = {"requires_grad_", "detach_", "share_memory_"};
// Tensor methods whose arguments give only a dtype, a device or a shape: the
// result carries the receiver's history, not the arguments'.
constexpr std::array<std::string_view, 5> kMetadataFromArguments = {"to", "type_as", "view_as", "reshape_as",
                                                                    "expand_as"};
// Builtins that return one of their tensor arguments (or a sum of them).
constexpr std::array<std::string_view, 4> kPassThroughBuiltins = {"sum", "max", "min", "abs"};

template <size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool mentions(std::string_view haystack, std::initializer_list<std::string_view> needles) {
  std::string l = lower(haystack);
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return l.find(n) != std::string::npos; });
}

// Attributes meant to carry history out of forward: an auxiliary loss, a KL
// term or a penalty that the training loop adds to its loss and backpropagates.
bool meant_for_backward(std::string_view attribute) {
  return mentions(last_component(attribute), {"loss", "kl", "penalty", "regulari"});
}

bool is_in_place(std::string_view method) {
  return method.size() > 1 && method.back() == '_' && method.front() != '_' && !one_of(method, kInPlaceNoValue);
}

// A node of a function, exactly: its range and kind, and the function whose
// inputs it is judged against.
using NodeKey = std::tuple<int, uint32_t, uint32_t, TSSymbol>;
NodeKey node_key(TSNode n, int fn) { return {fn, start_byte(n), end_byte(n), ts_node_symbol(n)}; }

// Which values in the methods reachable from forward may carry autograd
// history: the model's provenance, extended with forward's tensor inputs (a
// module's input is usually the output of another layer) and the parameters
// of helpers that forward passes such values to.
class Taint {
 public:
  explicit Taint(const Model& m) : m_(m) {}

  bool add_input(int fn, const std::string& name) {
    if (!inputs_[fn].insert(name).second) return false;
    memo_.clear();
    return true;
  }

  bool of(TSNode e, int fn) { return at(e, fn, 0); }

 private:
  static constexpr int kMaxDepth = 32;

  bool at(TSNode e, int fn, int depth) {
    e = unparenthesize(e);
    if (is_null(e) || depth > kMaxDepth) return false;
    if (kind_of(e) == Kind::Call) {
      // `buf.to(x)`, `buf.type_as(x)`: x only lends its dtype, device or shape.
      TSNode func = unparenthesize(field(e, "function"));
      if (kind_of(func) == Kind::Attribute && one_of(m_.text(field(func, "attribute")), kMetadataFromArguments))
        return at(field(func, "object"), fn, depth + 1);
    }
    Provenance p = m_.provenance(e);
    if (p != Provenance::Unknown) return p == Provenance::Attached;
    NodeKey key = node_key(e, fn);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (!in_progress_.insert(key).second) return false;
    bool t = uncached(e, fn, depth);
    in_progress_.erase(key);
    memo_[key] = t;
    return t;
  }

  bool any_child(TSNode e, int fn, int depth) {
    uint32_t n = ts_node_named_child_count(e);
    for (uint32_t i = 0; i < n; ++i)
      if (at(ts_node_named_child(e, i), fn, depth + 1)) return true;
    return false;
  }

  bool uncached(TSNode e, int fn, int depth) {
    switch (kind_of(e)) {
      case Kind::Identifier: return identifier(e, fn, depth);
      case Kind::Attribute: {
        // `self.x` is the model's business (Unknown there means not known to carry history).
        TSNode object = unparenthesize(field(e, "object"));
        if (kind_of(object) == Kind::Identifier && fn >= 0 && !m_.functions()[fn].params.empty() &&
            m_.text(object) == m_.functions()[fn].params.front())
          return false;
        return at(object, fn, depth + 1);
      }
      case Kind::Subscript: return at(field(e, "value"), fn, depth + 1);
      case Kind::BinaryOperator:
      case Kind::BooleanOperator:
        return at(field(e, "left"), fn, depth + 1) || at(field(e, "right"), fn, depth + 1);
      case Kind::UnaryOperator:
      case Kind::Await: {
        uint32_t n = ts_node_named_child_count(e);
        return n && at(ts_node_named_child(e, n - 1), fn, depth + 1);
      }
      case Kind::ConditionalExpression: {
        uint32_t n = ts_node_named_child_count(e);
        return n >= 3 && (at(ts_node_named_child(e, 0), fn, depth + 1) || at(ts_node_named_child(e, 2), fn, depth + 1));
      }
      case Kind::Tuple:
      case Kind::List:
      case Kind::ExpressionList: return any_child(e, fn, depth);
      case Kind::Dictionary: {
        uint32_t n = ts_node_named_child_count(e);
        for (uint32_t i = 0; i < n; ++i) {
          TSNode v = field(ts_node_named_child(e, i), "value");
          if (!is_null(v) && at(v, fn, depth + 1)) return true;
        }
        return false;
      }
      case Kind::ListComprehension:
      case Kind::GeneratorExpression: {
        TSNode body = field(e, "body");
        return !is_null(body) && at(body, fn, depth + 1);
      }
      case Kind::Call: return call(e, fn, depth);
      default: return false;
    }
  }

  bool identifier(TSNode e, int fn, int depth) {
    std::string_view name = m_.text(e);
    const Binding* b = m_.reaching(name, start_byte(e), fn);
    if (!b || b->function != fn) return false;  // module-level names are not inputs
    switch (b->kind) {
      case BindingKind::Parameter: return inputs_[fn].count(std::string(name)) > 0;
      case BindingKind::Assign:
      case BindingKind::NamedExpr:
      case BindingKind::AugAssign: {
        TSNode v = unparenthesize(b->value);
        if (b->element >= 0) {
          Kind k = kind_of(v);
          if ((k == Kind::Tuple || k == Kind::ExpressionList || k == Kind::List) &&
              static_cast<uint32_t>(b->element) < ts_node_named_child_count(v))
            v = ts_node_named_child(v, static_cast<uint32_t>(b->element));
        }
        return at(v, fn, depth + 1);
      }
      case BindingKind::ForTarget: return at(field(b->statement, "right"), fn, depth + 1);
      default: return false;
    }
  }

  bool arguments(TSNode call, int fn, int depth) {
    TSNode args = field(call, "arguments");
    uint32_t n = is_null(args) ? 0 : ts_node_named_child_count(args);
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = ts_node_named_child(args, i);
      if (kind_of(a) == Kind::KeywordArgument) a = field(a, "value");
      if (at(a, fn, depth + 1)) return true;
    }
    return false;
  }

  bool call(TSNode e, int fn, int depth) {
    TSNode func = unparenthesize(field(e, "function"));
    std::string callee = m_.qualify(func);
    if (starts_with(callee, "torch.")) {
      // torch functions propagate history from their arguments; constructors
      // (torch.nn.Linear(...)) build modules, not values.
      std::string_view leaf = last_component(callee);
      return !leaf.empty() && std::islower(static_cast<unsigned char>(leaf[0])) && arguments(e, fn, depth);
    }
    if (kind_of(func) == Kind::Attribute) {
      std::string_view method = m_.text(field(func, "attribute"));
      if (one_of(method, kFreshTensorMethods)) return false;
      TSNode receiver = unparenthesize(field(func, "object"));
      bool self_call = kind_of(receiver) == Kind::Identifier && fn >= 0 && !m_.functions()[fn].params.empty() &&
                       m_.text(receiver) == m_.functions()[fn].params.front();
      // A helper method returns what it computes from its arguments; a
      // submodule the model could not resolve (set up by a base class) too.
      if (self_call) return arguments(e, fn, depth);
      return at(receiver, fn, depth + 1);  // a tensor method keeps its receiver's history
    }
    if (kind_of(func) != Kind::Identifier) return false;
    std::string_view name = m_.text(func);
    // `for layer in self.layers: x = layer(x)`, a function of this file, sum(...).
    const Binding* b = m_.reaching(name, start_byte(func), fn);
    bool layer = b && b->kind == BindingKind::ForTarget;
    bool local = m_.find_function(name) != nullptr;
    if (!layer && !local && !one_of(name, kPassThroughBuiltins)) return false;
    return arguments(e, fn, depth);
  }

  const Model& m_;
  std::unordered_map<int, std::unordered_set<std::string>> inputs_;
  std::map<NodeKey, bool> memo_;
  std::set<NodeKey> in_progress_;
};

// A parameter of forward that holds a tensor which may carry history: not
// annotated or defaulted as a plain Python value, and not named as one of the
// integer or boolean tensors a model receives (labels, lengths, masks, indices)
// or as a device or dtype (`forward(self, layout, device)`).
bool tensor_input(const Model& m, int fn, const std::string& name) {
  std::string l = lower(name);
  for (std::string_view n : {"mask", "length", "lens", "ids", "idx", "index", "indices", "label", "target", "step",
                             "epoch", "seq_len", "device", "dtype"}) {
    if (l.find(n) != std::string::npos) return false;
  }
  for (const Binding* b : m.bindings_of(name, fn)) {
    if (b->kind != BindingKind::Parameter) continue;
    TSNode p = b->statement;
    TSNode type = field(p, "type");
    if (!is_null(type) && m.text(type).find("Tensor") == std::string_view::npos) return false;
    Kind d = kind_of(unparenthesize(b->value));
    if (!is_null(b->value) && d != Kind::None &&
        (d == Kind::Integer || d == Kind::Float || d == Kind::String || d == Kind::True || d == Kind::False))
      return false;
  }
  return true;
}

bool is_static(const Function& f) {
  return std::any_of(f.decorators.begin(), f.decorators.end(),
                     [](const std::string& d) { return d == "staticmethod" || d == "classmethod"; });
}

// The value a binding stores: the matching element of a tuple on the right,
// else the whole right side; a null node when it cannot be told apart.
TSNode stored_value(const Binding& b) {
  TSNode v = unparenthesize(b.value);
  if (b.element < 0) return v;
  Kind k = kind_of(v);
  if ((k == Kind::Tuple || k == Kind::ExpressionList || k == Kind::List) &&
      static_cast<uint32_t>(b.element) < ts_node_named_child_count(v))
    return ts_node_named_child(v, static_cast<uint32_t>(b.element));
  return v;
}

bool element_of_unpacked_call(const Binding& b) {
  if (b.element < 0) return false;
  Kind k = kind_of(unparenthesize(b.value));
  return k != Kind::Tuple && k != Kind::ExpressionList && k != Kind::List;
}

// `self.total += v` or `self.total = self.total + v` inside a loop: TL001's finding.
bool loop_accumulation(const Model& m, const Binding& b) {
  if (b.loop < 0) return false;
  if (b.kind == BindingKind::AugAssign) return b.op == "+=" || b.op == "-=";
  TSNode v = unparenthesize(b.value);
  if (b.kind != BindingKind::Assign || kind_of(v) != Kind::BinaryOperator) return false;
  return m.qualify(field(v, "left")) == b.name || m.qualify(field(v, "right")) == b.name;
}

enum class StoreKind : uint8_t { Assign, Accumulate, Container, InPlace };

struct Store {
  TSNode where{};              // the reported node: the target, or the storing call
  StoreKind kind = StoreKind::Assign;
  std::string attribute;       // "self.cache"
  std::vector<TSNode> values;  // the stored values that carry history
  std::vector<Edit> edits;     // `.detach()` on each; empty when no edit is right
  // Methods of the class ("Class.method") that start the attribute afresh
  // and that no module of this file calls: an owner in another file may.
  std::vector<std::string> reset_elsewhere;
};

// A path as two files of one run spell it alike.
std::string normal_path(std::string_view path) {
  return std::filesystem::path(std::string(path)).lexically_normal().string();
}

class ModuleTensorCache final : public Check {
 public:
  // Calls that a module's method (other than __init__) makes of a method of
  // a submodule whose class another file defines (`self.attention.clear_cache()`),
  // by "Class.method" and the defining file: the owner's side of reset_by_owner.
  // Also calls made in a loop, for their effect alone (a statement, no
  // argument), of a method of any object (`self.model.decoder.detach_state()`
  // in a trainer's step loop, where the decoder's class is not known), by
  // method name: a reset the owner's per-step code may run. Not asked of the
  // value engine: a loop's every receiver would be evaluated.
  void collect(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    std::unordered_set<std::string_view> loop_calls;
    for (const Call& c : m.calls()) {
      if (c.loop < 0 || c.method.empty() || is_null(c.receiver) || ts_node_named_child_count(c.args) != 0 ||
          loop_calls.count(c.method) || !c.statement)
        continue;
      loop_calls.insert(c.method);
      ctx.fact("loop-calls-method", c.method, c.node, {});
    }
    for (const Call& c : m.calls()) {
      if (c.function < 0 || c.method.empty() || kind_of(unparenthesize(c.receiver)) != Kind::Attribute) continue;
      const Function& f = m.functions()[c.function];
      if (f.cls < 0 || f.name == "__init__" || !is_self(m, c.function, attribute_object(unparenthesize(c.receiver))))
        continue;
      if (m.module_class(f.cls) == ModuleAnswer::No) continue;
      Value receiver = m.value(c.receiver);
      if (!receiver.home || receiver.cls < 0) continue;
      const Class& held = receiver.home->classes()[static_cast<size_t>(receiver.cls)];
      ctx.fact("owner-calls", held.name + "." + c.method, c.node, {normal_path(receiver.home->path())});
    }
  }

  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    auto config = std::make_shared<Config>(ctx.config());
    std::set<uint32_t> reported;
    for (size_t c = 0; c < m.classes().size(); ++c) {
      const Class& cls = m.classes()[c];
      std::vector<std::string> undecided;
      ModuleAnswer module = m.module_class(static_cast<int>(c), &undecided);
      if (module == ModuleAnswer::No) continue;
      auto forward = std::find_if(cls.methods.begin(), cls.methods.end(),
                                  [&](int f) { return m.functions()[f].name == "forward"; });
      if (forward == cls.methods.end()) continue;
      for (const auto& [fn, stores] : stores_from(m, static_cast<int>(c), *forward)) {
        for (const Store& s : stores) {
          if (!reported.insert(start_byte(s.where)).second) continue;
          Diagnostic d = diagnostic(ctx, s, fn, *forward);
          if (module == ModuleAnswer::Yes && s.reset_elsewhere.empty()) {
            ctx.report(std::move(d));
            continue;
          }
          bool decided = module == ModuleAnswer::Yes;
          ctx.defer(std::move(d), [undecided, config, decided, resets = s.reset_elsewhere,
                                   path = normal_path(ctx.path())](const ProjectIndex& index, Diagnostic&) {
            // An owner in another file calls a method that starts the
            // attribute afresh in its own per-call method: per-call state.
            for (const std::string& reset : resets) {
              for (const Fact* f : index.find("owner-calls", reset))
                if (!f->values.empty() && f->values.front() == path) return false;
              // Or a loop somewhere calls a method of that name, for its
              // effect alone, on some object (its class may not be known).
              if (!index.find("loop-calls-method", last_component(reset)).empty()) return false;
            }
            if (decided) return true;
            auto root = [&](std::string_view base) { return is_module_base(base, *config); };
            return std::any_of(undecided.begin(), undecided.end(), [&](const std::string& base) {
              return index.derives_from(last_component(base), root);
            });
          });
        }
      }
    }
  }

 private:
  // The methods forward reaches through `self.method(...)`, with the
  // parameters that receive values carrying history, and their stores.
  static std::map<int, std::vector<Store>> stores_from(const Model& m, int cls, int forward) {
    Taint taint(m);
    const Function& fwd = m.functions()[forward];
    // A module without trainable parameters is a fixed transform (a
    // spectrogram, a normalizer): what it keeps has history only when its
    // caller's input has, which nothing here shows.
    bool fixed_transform = m.trainable_parameters(cls) == Truth::False;
    for (size_t i = 1; i < fwd.params.size() && !fixed_transform; ++i)
      if (tensor_input(m, forward, fwd.params[i])) taint.add_input(forward, fwd.params[i]);
    std::vector<int> reached{forward};
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < reached.size(); ++r) {
        int fn = reached[r];
        for (const Call& call : m.calls()) {
          if (call.function != fn || !is_self(m, fn, call.receiver)) continue;
          if (m.switched_off(call.node, fn)) continue;  // `if self.save_attention: self.save_map(a)`
          const Function* helper = m.find_method(cls, call.method);
          if (!helper) continue;
          int h = static_cast<int>(helper - m.functions().data());
          if (std::find(reached.begin(), reached.end(), h) == reached.end()) {
            reached.push_back(h);
            changed = true;
          }
          changed |= pass_arguments(m, taint, call, fn, *helper, h);
        }
      }
    }
    std::map<int, std::vector<Store>> out;
    for (int fn : reached) {
      const Function& f = m.functions()[fn];
      if (f.params.empty() || is_static(f)) continue;
      std::vector<Store> stores = stores_in(m, taint, fn, f.params.front() + ".");
      if (!stores.empty()) out[fn] = std::move(stores);
    }
    return out;
  }

  // `self.embedding.init_embed_(z)` on an instance of a class of the
  // project (this file's or an imported one's) that defines the method:
  // that method, not a tensor's in-place update.
  static bool method_of_own_class(const Model& m, const Call& call) {
    Value v = m.value(call.receiver);
    const Model& home = v.home ? *v.home : m;
    return v.cls >= 0 && home.find_method(v.cls, call.method) != nullptr;
  }

  static bool is_self(const Model& m, int fn, TSNode receiver) {
    if (fn < 0 || is_null(receiver) || kind_of(receiver) != Kind::Identifier) return false;
    const Function& f = m.functions()[fn];
    return !f.params.empty() && !is_static(f) && m.text(receiver) == f.params.front();
  }

  // Marks the helper's parameters that receive a value carrying history.
  static bool pass_arguments(const Model& m, Taint& taint, const Call& call, int caller, const Function& helper,
                             int h) {
    bool changed = false;
    size_t offset = is_static(helper) ? 0 : 1;
    uint32_t n = is_null(call.args) ? 0 : ts_node_named_child_count(call.args);
    size_t position = 0;
    for (uint32_t i = 0; i < n; ++i) {
      TSNode a = ts_node_named_child(call.args, i);
      Kind k = kind_of(a);
      if (k == Kind::ListSplat || k == Kind::DictionarySplat) break;  // positions unknown from here
      if (k == Kind::Comment) continue;
      std::string param;
      TSNode value = a;
      if (k == Kind::KeywordArgument) {
        param = std::string(m.text(field(a, "name")));
        value = field(a, "value");
      } else if (position + offset < helper.params.size()) {
        param = helper.params[position++ + offset];
      }
      if (param.empty() || std::find(helper.params.begin(), helper.params.end(), param) == helper.params.end())
        continue;
      if (taint.of(value, caller)) changed |= taint.add_input(h, param);
    }
    return changed;
  }

  static std::vector<Store> stores_in(const Model& m, Taint& taint, int fn, const std::string& prefix) {
    std::vector<Store> out;
    for (const Binding& b : m.bindings()) {
      if (b.function != fn || !starts_with(b.name, prefix)) continue;
      if (b.kind != BindingKind::Assign && b.kind != BindingKind::AugAssign && b.kind != BindingKind::SubscriptStore)
        continue;
      if (meant_for_backward(b.name) || loop_accumulation(m, b)) continue;
      if (m.switched_off(b.statement, fn)) continue;  // a debugging switch, off unless turned on
      // Read by a backward() in a method of the class (a GAN's `self.fake` for `backward_G`): the
      // graph is consumed and freed by the step it belongs to.
      if (m.grad_state(b.start) != GradState::Enabled) continue;
      if (m.feeds_backward(b.name, fn)) continue;
      TSNode v = b.kind == BindingKind::AugAssign ? unparenthesize(b.value) : stored_value(b);
      if (is_null(v) || !taint.of(v, fn) || !may_hold_graph(m, b, v)) continue;
      std::vector<std::string> reset_elsewhere;
      if (reset_by_owner(m, b, fn, reset_elsewhere) || initialized_per_call(m, b, fn)) continue;
      Store s;
      s.reset_elsewhere = std::move(reset_elsewhere);
      s.where = b.target;
      s.kind = b.kind == BindingKind::AugAssign ? StoreKind::Accumulate : StoreKind::Assign;
      s.attribute = b.name;
      s.values.push_back(v);
      // `out, self.hidden = self.lstm(x)`: the stored element is not an expression of its own.
      if (!element_of_unpacked_call(b)) detach_edits(m, taint, v, fn, s.edits);
      out.push_back(std::move(s));
    }
    for (const Call& call : m.calls()) {
      if (call.function != fn || is_null(call.receiver)) continue;
      if (m.grad_state(start_byte(call.node)) != GradState::Enabled) continue;
      if (m.switched_off(call.node, fn)) continue;
      bool container = one_of(std::string_view(call.method), kContainerStores);
      if (!container && (!is_in_place(call.method) || method_of_own_class(m, call))) continue;
      // The attribute written: `self.history.append(h)`, `self.buf.mul_(m).add_(v)`.
      TSNode base = unparenthesize(call.receiver);
      while (!container && kind_of(base) == Kind::Call && kind_of(field(base, "function")) == Kind::Attribute &&
             is_in_place(m.text(field(field(base, "function"), "attribute"))))
        base = unparenthesize(field(field(base, "function"), "object"));
      std::string attribute = m.qualify(base);
      if (!starts_with(attribute, prefix) || meant_for_backward(attribute)) continue;
      Store s;
      s.where = call.node;
      s.kind = container ? StoreKind::Container : StoreKind::InPlace;
      s.attribute = attribute;
      bool fixable = true;
      uint32_t n = is_null(call.args) ? 0 : ts_node_named_child_count(call.args);
      uint32_t position = 0;
      for (uint32_t i = 0; i < n; ++i) {
        TSNode a = ts_node_named_child(call.args, i);
        Kind k = kind_of(a);
        if (k == Kind::Comment) continue;
        bool index_of_insert = call.method == "insert" && k != Kind::KeywordArgument && position++ == 0;
        if (index_of_insert) continue;
        if (k == Kind::KeywordArgument) a = field(a, "value");
        if (k == Kind::ListSplat || k == Kind::DictionarySplat) {
          fixable = false;
          a = ts_node_named_child(a, 0);
        }
        if (taint.of(a, fn)) s.values.push_back(a);
      }
      for (TSNode v : s.values)
        if (fixable) detach_edits(m, taint, v, fn, s.edits);
      if (!fixable) s.edits.clear();
      std::sort(s.edits.begin(), s.edits.end(),
                [](const Edit& a, const Edit& b) { return a.start_byte < b.start_byte; });
      if (!s.values.empty()) out.push_back(std::move(s));
    }
    return out;
  }

  // What the value engine says of the stored value (the position of a
  // tuple the binding unpacks): a module (`self.ema = model.to(device)`), a
  // number or a value known to carry no history is no graph.
  static bool may_hold_graph(const Model& m, const Binding& b, TSNode v) {
    Value value = m.value(v);
    if (b.element >= 0 && kind_of(unparenthesize(b.value)) == Kind::Call) value = value.item(static_cast<size_t>(b.element));
    if (value.kind == ValueKind::Module || value.kind == ValueKind::Number || value.kind == ValueKind::None) return false;
    return value.grad != Provenance::Detached;
  }

  // Whether the file starts the attribute afresh (a value without history)
  // in a function other than `fn` and __init__ that a method of a module
  // calls: forward calling `self.initialize_states()` each call, an owner's
  // decode calling `self.attention.clear_cache()` after its decoding loop or
  // setting `module.causal_cache = None` on every submodule. The state then
  // spans one call of the owner, not the life of the module. A reset that a
  // script calls once after many steps (`model.reset_statistics()` after a
  // gathering loop) is periodic: the module keeps each step's graph meanwhile.
  // A method of the attribute's own class that resets it and that nothing
  // in this file calls goes to `elsewhere` ("Class.method"): an owner in
  // another file may call it (the "owner-calls" facts decide).
  // A dict entry (`self.state["hidden"]`) is reset by a store into the same
  // entry; a value that reads the attribute counts only when detached
  // (`self.h = self.h.detach()`, `self.state["h"] = tuple(h.detach() for h in ...)`).
  static bool reset_by_owner(const Model& m, const Binding& store, int fn, std::vector<std::string>& elsewhere) {
    std::string_view leaf = last_component(store.name);
    bool entry = store.kind == BindingKind::SubscriptStore;
    int own_class = m.functions()[fn].cls;
    for (const Binding& b : m.bindings()) {
      if (b.kind != store.kind || b.element >= 0 || is_null(b.value) || b.function < 0 || b.function == fn) continue;
      if (b.kind != BindingKind::Assign && b.kind != BindingKind::SubscriptStore) continue;
      if (b.name.find('.') == std::string::npos || last_component(b.name) != leaf) continue;
      if (entry && (b.name != store.name || subscript_key(m, b.target) != subscript_key(m, store.target))) continue;
      const Function& f = m.functions()[b.function];
      if (f.name == "__init__" || (!entry && m.mentions(b.value, b.name))) continue;
      if (!m.value(b.value).without_history()) continue;
      bool called = false;
      for (const Call& c : m.calls()) {
        if (call_name(c) != f.name || c.function < 0) continue;
        called = true;
        int owner = m.functions()[c.function].cls;
        if (owner >= 0 && m.module_class(owner) != ModuleAnswer::No) return true;
      }
      TSNode holder = entry ? unparenthesize(field(unparenthesize(b.target), "value")) : b.target;
      if (!called && f.cls == own_class && own_class >= 0 && kind_of(holder) == Kind::Attribute &&
          is_self(m, b.function, attribute_object(holder)))
        elsewhere.push_back(m.classes()[static_cast<size_t>(own_class)].name + "." + f.name);
    }
    return false;
  }

  // The key of a subscript target (`"hidden"` of `self.state["hidden"]`), as written.
  static std::string_view subscript_key(const Model& m, TSNode target) {
    target = unparenthesize(target);
    if (kind_of(target) != Kind::Subscript) return {};
    return m.text(field(target, "subscript"));
  }

  // Whether the store belongs to an initializer of per-call state: a method
  // (`initialize_decoder_states`) that every caller runs unconditionally, in
  // a method of the same class, before it reads the attribute, and that
  // assigns it afresh; and the attribute is read only during those calls
  // (by the callers and the methods they call), not between them. Every
  // call then starts from the new value: the previous call's graph is
  // dropped, never joined. State kept for a later look (`summary()` reading
  // `self.last_features`) stays a finding.
  static bool initialized_per_call(const Model& m, const Binding& b, int fn) {
    const Function& f = m.functions()[fn];
    if (b.kind != BindingKind::Assign || b.loop >= 0 || f.cls < 0 || f.name == "forward" || f.name == "__init__")
      return false;
    if (m.mentions(b.value, b.name) || !unconditional_within(b.statement, f.body)) return false;
    std::vector<int> during{fn};  // the callers, then the methods they call
    for (int index : m.calls_named(f.name)) {
      const Call& c = m.calls()[static_cast<size_t>(index)];
      if (c.function < 0 || !is_self(m, c.function, unparenthesize(c.receiver))) return false;
      const Function& caller = m.functions()[c.function];
      if (caller.cls != f.cls || c.loop >= 0 || !unconditional_within(c.node, caller.body)) return false;
      if (read_before(m, b.name, c.function, start_byte(c.node))) return false;
      if (std::find(during.begin(), during.end(), c.function) == during.end()) during.push_back(c.function);
    }
    if (during.size() == 1) return false;
    for (size_t i = 1; i < during.size(); ++i) {
      for (const Call& c : m.calls()) {
        if (c.function != during[i] || !is_self(m, c.function, unparenthesize(c.receiver))) continue;
        for (int method : m.classes()[static_cast<size_t>(f.cls)].methods)
          if (m.functions()[method].name == c.method && std::find(during.begin(), during.end(), method) == during.end())
            during.push_back(method);
      }
    }
    for (const Reference& r : m.references()) {
      if (r.function < 0 || m.functions()[r.function].cls != f.cls) continue;
      TSNode parent = ts_node_parent(r.node);
      if (kind_of(parent) != Kind::Attribute || !ts_node_eq(field(parent, "object"), r.node) ||
          m.qualify(parent) != b.name)
        continue;
      if (std::find(during.begin(), during.end(), r.function) == during.end()) return false;
    }
    return true;
  }

  // Whether `function` mentions `attribute` (self.x) before byte `at`.
  static bool read_before(const Model& m, std::string_view attribute, int function, uint32_t at) {
    const Function& f = m.functions()[function];
    const auto& refs = m.references();
    auto it = std::lower_bound(refs.begin(), refs.end(), start_byte(f.node),
                               [](const Reference& r, uint32_t byte) { return start_byte(r.node) < byte; });
    for (; it != refs.end() && start_byte(it->node) < at; ++it) {
      if (it->function != function) continue;
      TSNode parent = ts_node_parent(it->node);
      if (kind_of(parent) == Kind::Attribute && ts_node_eq(field(parent, "object"), it->node) &&
          m.qualify(parent) == attribute)
        return true;
    }
    return false;
  }

  // Edits that detach `v`: each element of a literal tuple, list or dict
  // that carries history, else `v` itself.
  static void detach_edits(const Model& m, Taint& taint, TSNode v, int fn, std::vector<Edit>& edits) {
    v = unparenthesize(v);
    Kind k = kind_of(v);
    if (k == Kind::Tuple || k == Kind::List || k == Kind::Dictionary) {
      uint32_t n = ts_node_named_child_count(v);
      for (uint32_t i = 0; i < n; ++i) {
        TSNode e = ts_node_named_child(v, i);
        if (k == Kind::Dictionary) e = field(e, "value");
        if (!is_null(e) && taint.of(e, fn)) detach_edits(m, taint, e, fn, edits);
      }
      return;
    }
    // A list or a tuple of tensors has no `.detach()`: no edit is right.
    Value value = m.value(v);
    if (value.kind == ValueKind::Container || (value.parts && value.kind != ValueKind::Tensor)) return;
    auto e = append_call_edits(m, v, ".detach()");
    edits.insert(edits.end(), e.begin(), e.end());
  }

  static Diagnostic diagnostic(CheckContext& ctx, const Store& s, int fn, int forward) {
    const Model& m = ctx.model();
    const Function& f = m.functions()[fn];
    std::string value(m.text(s.values.front()));
    std::string where =
        fn == forward ? "" : fmt::format(" (`{}` runs in `{}`)", f.name, m.functions()[forward].qualified_name);
    std::string_view text = s.kind == StoreKind::Container  ? messages::TL003::container
                            : s.kind == StoreKind::InPlace  ? messages::TL003::in_place
                            : s.kind == StoreKind::Accumulate ? messages::TL003::accumulates
                                                              : messages::TL003::assigned;
    std::string message = fmt::format(fmt::runtime(text), fmt::arg("member", s.attribute), fmt::arg("value", value),
                                      fmt::arg("where", where));
    Diagnostic d = ctx.diagnostic(s.where, std::move(message));
    if (s.edits.empty()) {
      d.help = fmt::format("store a detached copy: detach `{}` after this line (for an LSTM state, "
                           "`tuple(h.detach() for h in {})`)",
                           s.attribute, s.attribute);
      return d;
    }
    d.help = fmt::format("store `{}` detached (`.detach()`), or compute it under `torch.no_grad()`", value);
    // Unsafe: a value stored to be backpropagated later would silently lose its gradient.
    d.fix = Fix{"Detach the value stored on the module", FixSafety::Unsafe, s.edits};
    return d;
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(ModuleTensorCache, "TL003")

}  // namespace torchleak::python
