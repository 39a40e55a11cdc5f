// The value engine: one abstract interpretation of expressions that every
// rule asks (Model::value). A value has facets (autograd history, device,
// kind) and, where the code shows it, structure (positions, fields, the
// elements of a container). Values are followed through bindings, in-place
// stores into containers, the file's functions and methods (each call's
// returns evaluated with its arguments' values, a context-sensitive summary),
// the values of a function's parameters at its call sites, the library
// models, and the batches frameworks pass to their hooks. Autograd history
// comes from Model::provenance where the structure says nothing more.
#include <algorithm>
#include <filesystem>
#include <array>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "python/model.h"
#include "python/project.h"

namespace torchleak::python {

struct Model::ValueEnv {
  const Function* function = nullptr;
  std::vector<std::pair<std::string_view, Value>> params;
  std::vector<std::pair<std::string_view, TSNode>> arguments;  // the expressions, in the caller
  const ValueEnv* caller = nullptr;
  int level = 0;  // how many calls deep the evaluation is
  // The values computed under this binding of the parameters, and those
  // being computed: each expression of the callee is evaluated once per call.
  mutable std::unordered_map<uint64_t, Value> cache;
  mutable std::unordered_set<uint64_t> in_progress;
};

namespace {

constexpr int kMaxValueDepth = 40;
constexpr int kMaxCallLevel = 3;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
template <size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

constexpr std::array<std::string_view, 4> kAccelerators = {"cuda", "mps", "xpu", "npu"};
// Attributes of a tensor that are metadata, not tensors.
constexpr std::array<std::string_view, 8> kMetadata = {"shape", "dtype", "device", "is_cuda", "requires_grad",
                                                       "ndim", "grad_fn", "is_leaf"};
// Full reductions when called without arguments: one element.
constexpr std::array<std::string_view, 11> kReductions = {"sum", "mean", "max", "min", "norm", "prod",
                                                          "std", "var", "all", "any", "logsumexp"};
// Tensor methods that copy or cast: the result has the receiver's shape.
constexpr std::array<std::string_view, 9> kSameShapeMethods = {"clone", "float", "double", "half", "bfloat16",
                                                               "contiguous", "type", "requires_grad_", "abs"};
// Methods of nn.Module that return the module itself.
constexpr std::array<std::string_view, 10> kModuleSelfMethods = {"eval", "train", "float", "half", "double",
                                                                 "bfloat16", "requires_grad_", "apply",
                                                                 "to_empty", "share_memory"};
// Methods of nn.Module that return no tensor computed from the input.
constexpr std::array<std::string_view, 16> kModuleOtherMethods = {
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "state_dict", "load_state_dict", "zero_grad", "register_buffer",
    "register_parameter", "register_forward_hook", "add_module", "get_submodule"};
// Builtins returning a Python number or string.
constexpr std::array<std::string_view, 8> kNumberBuiltins = {"float", "int", "bool", "len",
                                                             "round", "str", "repr", "isinstance"};
// Builtins building a container of their argument's elements.
constexpr std::array<std::string_view, 5> kContainerBuiltins = {"list", "tuple", "sorted", "reversed", "set"};
// Calls yielding what their first argument yields.
constexpr std::array<std::string_view, 7> kPassThrough = {"tqdm", "iter", "islice", "cycle", "chain",
                                                          "prefetch", "track"};

Value facets(Provenance grad, Device device, ValueKind kind, bool scalar = false) {
  Value v;
  v.grad = grad;
  v.device = device;
  v.kind = kind;
  v.scalar = scalar;
  return v;
}

Value with_kind(Value v, ValueKind kind) {
  v.kind = kind;
  return v;
}

Value container(std::vector<Value> items, std::optional<Value> element) {
  auto parts = std::make_shared<ValueParts>();
  parts->items = std::move(items);
  parts->element = std::move(element);
  Value v;
  v.kind = ValueKind::Container;
  v.parts = std::move(parts);
  return v;
}

// What a model's `result.elements` says iterating a call's result yields.
Value elements_of(const CallModel& cm) {
  Value element;
  element.kind = cm.elements;
  if (cm.pairs) {
    Value name;
    name.grad = Provenance::Detached;
    name.device = Device::Host;
    name.kind = ValueKind::Other;
    element = container({name, element}, std::nullopt);
  }
  Value out = container({}, element);
  out.grad = Provenance::Detached;
  out.device = Device::Host;
  return out;
}

// The facets of a value without its structure: what indexing or slicing a
// tensor, or reading an attribute of an object of unknown structure, gives.
Value flat(const Value& v) {
  Value out = v;
  out.parts.reset();
  out.scalar = false;
  out.cls = -1;
  out.home = nullptr;
  if (out.kind == ValueKind::Container || out.kind == ValueKind::Module) out.kind = ValueKind::Unknown;
  return out;
}

// A tensor of the same shape as `v` (a copy, a move, a cast): its facets
// without its structure, one element when `v` has one.
Value same_shape(const Value& v) {
  Value out = flat(v);
  out.scalar = v.scalar && (v.kind == ValueKind::Tensor || v.kind == ValueKind::Unknown);
  return out;
}

// A tensor computed from operands on these devices.
Device combine(Device a, Device b) {
  if (a == Device::Accelerator || b == Device::Accelerator) return Device::Accelerator;
  if (a == Device::Host && b == Device::Host) return Device::Host;
  return Device::Unknown;
}

std::string_view unquote(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;  // prefixes: b, r, f
  s = s.substr(i);
  if (s.size() >= 6 && (s.substr(0, 3) == "\"\"\"" || s.substr(0, 3) == "'''")) return s.substr(3, s.size() - 6);
  if (s.size() >= 2) return s.substr(1, s.size() - 2);
  return s;
}

// `v` with the field `key` holding `value` only; the summary of its
// elements is the join of its fields when it has nothing but fields.
Value with_field(const Value& v, const std::string& key, const Value& value) {
  if (!v.parts) return v;
  auto parts = std::make_shared<ValueParts>(*v.parts);
  parts->fields.erase(std::remove_if(parts->fields.begin(), parts->fields.end(),
                                     [&](const auto& f) { return f.first == key; }),
                      parts->fields.end());
  parts->fields.emplace_back(key, value);
  if (parts->items.empty()) {
    std::optional<Value> element;
    for (const auto& f : parts->fields) element = element ? join(*element, f.second) : f.second;
    parts->element = element;
  }
  Value out = v;
  out.parts = std::move(parts);
  if (out.parts->element && out.grad != Provenance::Unknown) out.grad = out.parts->element->grad;
  return out;
}

// `v` as seen from the model `to` when `from` computed it: an instance of a
// class of `from` names `from` as its home, one of `to` names none.
Value rehome(const Value& v, const Model* from, const Model* to) {
  Value out = v;
  if (out.cls >= 0) {
    if (!out.home) out.home = from;
    if (out.home == to) out.home = nullptr;
  }
  if (v.parts) {
    auto parts = std::make_shared<ValueParts>(*v.parts);
    for (Value& item : parts->items) item = rehome(item, from, to);
    for (auto& [name, field] : parts->fields) field = rehome(field, from, to);
    if (parts->element) parts->element = rehome(*parts->element, from, to);
    out.parts = std::move(parts);
  }
  return out;
}

}  // namespace

Device join(Device a, Device b) {
  if (a == b) return a;
  if (a == Device::Accelerator || b == Device::Accelerator) return Device::Accelerator;
  return Device::Unknown;
}

Value join(const Value& a, const Value& b) {
  Value out;
  out.grad = join(a.grad, b.grad);
  out.device = join(a.device, b.device);
  out.kind = a.kind == b.kind ? a.kind : ValueKind::Unknown;
  out.scalar = a.scalar && b.scalar;
  bool same_class = a.cls == b.cls && a.home == b.home;
  out.cls = same_class ? a.cls : -1;
  out.home = same_class ? a.home : nullptr;
  // An optional object (`decoder = None`, later `decoder = Decoder()`): what
  // it is when it is something; a use of None would fail.
  if (a.kind == ValueKind::None || b.kind == ValueKind::None) {
    const Value& some = a.kind == ValueKind::None ? b : a;
    if (some.kind == ValueKind::Module || some.kind == ValueKind::Other || some.kind == ValueKind::Optimizer ||
        some.kind == ValueKind::Loader || some.kind == ValueKind::Generator) {
      out.kind = some.kind;
      out.cls = some.cls;
      out.home = some.home;
    }
  }
  if (!a.parts) {
    out.parts = b.parts;
  } else if (!b.parts) {
    out.parts = a.parts;
  } else {
    auto parts = std::make_shared<ValueParts>();
    const ValueParts& pa = *a.parts;
    const ValueParts& pb = *b.parts;
    if (pa.items.size() == pb.items.size()) {
      for (size_t i = 0; i < pa.items.size(); ++i) parts->items.push_back(join(pa.items[i], pb.items[i]));
    }
    parts->fields = pa.fields;
    for (const auto& entry : pb.fields) {
      // (not a structured binding: clang 14 cannot capture one in a lambda)
      auto it = std::find_if(parts->fields.begin(), parts->fields.end(),
                             [&](const auto& f) { return f.first == entry.first; });
      if (it == parts->fields.end()) parts->fields.push_back(entry);
      else it->second = join(it->second, entry.second);
    }
    if (pa.element && pb.element) parts->element = join(*pa.element, *pb.element);
    else parts->element = pa.element ? pa.element : pb.element;
    out.parts = std::move(parts);
  }
  return out;
}

namespace {
// Whether `v` or any value it holds (positions, fields, elements) satisfies `test`.
template <class F>
bool any_part(const Value& v, const F& test) {
  if (test(v)) return true;
  if (!v.parts) return false;
  for (const Value& item : v.parts->items)
    if (any_part(item, test)) return true;
  for (const auto& f : v.parts->fields)
    if (any_part(f.second, test)) return true;
  return v.parts->element && any_part(*v.parts->element, test);
}
}  // namespace

bool Value::holds_device_tensors() const {
  return any_part(*this, [](const Value& v) { return v.device == Device::Accelerator && !v.scalar; });
}

bool Value::without_history() const {
  if (grad == Provenance::Detached) return true;
  if (kind != ValueKind::Container || !parts) return false;
  if (parts->items.empty() && !parts->element) return false;
  return std::all_of(parts->items.begin(), parts->items.end(), [](const Value& i) { return i.without_history(); }) &&
         (!parts->element || parts->element->without_history());
}

bool Value::on_accelerator() const {
  return any_part(*this, [](const Value& v) { return v.device == Device::Accelerator; });
}

Value Value::item(size_t index) const {
  if (parts) {
    if (index < parts->items.size()) return parts->items[index];
    return element();
  }
  if (kind == ValueKind::Tensor || kind == ValueKind::Unknown || kind == ValueKind::ModelOutput) return flat(*this);
  return {};
}

Value Value::field(std::string_view name) const {
  if (parts) {
    for (const auto& f : parts->fields)
      if (f.first == name) return f.second;
    if (parts->element) return *parts->element;
    return {};
  }
  if (kind == ValueKind::Tensor || kind == ValueKind::Unknown || kind == ValueKind::ModelOutput) return flat(*this);
  return {};
}

Value Value::element() const {
  if (parts) {
    if (parts->element) return *parts->element;
    std::optional<Value> all;
    for (const Value& v : parts->items) all = all ? join(*all, v) : v;
    for (const auto& f : parts->fields) all = all ? join(*all, f.second) : f.second;
    return all ? *all : Value{};
  }
  if (kind == ValueKind::Tensor || kind == ValueKind::Unknown) return flat(*this);
  if (kind == ValueKind::Loader) return facets(Provenance::Detached, Device::Host, ValueKind::Unknown);
  return {};
}

Value Model::value(TSNode expr) const { return value_at(expr, nullptr, 0); }

void Model::bind_arguments(const Function& f, bool method, const Call& call, const ValueEnv* caller, int depth,
                           ValueEnv& inner) const {
  inner.function = &f;
  inner.caller = caller;
  inner.level = (caller ? caller->level : 0) + 1;
  for (size_t i = method ? 1 : 0; i < f.params.size(); ++i) {
    TSNode arg = argument_for(call, f, i, method);
    if (is_null(arg)) continue;
    inner.params.emplace_back(f.params[i], value_at(arg, caller, depth));
    inner.arguments.emplace_back(f.params[i], arg);
  }
}

Value Model::value_in_call(TSNode expr, const Call& call) const {
  int fn = function_at(start_byte(expr));
  if (fn < 0) return value(expr);
  const Function& f = functions_[fn];
  ValueEnv env;
  bind_arguments(f, f.cls >= 0 && !function_has_decorator(fn, "staticmethod"), call, nullptr, 0, env);
  return value_at(expr, &env, 1);
}

bool Model::carries_history(TSNode expr) const {
  // A dict of known fields (`{"loss": loss.detach(), "metrics": m}`): what they hold.
  auto history = [](const Value& v, int depth, auto& self) -> Provenance {
    if (v.grad != Provenance::Unknown || depth > 4) return v.grad;
    if (!v.parts || v.parts->fields.empty() || !v.parts->items.empty()) return Provenance::Unknown;
    Provenance out = Provenance::Detached;
    for (const auto& f : v.parts->fields) out = join(out, self(f.second, depth + 1, self));
    if (v.parts->element && v.parts->element->grad == Provenance::Attached) out = Provenance::Attached;
    return out;
  };
  Provenance engine = history(value(expr), 0, history);
  if (engine != Provenance::Unknown) return engine == Provenance::Attached;
  return provenance(expr) == Provenance::Attached;
}

Value Model::value_at(TSNode expr, const ValueEnv* env, int depth) const {
  expr = unparenthesize(expr);
  if (is_null(expr) || depth > kMaxValueDepth) return {};
  uint64_t key = node_key(expr);
  auto& cache = env ? env->cache : value_cache_;
  auto& in_progress = env ? env->in_progress : value_in_progress_;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (!in_progress.insert(key).second) return {};  // a cycle
  Value v = value_uncached(expr, env, depth);
  Kind k = kind_of(expr);
  // Nothing computed with grad disabled records history.
  if ((k == Kind::Call || k == Kind::BinaryOperator || k == Kind::UnaryOperator) &&
      grad_state(start_byte(expr)) == GradState::Disabled && v.kind != ValueKind::Module)
    v.grad = Provenance::Detached;
  if (v.grad == Provenance::Unknown && !v.parts) v.grad = provenance_at(expr, 0);
  in_progress.erase(key);
  cache[key] = v;
  return v;
}

Value Model::value_uncached(TSNode expr, const ValueEnv* env, int depth) const {
  switch (kind_of(expr)) {
    case Kind::Integer:
    case Kind::Float: return facets(Provenance::Detached, Device::Host, ValueKind::Number, true);
    case Kind::String:
    case Kind::True:
    case Kind::False:
    case Kind::ComparisonOperator:
    case Kind::NotOperator: return facets(Provenance::Detached, Device::Host, ValueKind::Other, true);
    case Kind::None: return facets(Provenance::Detached, Device::Host, ValueKind::None, true);
    case Kind::UnaryOperator:
    case Kind::Await: {
      uint32_t n = ts_node_named_child_count(expr);
      return n ? value_at(ts_node_named_child(expr, n - 1), env, depth + 1) : Value{};
    }
    case Kind::BinaryOperator: {
      Value a = value_at(field(expr, "left"), env, depth + 1);
      Value b = value_at(field(expr, "right"), env, depth + 1);
      if (a.kind == ValueKind::Container && b.kind == ValueKind::Container)  // [x] + [y]
        return container({}, join(a.element(), b.element()));
      Value out;
      out.grad = join(a.grad, b.grad);
      out.device = combine(a.device, b.device);
      out.kind = a.kind == ValueKind::Tensor || b.kind == ValueKind::Tensor ? ValueKind::Tensor
                 : a.kind == ValueKind::Number && b.kind == ValueKind::Number ? ValueKind::Number
                                                                             : ValueKind::Unknown;
      out.scalar = a.scalar && b.scalar;
      return out;
    }
    case Kind::BooleanOperator:
      return join(value_at(field(expr, "left"), env, depth + 1), value_at(field(expr, "right"), env, depth + 1));
    case Kind::ConditionalExpression: {
      // `a if cond else b`; a test of the machine (`"cuda" if
      // torch.cuda.is_available() else "cpu"`) takes the branch of the runs
      // the rules are about.
      if (ts_node_named_child_count(expr) < 3) return {};
      Value yes = value_at(ts_node_named_child(expr, 0), env, depth + 1);
      if (is_environment_check(ts_node_named_child(expr, 1))) return yes;
      return join(yes, value_at(ts_node_named_child(expr, 2), env, depth + 1));
    }
    case Kind::Tuple:
    case Kind::List:
    case Kind::Set:
    case Kind::ExpressionList: {
      std::vector<Value> items;
      Provenance grad = Provenance::Detached;
      for_each_named_child(expr, [&](TSNode n) {
        if (kind_of(n) == Kind::Comment) return;
        if (kind_of(n) == Kind::ListSplat) {  // [*a, b]: positions are no longer known
          items.push_back(value_at(ts_node_named_child(n, 0), env, depth + 1).element());
          return;
        }
        items.push_back(value_at(n, env, depth + 1));
        grad = join(grad, items.back().grad);
      });
      std::optional<Value> element;
      for (const Value& v : items) element = element ? join(*element, v) : v;
      Value out = container(std::move(items), std::move(element));
      out.grad = grad;
      return out;
    }
    case Kind::Dictionary: {
      auto parts = std::make_shared<ValueParts>();
      for_each_named_child(expr, [&](TSNode pair) {
        if (kind_of(pair) == Kind::Comment) return;
        if (kind_of(pair) == Kind::DictionarySplat) {
          Value other = value_at(ts_node_named_child(pair, 0), env, depth + 1);
          if (other.parts) parts->fields.insert(parts->fields.end(), other.parts->fields.begin(), other.parts->fields.end());
          Value e = other.element();
          parts->element = parts->element ? join(*parts->element, e) : e;
          return;
        }
        Value v = value_at(field(pair, "value"), env, depth + 1);
        TSNode key = field(pair, "key");
        if (kind_of(key) == Kind::String) parts->fields.emplace_back(std::string(unquote(text(key))), v);
        parts->element = parts->element ? join(*parts->element, v) : v;
      });
      Value out;
      out.kind = ValueKind::Container;
      out.parts = std::move(parts);
      return out;
    }
    case Kind::ListComprehension:
    case Kind::SetComprehension:
    case Kind::GeneratorExpression: return container({}, value_at(field(expr, "body"), env, depth + 1));
    case Kind::DictionaryComprehension: {
      TSNode body = field(expr, "body");
      TSNode v = field(body, "value");
      return container({}, value_at(is_null(v) ? body : v, env, depth + 1));
    }
    case Kind::Subscript: {
      Value object = value_at(field(expr, "value"), env, depth + 1);
      TSNode key = unparenthesize(field(expr, "subscript"));
      switch (kind_of(key)) {
        case Kind::String: return object.field(unquote(text(key)));
        case Kind::Integer: {
          std::string digits(text(key));
          size_t index = digits.size() < 9 ? std::stoul(digits) : 0;
          return object.item(index);
        }
        default:
          // A slice of a container is a container of the same elements.
          if (kind_of(key) == Kind::Other && object.kind == ValueKind::Container &&
              text(key).find(':') != std::string_view::npos)
            return container({}, object.element());
          return object.element();
      }
    }
    case Kind::Call: return call_value(expr, env, depth);
    case Kind::Attribute: {
      std::string_view attr = text(field(expr, "attribute"));
      if (one_of(attr, kMetadata)) return facets(Provenance::Detached, Device::Host, ValueKind::Other);
      std::string q = qualify(expr);
      int fn = function_at(start_byte(expr));
      if (starts_with(q, "self.")) {
        Value v;
        if (const Binding* b = attribute_binding(q, fn)) v = binding_value(*b, nullptr, depth + 1);
        if (v.kind == ValueKind::Unknown && is_module_instance(expr)) v.kind = ValueKind::Module;
        if (v.kind == ValueKind::Module && module_moved_in_place(q, fn)) v.device = Device::Accelerator;
        return v;
      }
      Value object = value_at(field(expr, "object"), env, depth + 1);
      if (attr == "data" || attr == "grad") {
        Value v = flat(object);
        v.grad = Provenance::Detached;
        return v;
      }
      if (object.cls >= 0) {  // a property of a project class: what its getter returns
        const Model& home = object.home ? *object.home : *this;
        const Function* getter = home.find_method(object.cls, attr);
        int level = env ? env->level : 0;
        if (getter && level < kMaxCallLevel &&
            home.function_has_decorator(static_cast<int>(getter - home.functions_.data()), "property"))
          return rehome(home.returns_given(*getter, {}, {}, level + 1), &home, this);
      }
      if (object.kind == ValueKind::Module) {  // a submodule, a parameter or a buffer
        Value v = facets(Provenance::Unknown, object.device, ValueKind::Unknown);
        if (is_module_instance(expr)) v.kind = ValueKind::Module;
        return v;
      }
      return object.field(attr);
    }
    case Kind::Identifier: {
      std::string_view name = text(expr);
      int fn = function_at(start_byte(expr));
      if (name == "self" && fn >= 0) {
        int cls = functions_[fn].cls;
        return facets(Provenance::Unknown, Device::Unknown,
                      cls >= 0 && module_class(cls) == ModuleAnswer::Yes ? ValueKind::Module : ValueKind::Other);
      }
      const Binding* b = reaching(name, start_byte(expr), fn);
      if (!b) return {};
      Value v;
      if (b->kind == BindingKind::Parameter && env && b->function >= 0 && env->function == &functions_[b->function]) {
        for (const auto& [param, arg] : env->params)
          if (param == name) v = arg;
      } else {
        v = binding_value(*b, env, depth + 1);
      }
      if (b->function == fn) {
        std::vector<std::pair<std::string, Value>> replaced;
        Value stored = stored_into(name, b, start_byte(expr), fn, env, depth, &replaced);
        // `buf[i] = x` writes into a tensor, which stays one (a buffer made
        // once before the loop, not a container that grows).
        if (stored.parts) v = v.kind == ValueKind::Tensor ? with_kind(join(v, stored), ValueKind::Tensor) : join(v, stored);
        // `out["loss"] = out["loss"].detach()` right after the binding, in
        // its block: the field holds the new value only (a strong update).
        for (auto& [key, value] : replaced) v = with_field(v, key, value);
      }
      if (v.cls < 0) {
        // `assert isinstance(x, C)`, `if isinstance(x, C):`, `x: C`: an
        // instance of a project class (the annotation only where nothing
        // else is known).
        if (auto instance = narrowed_instance(expr, *b, v.kind == ValueKind::Unknown || v.kind == ValueKind::Other))
          v = *instance;
      }
      if (v.kind == ValueKind::Unknown && is_module_instance(expr)) v.kind = ValueKind::Module;
      if (v.kind == ValueKind::Module && v.device != Device::Accelerator && module_moved_in_place(name, fn))
        v.device = Device::Accelerator;
      return v;
    }
    default: return {};
  }
}

std::optional<Value> Model::class_instance(TSNode class_expr) const {
  class_expr = unparenthesize(class_expr);
  if (kind_of(class_expr) == Kind::Identifier) {
    if (const Class* k = find_class(text(class_expr)); k && k->function < 0) {
      int cls = static_cast<int>(k - classes_.data());
      return facets(Provenance::Unknown, Device::Unknown, class_is_module(cls) ? ValueKind::Module : ValueKind::Other)
          .with_class(cls, nullptr);
    }
  }
  if (kind_of(class_expr) != Kind::Identifier && kind_of(class_expr) != Kind::Attribute) return std::nullopt;
  auto def = foreign_definition(class_expr);
  if (!def || def->cls < 0) return std::nullopt;
  return facets(Provenance::Unknown, Device::Unknown,
                def->model->class_is_module(def->cls) ? ValueKind::Module : ValueKind::Other)
      .with_class(def->cls, def->model);
}

std::optional<Value> Model::narrowed_instance(TSNode use, const Binding& b, bool annotations) const {
  std::string_view name = text(use);
  // `isinstance(name, C)` as `test`, or one operand of an `and` in it.
  auto tested = [&](TSNode test, auto& self) -> std::optional<Value> {
    test = unparenthesize(test);
    if (kind_of(test) == Kind::BooleanOperator && text(field(test, "operator")) == "and") {
      if (auto v = self(field(test, "left"), self)) return v;
      return self(field(test, "right"), self);
    }
    if (kind_of(test) != Kind::Call || text(field(test, "function")) != "isinstance") return std::nullopt;
    Call c{};
    c.args = field(test, "arguments");
    TSNode subject = unparenthesize(positional_argument(c, 0));
    if (kind_of(subject) != Kind::Identifier || text(subject) != name) return std::nullopt;
    return class_instance(positional_argument(c, 1));
  };
  // Walk out from the use to its function: an assert before it in an
  // enclosing block, or an `if` whose body holds it, after the binding.
  // Only in a function that tests isinstance at all (ts_node_parent walks
  // down from the root: too slow to ask for every name).
  int fn = function_at(start_byte(use));
  if (fn >= 0 && isinstance_tests_.empty()) isinstance_tests_.assign(functions_.size(), -1);
  if (fn >= 0 && isinstance_tests_[fn] < 0)
    isinstance_tests_[fn] = text(functions_[fn].body).find("isinstance") != std::string_view::npos ? 1 : 0;
  // And only when some isinstance() there tests this very name.
  auto tests_name = [&] {
    std::string_view body = text(functions_[fn].body);
    for (size_t at = body.find("isinstance"); at != std::string_view::npos; at = body.find("isinstance", at + 1)) {
      size_t i = at + 10;
      while (i < body.size() && (body[i] == '(' || std::isspace(static_cast<unsigned char>(body[i])))) ++i;
      if (body.substr(i, name.size()) != name) continue;
      size_t end = i + name.size();
      if (end < body.size() && (std::isalnum(static_cast<unsigned char>(body[end])) || body[end] == '_')) continue;
      return true;
    }
    return false;
  };
  TSNode child = use;
  for (TSNode n = fn >= 0 && isinstance_tests_[fn] && tests_name() ? ts_node_parent(use) : TSNode{}; !is_null(n);
       child = n, n = ts_node_parent(n)) {
    Kind k = kind_of(n);
    if (k == Kind::FunctionDefinition || k == Kind::ClassDefinition || k == Kind::Lambda) break;
    if (k == Kind::Block) {
      for (TSNode s = ts_node_prev_named_sibling(child); !is_null(s); s = ts_node_prev_named_sibling(s)) {
        if (start_byte(s) < b.end) break;
        if (kind_of(s) == Kind::AssertStatement && ts_node_named_child_count(s) > 0)
          if (auto v = tested(ts_node_named_child(s, 0), tested)) return v;
      }
    } else if (k == Kind::IfStatement && ts_node_eq(child, field(n, "consequence")) && start_byte(n) >= b.end) {
      if (auto v = tested(field(n, "condition"), tested)) return v;
    }
    if (start_byte(n) < b.end) break;  // the binding is inside: nothing before it narrows
  }
  // A parameter annotated with a project class.
  if (annotations && b.kind == BindingKind::Parameter && !is_null(b.statement)) {
    TSNode param = b.statement;
    if (!is_null(param) && (kind_of(param) == Kind::TypedParameter || kind_of(param) == Kind::TypedDefaultParameter)) {
      TSNode type = field(param, "type");
      if (!is_null(type) && ts_node_named_child_count(type) == 1) return class_instance(ts_node_named_child(type, 0));
    }
  }
  return std::nullopt;
}

Value Model::stored_into(std::string_view name, const Binding* from, uint32_t use, int function, const ValueEnv* env,
                         int depth, std::vector<std::pair<std::string, Value>>* replaced) const {
  // `x[k] = v` and `x.append(v)` after the binding that reaches `use`: what
  // the container holds now. A store later in an enclosing loop's body also
  // reaches the next iteration's reads.
  auto reaches = [&](uint32_t at) {
    if (from && at < from->end) return false;
    if (at < use) return true;
    // The loops whose body holds `use` (not the iterable of a for loop,
    // which is read once before its iterations).
    int loop = innermost_loop(use, function);
    while (loop >= 0 && kind_of(loops_[loop].node) == Kind::ForStatement &&
           use < start_byte(field(loops_[loop].node, "body")))
      loop = loops_[loop].parent;
    return loop >= 0 && loop_contains(loop, at) && (!from || !loop_contains(loop, from->start));
  };
  std::optional<Value> element;
  auto parts = std::make_shared<ValueParts>();
  for (const Binding* s : bindings_of(name, function)) {
    if (s->kind != BindingKind::SubscriptStore || s->name != name || !reaches(s->start)) continue;
    if (kind_of(unparenthesize(s->target)) != Kind::Subscript || text(field(unparenthesize(s->target), "value")) != name)
      continue;
    TSNode v = s->value;
    if (s->element >= 0) continue;  // `a[i], b[i] = ...`: not followed
    Value stored = value_at(v, env, depth + 1);
    TSNode key = unparenthesize(field(unparenthesize(s->target), "subscript"));
    if (kind_of(key) == Kind::String) {
      parts->fields.emplace_back(std::string(unquote(text(key))), stored);
      // A store that every path from the binding to `use` runs: a statement
      // of the binding's own block, between the two.
      if (replaced && from && s->start >= from->end && s->end <= use) {
        auto block_of = [](TSNode statement) {
          TSNode p = ts_node_parent(statement);
          if (kind_of(p) == Kind::ExpressionStatement) p = ts_node_parent(p);
          return kind_of(p) == Kind::Block ? p : TSNode{};
        };
        TSNode block = block_of(s->statement);
        if (!is_null(block) && ts_node_eq(block, block_of(from->statement)) && start_byte(block) <= use &&
            use < end_byte(block))
          replaced->emplace_back(std::string(unquote(text(key))), stored);
      }
    }
    element = element ? join(*element, stored) : stored;
  }
  if (auto it = stores_by_container_.find(std::string(name)); it != stores_by_container_.end()) {
    for (int i : it->second) {
      const Call& c = calls_[i];
      if (c.function != function || !reaches(start_byte(c.node))) continue;
      TSNode arg = positional_argument(c, c.method == "insert" ? 1 : 0);
      if (is_null(arg)) continue;
      Value stored = value_at(arg, env, depth + 1);
      if (c.method == "extend") stored = stored.element();
      element = element ? join(*element, stored) : stored;
    }
  }
  if (!element) return {};
  parts->element = std::move(element);
  Value out;
  out.grad = parts->element->grad;
  out.parts = std::move(parts);
  return out;
}

Value Model::binding_value(const Binding& b, const ValueEnv* env, int depth) const {
  switch (b.kind) {
    case BindingKind::Assign:
    case BindingKind::NamedExpr: {
      TSNode v = unparenthesize(b.value);
      if (b.element < 0) return value_at(v, env, depth + 1);
      Kind k = kind_of(v);
      if ((k == Kind::Tuple || k == Kind::ExpressionList || k == Kind::List) &&
          static_cast<uint32_t>(b.element) < ts_node_named_child_count(v))
        return value_at(ts_node_named_child(v, static_cast<uint32_t>(b.element)), env, depth + 1);
      Value whole = value_at(v, env, depth + 1);
      Value out = whole.item(static_cast<size_t>(b.element));
      // `_, predicted = out.max(1)`, `torch.topk(x, k)`: the indices carry no history.
      if (b.element == 1 && k == Kind::Call) {
        TSNode func = unparenthesize(field(v, "function"));
        std::string_view name = kind_of(func) == Kind::Attribute ? text(field(func, "attribute")) : text(func);
        if (size_t dot = name.rfind('.'); dot != std::string_view::npos) name = name.substr(dot + 1);
        if (returns_values_and_indices(name)) out.grad = Provenance::Detached;
      }
      return out;
    }
    case BindingKind::AugAssign: {
      const Binding* prev = reaching(b.name, b.start, b.function);
      Value before = prev ? binding_value(*prev, env, depth + 1) : Value{};
      Value add = value_at(b.value, env, depth + 1);
      if (before.kind == ValueKind::Container) return join(before, container({}, add.element()));
      Value out = join(before, add);
      out.device = combine(before.device, add.device);
      return out;
    }
    case BindingKind::ForTarget: {
      TSNode iterable = field(b.statement, "right");
      Value over = value_at(iterable, env, depth + 1);
      // `for layer in self.layers`: what iterating a module yields, when a model says.
      if (over.kind == ValueKind::Module) {
        std::string cls = class_of(iterable);
        const CallModel* cm = cls.empty() ? nullptr : library().method(cls, "__iter__");
        if (cm && cm->elements != ValueKind::Unknown) over = elements_of(*cm);
      }
      Value element = over.element();
      // A batch from a data loader: data, on the host, without history.
      bool data = is_data_loader(iterable);
      if (element.device == Device::Unknown && !element.parts && data)
        element = facets(Provenance::Detached, Device::Host, ValueKind::Unknown);
      Value out = b.element >= 0 ? element.item(static_cast<size_t>(b.element)) : element;
      if (b.inner >= 0) {
        out = out.item(static_cast<size_t>(b.inner));
        // `for i, (x, y) in enumerate(loader)`: the batch's parts are data too.
        if (out.device == Device::Unknown && !out.parts && out.kind == ValueKind::Unknown && data)
          out = facets(Provenance::Detached, Device::Host, ValueKind::Unknown);
      }
      return out;
    }
    case BindingKind::Parameter: {
      if (b.function < 0) return {};
      const Function& f = functions_[b.function];
      size_t index = 0;
      while (index < f.params.size() && f.params[index] != b.name) ++index;
      bool method = f.cls >= 0 && !function_has_decorator(b.function, "staticmethod");
      if (f.hook && f.hook->batch && index == f.hook->batch->index + (method ? 1u : 0u)) {
        // An iterator over the batches: what it yields is not moved for the hook.
        if (b.name == f.hook->batch_iterator) return {};
        return facets(Provenance::Detached, Device::Accelerator, ValueKind::Unknown);
      }
      if (method && index == 0) return {};
      // Annotated as a plain Python value: `attention_head_dim: int`.
      if (TSNode type = field(b.statement, "type"); !is_null(type)) {
        std::string_view t = text(type);
        if (t.starts_with("Optional[") && t.ends_with("]")) t = t.substr(9, t.size() - 10);
        if (t == "int" || t == "float" || t == "bool" || t == "complex")
          return facets(Provenance::Detached, Device::Host, ValueKind::Number, true);
        if (t == "str") return facets(Provenance::Detached, Device::Host, ValueKind::Other, true);
      }
      Value v = parameter_value(f, index, depth + 1);
      if (!is_null(b.value)) v = join(v, value_at(b.value, env, depth + 1));
      return v;
    }
    case BindingKind::Import: {
      // A name another file of the project binds at module level (a
      // constant, a model built there): its value in that file.
      if (resolves_imports_ && !path_.empty()) {
        if (auto def = foreign_import(b.name); def && def->binding) {
          const Binding& there = *def->binding;
          Value v = def->model->value(there.value);
          if (there.element >= 0) v = v.item(static_cast<size_t>(there.element));
          return rehome(v, def->model, this);
        }
      }
      return facets(Provenance::Detached, Device::Host, ValueKind::Other);
    }
    default: return {};
  }
}

const std::vector<int>& Model::calls_named(std::string_view name) const {
  if (!calls_indexed_) {
    calls_indexed_ = true;
    for (size_t i = 0; i < calls_.size(); ++i) {
      std::string_view n = call_name(calls_[i]);
      auto it = calls_by_name_.find(n);
      if (it == calls_by_name_.end()) it = calls_by_name_.emplace(std::string(n), std::vector<int>{}).first;
      it->second.push_back(static_cast<int>(i));
    }
  }
  static const std::vector<int> kNone;
  auto it = calls_by_name_.find(name);
  return it == calls_by_name_.end() ? kNone : it->second;
}

// Whether a method of a builtin container (dict, list, set) of this name
// accepts the call's positional arguments: `stats.update(x)` may be a
// dict's, `metric.update(preds, target)` cannot be.
bool Model::builtin_container_could_take(std::string_view name, const Call& c) const {
  static const std::unordered_map<std::string_view, uint32_t> kMaxPositional = {
      {"update", 1}, {"append", 1}, {"extend", 1}, {"add", 1}, {"remove", 1}, {"discard", 1},
      {"insert", 2}, {"get", 2}, {"pop", 2}, {"setdefault", 2}, {"index", 3}, {"count", 1},
      {"clear", 0}, {"copy", 0}, {"items", 0}, {"keys", 0}, {"values", 0}, {"sort", 0}, {"reverse", 0},
      {"popitem", 0}, {"union", 255}, {"intersection", 255}, {"difference", 255}};
  auto it = kMaxPositional.find(name);
  return it != kMaxPositional.end() && positional_count(c) <= it->second;
}

std::vector<const Call*> Model::call_sites(const Function& f) const {
  std::vector<const Call*> out;
  bool method = f.cls >= 0;
  if (method && f.name == "__init__") {
    // A constructor's calls are the calls of its class: `Trainer(model)`.
    const std::string& cls = classes_[static_cast<size_t>(f.cls)].name;
    for (int i : calls_named(cls)) {
      const Call& c = calls_[i];
      if (c.method.empty() && kind_of(unparenthesize(c.func)) == Kind::Identifier && find_class(cls) == &classes_[f.cls])
        out.push_back(&c);
    }
    return out;
  }
  const std::vector<int>& found = calls_named(f.name);
  // A receiver of unknown class (`metric.update(p, t)` with `metric` a
  // parameter; a module of unknown class for a method of a module class)
  // calls the method when it is the only definition of the name in the file,
  // not a tensor method, and not a call a builtin container's method of that
  // name could take.
  std::optional<bool> only_definition;
  auto sole = [&] {
    if (!only_definition) {
      only_definition = !f.name.starts_with("__") &&
                        std::count_if(functions_.begin(), functions_.end(), [&](const Function& g) {
                          return g.name == f.name && (g.cls >= 0 || g.parent < 0);
                        }) == 1;
    }
    return *only_definition;
  };
  for (int i : found) {
    const Call& c = calls_[i];
    if (method) {
      if (c.method.empty()) continue;
      TSNode receiver = unparenthesize(c.receiver);
      if (text(receiver) == "self") {
        if (class_of_function(c.function) == f.cls) out.push_back(&c);  // `self.update(x)` in the class
        continue;
      }
      if (kind_of(receiver) != Kind::Identifier) continue;
      Value v = value(receiver);
      if (v.cls == f.cls && v.home == nullptr) {
        out.push_back(&c);  // `meter.update(x)` on an instance
      } else if (v.cls < 0 && (v.kind == ValueKind::Unknown || (v.kind == ValueKind::Module && class_is_module(f.cls))) &&
                 class_of(receiver).empty() &&
                 !library().tensor_method(f.name) && !builtin_container_could_take(f.name, c) && sole()) {
        out.push_back(&c);
      }
    } else if (c.method.empty() && kind_of(unparenthesize(c.func)) == Kind::Identifier) {
      out.push_back(&c);
    }
  }
  return out;
}

Value Model::parameter_value(const Function& f, size_t index, int depth) const {
  // The join of the arguments at every call site in the file; Unknown when
  // there is none, or one passes the parameter in a way not followed.
  if (index >= f.params.size() || depth > kMaxValueDepth) return {};
  uint64_t key = (uint64_t{1} << 63) | (static_cast<uint64_t>(&f - functions_.data()) << 16) | index;
  if (!value_in_progress_.insert(key).second) return {};
  std::optional<Value> out;
  std::vector<const Call*> sites = call_sites(f);
  if (sites.empty()) {
    // A module's hook: (module, inputs, output) from each call of the module.
    // A `functools.partial` hook's bound arguments come first: what they
    // are is not followed.
    size_t self = f.cls >= 0 ? 1 : 0;
    for (const HookSite& site : hook_sites(static_cast<int>(&f - functions_.data()))) {
      size_t position = index - self - site.bound;
      if (!site.call || site.runs == ModuleHookRuns::Backward || index < self + site.bound || position > 2 ||
          std::find(site.keywords.begin(), site.keywords.end(), f.params[index]) != site.keywords.end() ||
          (position == 2 && site.runs != ModuleHookRuns::Forward)) {
        out.reset();
        break;
      }
      Value v = position == 0   ? value_at(site.call->func, nullptr, depth + 1)
                : position == 1 ? arguments_joined(site.call->args, nullptr, depth)
                                : value_at(site.call->node, nullptr, depth + 1);
      out = out ? join(*out, v) : v;
    }
    value_in_progress_.erase(key);
    return out ? *out : Value{};
  }
  for (const Call* c : sites) {
    TSNode arg = argument_for(*c, f, index, f.cls >= 0);
    if (is_null(arg)) {
      out.reset();
      break;
    }
    Value v = value_at(arg, nullptr, depth + 1);
    out = out ? join(*out, v) : v;
  }
  value_in_progress_.erase(key);
  return out ? *out : Value{};
}

Value Model::arguments_joined(TSNode args, const ValueEnv* env, int depth) const {
  std::optional<Value> all;
  for_each_named_child(args, [&](TSNode a) {
    Kind k = kind_of(a);
    if (k == Kind::Comment) return;
    Value v;
    if (k == Kind::KeywordArgument) v = value_at(field(a, "value"), env, depth + 1);
    else if (k == Kind::ListSplat || k == Kind::DictionarySplat) v = value_at(ts_node_named_child(a, 0), env, depth + 1);
    else v = value_at(a, env, depth + 1);
    all = all ? join(*all, v) : v;
  });
  return container({}, all ? *all : Value{});
}

Value Model::module_output(TSNode call, const Value& module, const ValueEnv* env, int depth) const {
  Value out;
  out.grad = provenance_at(call, 0);
  Value arguments = arguments_joined(field(call, "arguments"), env, depth);
  if (module.device == Device::Accelerator || arguments.on_accelerator()) out.device = Device::Accelerator;
  // A module without trainable parameters records no graph of its own: its
  // output has history when its input has.
  if (trainable_parameters(module) == Truth::False) {
    out.grad = arguments.element().grad;
    return out;
  }
  // A module of a library whose model says more of its output: fields and
  // positions with their own history (Transformer-XL's `mems`).
  if (module.cls < 0) {
    std::string cls = class_of(field(call, "function"));
    const CallModel* cm = cls.empty() ? nullptr : library().method(cls, "__call__");
    if (cm && (!cm->field_grads.empty() || !cm->item_grads.empty())) {
      auto facet = [&](GradFacet g) {
        switch (g) {
          case GradFacet::None: return Provenance::Detached;
          case GradFacet::Attached: return out.grad;
          case GradFacet::FromInputs: return arguments.element().grad;
          default: return Provenance::Unknown;
        }
      };
      Value whole = out;
      if (cm->kind != ValueKind::Unknown) whole.kind = cm->kind;
      auto parts = std::make_shared<ValueParts>();
      Value rest = flat(out);
      parts->element = rest;
      for (const auto& [index, grad] : cm->item_grads) {
        if (parts->items.size() <= index) parts->items.resize(index + 1, rest);
        parts->items[index].grad = facet(grad);
      }
      for (const auto& entry : cm->field_grads) {
        Value v = rest;
        v.grad = facet(entry.second);
        parts->fields.emplace_back(entry.first, v);
      }
      whole.parts = std::move(parts);
      return whole;
    }
  }
  // A module of another file: its forward, given these arguments, where it
  // tells more than "a module's output".
  if (module.home && module.cls >= 0) {
    if (auto v = foreign_method_output(module, "forward", field(call, "arguments"), env, depth)) {
      Value r = *v;
      if (r.grad == Provenance::Unknown && !r.parts) r.grad = out.grad;
      if (r.device == Device::Unknown) r.device = out.device;
      return r;
    }
  }
  return out;
}

bool Model::argument_values(TSNode args, const ValueEnv* env, int depth, std::vector<Value>& positional,
                            std::vector<std::pair<std::string, Value>>& keywords) const {
  bool ok = true;
  for_each_named_child(args, [&](TSNode a) {
    Kind k = kind_of(a);
    if (k == Kind::Comment || !ok) return;
    if (k == Kind::ListSplat || k == Kind::DictionarySplat) {
      ok = false;
    } else if (k == Kind::KeywordArgument) {
      keywords.emplace_back(std::string(text(field(a, "name"))), value_at(field(a, "value"), env, depth + 1));
    } else {
      positional.push_back(value_at(a, env, depth + 1));
    }
  });
  return ok;
}

std::optional<Value> Model::foreign_call_output(const ForeignDefinition& def, TSNode args, const ValueEnv* env,
                                                int depth) const {
  int level = env ? env->level : 0;
  if (def.cls >= 0) {
    Value out = facets(Provenance::Detached, Device::Host,
                       def.model->class_is_module(def.cls) ? ValueKind::Module : ValueKind::Other);
    out.cls = def.cls;
    out.home = def.model;
    return out;
  }
  if (!def.function || level >= kMaxCallLevel) return std::nullopt;
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  if (!argument_values(args, env, depth, positional, keywords)) return std::nullopt;
  for (Value& v : positional) v = rehome(v, this, def.model);
  for (auto& [name, v] : keywords) v = rehome(v, this, def.model);
  Value r = def.model->returns_given(*def.function, positional, keywords, level + 1);
  return rehome(r, def.model, this);
}

std::optional<Value> Model::foreign_method_output(const Value& receiver, std::string_view method, TSNode args,
                                                  const ValueEnv* env, int depth) const {
  int level = env ? env->level : 0;
  const Model* home = receiver.home;
  if (!resolves_imports_ || !home || receiver.cls < 0 || level >= kMaxCallLevel) return std::nullopt;
  const Function* f = home->find_method(receiver.cls, method);
  if (!f || home->function_has_decorator(static_cast<int>(f - home->functions_.data()), "staticmethod"))
    return std::nullopt;
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  if (!argument_values(args, env, depth, positional, keywords)) return std::nullopt;
  for (Value& v : positional) v = rehome(v, this, home);
  for (auto& [name, v] : keywords) v = rehome(v, this, home);
  Value r = home->returns_given(*f, positional, keywords, level + 1);
  return rehome(r, home, this);
}

Value Model::returns_given(const Function& f, const std::vector<Value>& positional,
                           const std::vector<std::pair<std::string, Value>>& keywords, int level) const {
  ValueEnv inner;
  inner.function = &f;
  inner.level = level;
  size_t first = f.cls >= 0 && !function_has_decorator(static_cast<int>(&f - functions_.data()), "staticmethod") ? 1 : 0;
  for (size_t i = first; i < f.params.size(); ++i) {
    const Value* v = nullptr;
    for (const auto& [name, value] : keywords)
      if (name == f.params[i]) v = &value;
    if (!v && i - first < positional.size()) v = &positional[i - first];
    if (v) inner.params.emplace_back(f.params[i], *v);
  }
  return returns_value(f, &inner, 1);
}

std::optional<Value> Model::callable_output(TSNode call, TSNode func, const ValueEnv* env, int depth) const {
  // A module called (`self.encoder(x)`, `models["teacher"](x)`), or a
  // criterion, which reduces to one element.
  Value callee = value_at(func, env, depth + 1);
  if (callee.kind == ValueKind::Module) return module_output(call, callee, env, depth);
  if (!is_loss_function(func)) return std::nullopt;
  Value out = module_output(call, callee, env, depth);
  out.kind = ValueKind::Tensor;
  out.scalar = true;
  return out;
}

namespace {

Truth negate(Truth t) { return t == Truth::Unknown ? t : t == Truth::True ? Truth::False : Truth::True; }

bool tensor_like(const Value& v) { return v.kind == ValueKind::Tensor || v.kind == ValueKind::Loss; }
// A dict display (string keys), a tuple or list display: containers whose shape the code shows.
bool dict_like(const Value& v) {
  return v.kind == ValueKind::Container && v.parts && !v.parts->fields.empty() && v.parts->items.empty();
}
bool sequence_like(const Value& v) {
  return v.kind == ValueKind::Container && v.parts && !v.parts->items.empty() && v.parts->fields.empty();
}

// `isinstance(x, T)` for a value of known shape: a tensor, a dict display, a
// tuple or list display. Unknown for anything else.
Truth isinstance_of(const Value& v, std::string_view type) {
  bool tensor = type == "torch.Tensor" || type == "torch.nn.Parameter";
  bool dict = type == "dict" || type == "Mapping" || type == "collections.abc.Mapping" || type == "typing.Mapping";
  bool sequence = type == "list" || type == "tuple" || type == "Sequence" || type == "collections.abc.Sequence";
  if (tensor) {
    if (tensor_like(v)) return Truth::True;
    if (dict_like(v) || sequence_like(v) || v.kind == ValueKind::Number || v.kind == ValueKind::None)
      return Truth::False;
    return Truth::Unknown;
  }
  if (dict) {
    if (dict_like(v)) return Truth::True;
    if (tensor_like(v) || sequence_like(v) || v.kind == ValueKind::Number || v.kind == ValueKind::None)
      return Truth::False;
    return Truth::Unknown;
  }
  if (sequence) {
    if (tensor_like(v) || dict_like(v) || v.kind == ValueKind::Number || v.kind == ValueKind::None)
      return Truth::False;
    return Truth::Unknown;  // a tuple display may be a list, a list a tuple
  }
  return Truth::Unknown;
}

}  // namespace

// Whether `condition` holds given the parameters' values: `isinstance(p, T)`
// (T a type or a tuple of types) and `not` of it, for a parameter `p` of the
// function; Unknown for any other condition. `isinstance_test` is set when
// the condition was such a test, decided or not.
Truth Model::guard_truth(TSNode condition, const Function& f, const ValueEnv* env, int depth, bool& isinstance_test) const {
  condition = unparenthesize(condition);
  if (kind_of(condition) == Kind::NotOperator) return negate(guard_truth(field(condition, "argument"), f, env, depth, isinstance_test));
  if (kind_of(condition) != Kind::Call || qualify(field(condition, "function")) != "isinstance") return Truth::Unknown;
  Call c{};
  c.args = field(condition, "arguments");
  TSNode subject = unparenthesize(positional_argument(c, 0)), types = unparenthesize(positional_argument(c, 1));
  if (kind_of(subject) != Kind::Identifier || is_null(types)) return Truth::Unknown;
  if (std::find(f.params.begin(), f.params.end(), text(subject)) == f.params.end()) return Truth::Unknown;
  isinstance_test = true;
  Value v = value_at(subject, env, depth + 1);
  std::vector<TSNode> alternatives;
  if (kind_of(types) == Kind::Tuple) for_each_named_child(types, [&](TSNode t) { alternatives.push_back(t); });
  else alternatives.push_back(types);
  Truth out = Truth::False;
  for (TSNode t : alternatives) {
    std::string q = qualify(t);
    if (q.empty()) q = std::string(text(t));
    Truth one = isinstance_of(v, q);
    if (one == Truth::True) return Truth::True;
    if (one == Truth::Unknown) out = Truth::Unknown;
  }
  return out;
}

// Whether the return statement `ret` of `f` can run: the `if` tests around
// it hold, and the earlier `if` tests of its blocks whose body returns do
// not. Only isinstance tests on parameters are decided (guard_truth).
Truth Model::return_reachable(TSNode ret, const Function& f, const ValueEnv* env, int depth, bool& isinstance_test) const {
  Truth out = Truth::True;
  auto require = [&](Truth t) {
    if (t == Truth::False) out = Truth::False;
    else if (t == Truth::Unknown && out == Truth::True) out = Truth::Unknown;
  };
  auto always_returns = [&](TSNode block) {
    uint32_t n = is_null(block) ? 0 : ts_node_named_child_count(block);
    for (uint32_t i = n; i > 0; --i) {
      TSNode last = ts_node_named_child(block, i - 1);
      if (kind_of(last) == Kind::Comment) continue;
      return kind_of(last) == Kind::ReturnStatement;
    }
    return false;
  };
  TSNode child = ret;
  for (TSNode p = ts_node_parent(ret); !is_null(p) && !ts_node_eq(child, f.body); child = p, p = ts_node_parent(p)) {
    if (kind_of(p) == Kind::Block) {
      // Earlier statements of the block: an `if` (no else) whose body returns.
      for (uint32_t i = 0; i < ts_node_named_child_count(p); ++i) {
        TSNode s = ts_node_named_child(p, i);
        if (ts_node_eq(s, child)) break;
        if (kind_of(s) != Kind::IfStatement || !is_null(field(s, "alternative"))) continue;
        if (always_returns(field(s, "consequence")))
          require(negate(guard_truth(field(s, "condition"), f, env, depth, isinstance_test)));
      }
    } else if (kind_of(p) == Kind::IfStatement) {
      Truth cond = guard_truth(field(p, "condition"), f, env, depth, isinstance_test);
      if (ts_node_eq(child, field(p, "consequence"))) require(cond);
      else if (kind_of(child) == Kind::ElseClause || kind_of(child) == Kind::ElifClause) require(negate(cond));
    } else if (kind_of(p) == Kind::ElifClause && ts_node_eq(child, field(p, "consequence"))) {
      require(guard_truth(field(p, "condition"), f, env, depth, isinstance_test));
    }
    if (out == Truth::False) return out;
  }
  return out;
}

Value Model::returns_value(const Function& f, const ValueEnv* env, int depth) const {
  // A generator's `return` is not what the caller receives.
  std::string_view body = text(f.body);
  if (body.find("yield") != std::string_view::npos) return {};
  std::vector<TSNode> values = returned_values(f);
  if (values.empty()) return facets(Provenance::Detached, Device::Host, ValueKind::None);
  // Returns guarded by isinstance tests on the parameters (a helper that
  // detaches a tensor and walks a dict or a tuple): the values given decide
  // which can run; when they cannot, the history is not known.
  bool guarded = body.find("isinstance") != std::string_view::npos;
  std::optional<Value> out;
  bool undecided = false;
  for (TSNode v : values) {
    bool isinstance_test = false;
    TSNode ret = ts_node_parent(v);
    while (!is_null(ret) && kind_of(ret) != Kind::ReturnStatement) ret = ts_node_parent(ret);
    Truth reachable = guarded && !is_null(ret) ? return_reachable(ret, f, env, depth, isinstance_test) : Truth::True;
    if (reachable == Truth::False) continue;
    if (reachable == Truth::Unknown && isinstance_test) undecided = true;
    Value r = value_at(v, env, depth + 1);
    out = out ? join(*out, r) : r;
  }
  if (!out) return {};
  if (undecided && out->grad == Provenance::Attached) out->grad = Provenance::Unknown;
  return *out;
}

Device Model::device_argument(TSNode arg, const ValueEnv* env, int depth) const {
  arg = unparenthesize(arg);
  if (is_null(arg) || depth > kMaxValueDepth) return Device::Unknown;
  switch (kind_of(arg)) {
    case Kind::String: {
      std::string_view s = text(arg);
      for (std::string_view a : kAccelerators)
        if (s.find(a) != std::string_view::npos) return Device::Accelerator;
      return s.find("cpu") != std::string_view::npos ? Device::Host : Device::Unknown;
    }
    case Kind::Integer: return Device::Accelerator;  // `.to(0)`: a CUDA ordinal
    case Kind::ConditionalExpression: {
      if (ts_node_named_child_count(arg) < 3) return Device::Unknown;
      Device yes = device_argument(ts_node_named_child(arg, 0), env, depth + 1);
      if (is_environment_check(ts_node_named_child(arg, 1))) return yes;
      return join(yes, device_argument(ts_node_named_child(arg, 2), env, depth + 1));
    }
    case Kind::Call: {
      std::string callee = qualify(field(arg, "function"));
      if (callee != "torch.device") return Device::Unknown;
      Call c{};
      c.args = field(arg, "arguments");
      TSNode first = positional_argument(c, 0);
      Device d = device_argument(first, env, depth + 1);
      return d == Device::Unknown && !is_null(first) && kind_of(first) != Kind::String ? Device::Accelerator : d;
    }
    case Kind::Identifier:
    case Kind::Attribute: {
      std::string q = qualify(arg);
      if (q.empty() || (starts_with(q, "torch.") && q != "torch.device")) return Device::Unknown;  // torch.float16
      int fn = function_at(start_byte(arg));
      const Binding* b = kind_of(arg) == Kind::Attribute ? attribute_binding(q, fn) : reaching(q, start_byte(arg), fn);
      // A device another file of the project defines (`from config import DEVICE`).
      if (!b && resolves_imports_) {
        if (auto def = foreign_definition(arg); def && def->binding && def->binding->element < 0)
          return def->model->device_argument(def->binding->value, nullptr, depth + 1);
      }
      // A parameter of the function being evaluated: the argument of its call.
      if (b && b->kind == BindingKind::Parameter && env && b->function >= 0 && env->function == &functions_[b->function]) {
        for (const auto& [param, node] : env->arguments)
          if (param == q) return device_argument(node, env->caller, depth + 1);
      }
      if (b && b->kind == BindingKind::Assign && b->element < 0 && !is_null(b->value)) {
        Device d = device_argument(b->value, nullptr, depth + 1);
        if (d != Device::Unknown) return d;
      }
      // A name for a device: `device`, `self.device`, `args.gpu`, `local_rank`.
      std::string leaf(q.substr(q.rfind('.') == std::string::npos ? 0 : q.rfind('.') + 1));
      for (auto& ch : leaf) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (leaf.find("device") != std::string::npos || leaf == "dev" || leaf == "gpu" || leaf == "rank" ||
          leaf == "local_rank")
        return Device::Accelerator;
      return Device::Unknown;
    }
    default: return Device::Unknown;
  }
}

Device Model::moved_to(TSNode call, const ValueEnv* env, int depth) const {
  TSNode func = unparenthesize(field(call, "function"));
  if (kind_of(func) != Kind::Attribute) return Device::Unknown;
  std::string_view method = text(field(func, "attribute"));
  if (method == "cpu") return Device::Host;
  TSNode args = field(call, "arguments");
  if (method == "cuda") return Device::Accelerator;
  if (method != "to") return Device::Unknown;
  Device out = Device::Unknown;
  for_each_named_child(args, [&](TSNode a) {
    if (out != Device::Unknown) return;
    if (kind_of(a) == Kind::KeywordArgument) {
      if (text(field(a, "name")) == "device") out = device_argument(field(a, "value"), env, depth + 1);
      return;
    }
    if (kind_of(a) == Kind::Comment) return;
    out = device_argument(a, env, depth + 1);
    if (out == Device::Unknown) {  // `.to(other)`: that tensor's device
      Value other = value_at(a, env, depth + 1);
      if (other.kind == ValueKind::Tensor) out = other.device;
    }
  });
  return out;
}

bool Model::module_moved_in_place(std::string_view name, int function) const {
  // `model.cuda()`, `model.to(device)` as statements, in the same function or
  // at module level (any method of the class for `self.x`).
  bool attribute = name.find('.') != std::string_view::npos;
  for (std::string_view method : {"cuda", "to"}) {
    for (int i : calls_named(method)) {
      const Call& c = calls_[i];
      if (c.method != method || !(c.function == function || c.function < 0 || attribute)) continue;
      if (qualify(unparenthesize(c.receiver)) != name) continue;
      if (moved_to(c.node, nullptr, 0) == Device::Accelerator) return true;
    }
  }
  return false;
}

Value Model::call_value(TSNode call, const ValueEnv* env, int depth) const {
  TSNode func = unparenthesize(field(call, "function"));
  TSNode args = field(call, "arguments");
  Call c{};
  c.node = call;
  c.func = func;
  c.args = args;
  c.callee = qualify(func);
  int level = env ? env->level : 0;
  // The returns of a function of this file, with its parameters bound to
  // this call's arguments.
  auto summary = [&](const Function& f, bool method) -> Value {
    if (level >= kMaxCallLevel) return {};
    ValueEnv inner;
    bind_arguments(f, method, c, env, depth + 1, inner);
    return returns_value(f, &inner, depth + 1);
  };
  auto from_model = [&](const CallModel& cm, const Value& receiver) -> std::optional<Value> {
    Value out;
    out.kind = cm.kind;
    switch (cm.device) {
      case DeviceFacet::Host: out.device = Device::Host; break;
      case DeviceFacet::Accelerator: out.device = Device::Accelerator; break;
      case DeviceFacet::FromInputs: {
        Device d = Device::Unknown;
        Provenance g = Provenance::Detached;
        bool first = true;
        auto take = [&](const Value& v) {
          Device vd = v.on_accelerator() ? Device::Accelerator : v.device;
          d = first ? vd : combine(d, vd);
          g = join(g, v.grad);
          first = false;
        };
        if (cm.from.empty()) {
          if (!is_null(c.receiver)) take(receiver);
          for_each_named_child(args, [&](TSNode a) {
            if (kind_of(a) == Kind::Comment) return;
            take(value_at(kind_of(a) == Kind::KeywordArgument ? field(a, "value") : a, env, depth + 1));
          });
        } else {
          for (const Operand& op : cm.from) {
            if (op.kind == Operand::Kind::Self) take(receiver);
            else take(value_at(operand(c, op), env, depth + 1));
          }
        }
        out.device = d;
        if (cm.grad == GradFacet::FromInputs) out.grad = g;
        break;
      }
      case DeviceFacet::Unknown: return std::nullopt;
    }
    if (cm.grad == GradFacet::None) out.grad = Provenance::Detached;
    out.scalar = cm.kind == ValueKind::Number;
    if (cm.kind == ValueKind::Loss) {  // a loss value: one element unless reduction="none"
      out.kind = ValueKind::Tensor;
      TSNode reduction = keyword_argument(c, "reduction");
      out.scalar = is_null(reduction) || text(reduction).find("none") == std::string_view::npos;
    }
    return out;
  };

  // `torch.cat(...)`, `F.relu(...)`: a function of an imported module, not a method.
  auto imported_function = [&]() {
    TSNode root = func;
    while (kind_of(root) == Kind::Attribute) root = unparenthesize(field(root, "object"));
    if (kind_of(root) != Kind::Identifier) return false;
    const Binding* b = reaching(text(root), start_byte(root), function_at(start_byte(root)));
    return b && b->kind == BindingKind::Import;
  };
  if (kind_of(func) == Kind::Attribute && !imported_function()) {
    c.method = std::string(text(field(func, "attribute")));
    c.receiver = field(func, "object");
    std::string_view method = c.method;
    TSNode receiver_node = unparenthesize(c.receiver);
    // self.helper(...) of this class: its summary; self(...) / self.forward(...) of a module: its output.
    if (kind_of(receiver_node) == Kind::Identifier && text(receiver_node) == "self") {
      int cls = class_of_function(function_at(start_byte(call)));
      if (const Function* f = find_method(cls, method)) {
        if (!(method == "forward" && class_is_module(cls))) return summary(*f, true);
      }
    }
    Value receiver = value_at(receiver_node, env, depth + 1);
    if (receiver.home && receiver.cls >= 0) {
      if (auto v = foreign_method_output(receiver, method, args, env, depth)) return *v;
    }
    bool self_receiver = kind_of(receiver_node) == Kind::Identifier && text(receiver_node) == "self";
    if (receiver.kind != ValueKind::Tensor && (receiver.kind != ValueKind::Module || self_receiver)) {
      // `self.encoder(x)`: an attribute holding a module or a criterion.
      if (auto v = callable_output(call, func, env, depth)) return *v;
      // A method the class inherits from a framework (`self.log(...)`), or
      // an attribute holding some other callable: not known.
      if (self_receiver && !one_of(method, kModuleSelfMethods) && !one_of(method, kModuleOtherMethods)) return {};
    }
    if (method == "to" || method == "cuda" || method == "cpu") {
      Device d = moved_to(call, env, depth);
      Value out = receiver.kind == ValueKind::Container ? receiver : same_shape(receiver);
      if (receiver.kind == ValueKind::Module) {
        out.kind = ValueKind::Module;
        out.cls = receiver.cls;
        out.home = receiver.home;
      }
      if (d != Device::Unknown) out.device = d;
      if (d == Device::Host && out.parts) out.parts.reset();
      return out;
    }
    if (method == "item" || method == "tolist")
      return facets(Provenance::Detached, Device::Host, method == "item" ? ValueKind::Number : ValueKind::Container,
                    method == "item");
    if (method == "numpy") return facets(Provenance::Detached, Device::Host, ValueKind::Other);
    if (method == "detach" || method == "detach_") {
      Value out = same_shape(receiver);
      out.grad = Provenance::Detached;
      return out;
    }
    if (receiver.kind == ValueKind::Module) {
      if (const CallModel* cm = call_model(c); cm && cm->elements != ValueKind::Unknown) return elements_of(*cm);
      if (one_of(method, kModuleSelfMethods)) return receiver;
      if (one_of(method, kModuleOtherMethods)) return facets(Provenance::Unknown, Device::Unknown, ValueKind::Other);
      return module_output(call, receiver, env, depth);
    }
    if (receiver.parts || receiver.kind == ValueKind::Container) {
      if (method == "get" || method == "pop") {
        TSNode key = unparenthesize(positional_argument(c, 0));
        return kind_of(key) == Kind::String ? receiver.field(unquote(text(key))) : receiver.element();
      }
      if (method == "values") return container({}, receiver.element());
      if (method == "items")
        return container({}, container({facets(Provenance::Detached, Device::Host, ValueKind::Other), receiver.element()},
                                       std::nullopt));
      if (method == "keys" || method == "index" || method == "count")
        return facets(Provenance::Detached, Device::Host, ValueKind::Other);
      if (method == "copy") return receiver;
    }
    if (const CallModel* cm = call_model(c)) {
      if (auto v = from_model(*cm, receiver)) return *v;
    }
    if (one_of(method, kReductions) && ts_node_named_child_count(args) == 0) {
      Value out = flat(receiver);
      out.scalar = true;
      return out;
    }
    // An unknown method of a tensor keeps its device; a copy or a cast keeps
    // its shape.
    if (receiver.kind == ValueKind::Tensor || receiver.kind == ValueKind::Unknown) {
      Value out = one_of(method, kSameShapeMethods) ? same_shape(receiver) : flat(receiver);
      if (receiver.kind == ValueKind::Unknown && receiver.device == Device::Unknown) return {};
      return out;
    }
    return {};
  }

  if (kind_of(func) == Kind::Identifier) {
    std::string_view name = text(func);
    if (const Function* f = find_function(name)) return summary(*f, false);
    if (const Class* k = find_class(name)) {
      int cls = static_cast<int>(k - classes_.data());
      Value out = facets(Provenance::Detached, Device::Host, class_is_module(cls) ? ValueKind::Module : ValueKind::Other);
      out.cls = cls;
      return out;
    }
    if (c.callee == name) {  // a builtin
      if (one_of(name, kNumberBuiltins))
        return facets(Provenance::Detached, Device::Host, name == "str" || name == "repr" ? ValueKind::Other : ValueKind::Number,
                      true);
      Call args_only{};
      args_only.args = args;
      TSNode first = positional_argument(args_only, 0);
      if (one_of(name, kContainerBuiltins)) return container({}, value_at(first, env, depth + 1).element());
      if (name == "next") return value_at(first, env, depth + 1).element();
      if (name == "enumerate")
        return container({}, container({facets(Provenance::Detached, Device::Host, ValueKind::Number, true),
                                        value_at(first, env, depth + 1).element()},
                                       std::nullopt));
      if (name == "zip") {
        std::vector<Value> items;
        for_each_named_child(args, [&](TSNode a) {
          if (kind_of(a) != Kind::KeywordArgument && kind_of(a) != Kind::Comment)
            items.push_back(value_at(a, env, depth + 1).element());
        });
        return container({}, container(std::move(items), std::nullopt));
      }
    }
  }
  if (resolves_imports_ && !path_.empty() && (kind_of(func) == Kind::Identifier || imported_function())) {
    if (auto def = foreign_definition(func)) {
      if (auto v = foreign_call_output(*def, args, env, depth)) return *v;
    }
  }
  std::string_view last = c.callee;
  if (size_t dot = last.rfind('.'); dot != std::string_view::npos) last = last.substr(dot + 1);
  if (one_of(last, kPassThrough)) {
    Call args_only{};
    args_only.args = args;
    return value_at(positional_argument(args_only, 0), env, depth + 1);
  }
  if (auto v = callable_output(call, func, env, depth)) return *v;
  if (starts_with(c.callee, "torch.")) {
    TSNode device = keyword_argument(c, "device");
    if (!is_null(device)) {
      Value out = facets(Provenance::Detached, device_argument(device, env, depth + 1), ValueKind::Tensor);
      return out;
    }
  }
  if (!c.callee.empty()) {
    if (const CallModel* cm = library().call(library().canonical(c.callee))) {
      if (auto v = from_model(*cm, Value{})) return *v;
      if (cm->kind != ValueKind::Unknown) return facets(Provenance::Unknown, Device::Unknown, cm->kind);
    }
    if (ValueKind k = library().class_kind(library().canonical(c.callee)); k != ValueKind::Unknown) {
      Value out = facets(Provenance::Unknown, Device::Unknown, k);
      if (k == ValueKind::Module) out.device = Device::Host;
      return out;
    }
  }
  if (is_module_instance(call)) return facets(Provenance::Detached, Device::Host, ValueKind::Module);
  if (auto v = imported_function_output(c, func, env, depth)) return *v;
  return {};
}

// A function imported from another module of the project, called by its
// name (`get_1d_rotary_pos_embed(dim, max_len, theta)`): its history comes
// from its arguments. Numbers, strings, booleans and None bring none; a
// function given nothing else returns a value without history.
std::optional<Value> Model::imported_function_output(const Call& c, TSNode func, const ValueEnv* env,
                                                     int depth) const {
  if (kind_of(func) != Kind::Identifier) return std::nullopt;
  std::string_view name = text(func);
  if (name.empty() || !std::islower(static_cast<unsigned char>(name.front()))) return std::nullopt;
  const Binding* b = reaching(name, start_byte(func), function_at(start_byte(func)));
  if (!b || b->kind != BindingKind::Import || starts_with(c.callee, "torch.") || starts_with(c.callee, "numpy."))
    return std::nullopt;
  Provenance grad = Provenance::Detached;
  for_each_named_child(c.args, [&](TSNode a) {
    if (kind_of(a) == Kind::Comment) return;
    if (kind_of(a) == Kind::KeywordArgument) a = field(a, "value");
    if (kind_of(a) == Kind::ListSplat || kind_of(a) == Kind::DictionarySplat) {
      grad = Provenance::Unknown;
      return;
    }
    Value v = value_at(a, env, depth + 1);
    bool plain = (v.kind == ValueKind::Number || v.kind == ValueKind::None ||
                  (v.kind == ValueKind::Other && v.scalar)) && v.grad == Provenance::Detached;
    if (!plain) grad = join(grad, v.grad == Provenance::Detached ? Provenance::Unknown : v.grad);
  });
  if (grad != Provenance::Detached) return std::nullopt;
  return facets(Provenance::Detached, Device::Unknown, ValueKind::Unknown);
}

namespace {
// +1 when `condition` is `name`, -1 when it is `not name`, 0 otherwise.
int tests_flag(const Model& m, TSNode condition, std::string_view name) {
  condition = unparenthesize(condition);
  if (kind_of(condition) == Kind::Identifier) return m.text(condition) == name ? 1 : 0;
  if (kind_of(condition) == Kind::NotOperator) {
    TSNode operand = unparenthesize(field(condition, "argument"));
    return kind_of(operand) == Kind::Identifier && m.text(operand) == name ? -1 : 0;
  }
  return 0;
}
}  // namespace

bool Model::excluded_when(TSNode node, std::string_view name, bool value) const {
  TSNode child = node;
  for (TSNode p = ts_node_parent(node); !is_null(p); child = p, p = ts_node_parent(p)) {
    Kind k = kind_of(p);
    if (k == Kind::FunctionDefinition || k == Kind::Lambda) return false;
    if (k != Kind::IfStatement) continue;
    int sense = tests_flag(*this, field(p, "condition"), name);
    if (sense == 0) continue;
    bool holds = (sense > 0) == value;  // the condition's truth under the assumption
    TSNode consequence = field(p, "consequence");
    if (ts_node_eq(child, consequence)) {
      if (!holds) return true;
    } else if (kind_of(child) == Kind::ElseClause || kind_of(child) == Kind::ElifClause) {
      if (holds) return true;
    }
  }
  return false;
}

std::vector<std::string> Model::flag_parameters(int function) const {
  std::vector<std::string> out;
  if (function < 0) return out;
  const Function& f = functions_[function];
  for (const std::string& p : f.params) {
    bool tested = false;
    std::vector<TSNode> work{f.body};
    while (!work.empty() && !tested) {
      TSNode n = work.back();
      work.pop_back();
      Kind k = kind_of(n);
      if (k == Kind::FunctionDefinition || k == Kind::ClassDefinition || k == Kind::Lambda) continue;
      if (k == Kind::IfStatement && tests_flag(*this, field(n, "condition"), p) != 0) tested = true;
      push_named_children(n, work);
    }
    if (tested) out.push_back(p);
  }
  return out;
}

GradState Model::entry_grad(int function) const {
  // Disabled when the file calls `function` and every call runs with grad
  // disabled; a function also used other than by a call (passed as a
  // callback, registered as a hook) may run anywhere.
  if (function < 0) return GradState::Enabled;
  if (entry_grad_.empty()) {
    entry_grad_.assign(functions_.size(), -1);
    entry_grad_busy_.assign(functions_.size(), false);
  }
  size_t i = static_cast<size_t>(function);
  if (entry_grad_[i] >= 0) return static_cast<GradState>(entry_grad_[i]);
  if (entry_grad_busy_[i]) return GradState::Enabled;  // recursion
  entry_grad_busy_[i] = true;
  const Function& f = functions_[i];
  GradState state = GradState::Enabled;
  std::vector<const Call*> sites = call_sites(f);
  if (!sites.empty() && f.hook == nullptr && f.name.substr(0, 2) != "__") {
    state = GradState::Disabled;
    for (const Call* c : sites) {
      if (grad_state(start_byte(c->node)) != GradState::Disabled) {
        state = GradState::Enabled;
        break;
      }
    }
    if (state == GradState::Disabled && used_other_than_called(f, sites.size())) state = GradState::Enabled;
  } else if (sites.empty() && f.name == "forward" && f.cls >= 0 && class_is_module(f.cls)) {
    state = submodule_forward_grad(f.cls);
  } else if (sites.empty() && f.hook == nullptr && !hook_sites(static_cast<int>(i)).empty()) {
    // A module's forward hook runs under the mode of the module's calls.
    state = GradState::Disabled;
    for (const HookSite& site : hook_sites(static_cast<int>(i)))
      if (!site.call || site.runs == ModuleHookRuns::Backward ||
          grad_state(start_byte(site.call->node)) != GradState::Disabled)
        state = GradState::Enabled;
  }
  entry_grad_busy_[i] = false;
  entry_grad_[i] = static_cast<signed char>(state);
  return state;
}

GradState Model::submodule_forward_grad(int cls) const {
  // The forward of a module that only other modules of the file hold (built
  // in their methods, `self.attention = Attention(...)`) runs when theirs
  // do: with grad disabled when every method of every holder but __init__
  // does (an inference-only model whose forward is decorated with
  // torch.inference_mode()). Built anywhere else, it may run anywhere.
  const std::string& name = classes_[cls].name;
  std::vector<int> holders;
  for (int index : calls_named(name)) {
    const Call& c = calls_[static_cast<size_t>(index)];
    if (c.callee != name) continue;
    int holder = c.function >= 0 ? functions_[c.function].cls : -1;
    if (holder < 0 || holder == cls || !class_is_module(holder)) return GradState::Enabled;
    if (std::find(holders.begin(), holders.end(), holder) == holders.end()) holders.push_back(holder);
  }
  if (holders.empty()) return GradState::Enabled;
  for (int holder : holders) {
    for (int g : classes_[holder].methods) {
      const Function& method = functions_[g];
      if (method.name == "__init__") continue;
      if (grad_state(start_byte(method.body)) != GradState::Disabled) return GradState::Enabled;
    }
  }
  return GradState::Disabled;
}

bool Model::used_other_than_called(const Function& f, size_t calls) const {
  // Every mention of the name (an identifier, or `self.<name>` in a method)
  // that is not the definition's own name, counted once per file.
  if (!mentions_counted_) {
    mentions_counted_ = true;
    NameSet definitions;
    for (const Function& g : functions_) definitions.insert(g.name);
    for (const Reference& r : references_) {
      std::string_view name = text(r.node);
      if (name == "self" && kind_of(r.parent) == Kind::Attribute) {
        std::string_view attribute = text(field(r.parent, "attribute"));
        if (definitions.count(attribute)) ++attribute_mentions_[std::string(attribute)];
        continue;
      }
      if (!definitions.count(name)) continue;
      bool own_name = false;
      TSNode parent = ts_node_parent(r.node);
      if (kind_of(parent) == Kind::FunctionDefinition && ts_node_eq(field(parent, "name"), r.node)) own_name = true;
      if (!own_name) ++name_mentions_[std::string(name)];
    }
  }
  const auto& counts = f.cls >= 0 ? attribute_mentions_ : name_mentions_;
  auto it = counts.find(f.name);
  return it != counts.end() && it->second > calls;
}

// ---------------------------------------------------------------------------
// Loops that run a model over items.

std::string Model::callee_file(const Call& c, bool packages) const {
  if (path_.empty()) return {};
  auto normal = [](const std::string& p) { return std::filesystem::path(p).lexically_normal().string(); };
  if (normal_path_.empty()) normal_path_ = normal(path_);
  TSNode func = unparenthesize(c.func);
  if (kind_of(func) == Kind::Identifier) {
    std::string_view name = text(func);
    const Binding* b = reaching(name, start_byte(func), c.function);
    if (!b || b->kind != BindingKind::Import) {
      if ((!b || b->function < 0) && (find_function(name) || find_class(name))) return normal_path_;
      return {};
    }
  }
  if (kind_of(func) == Kind::Attribute && !is_null(c.receiver)) {
    TSNode receiver = unparenthesize(c.receiver);
    if (kind_of(receiver) == Kind::Identifier && text(receiver) == "self" && c.function >= 0) {
      int cls = functions_[c.function].cls;
      return cls >= 0 && find_method(cls, c.method) ? normal_path_ : std::string();
    }
    // Another object's method: not asked of the value engine, which would
    // evaluate every receiver of the file.
    TSNode root = receiver;
    while (kind_of(root) == Kind::Attribute) root = unparenthesize(attribute_object(root));
    const Binding* b = kind_of(root) == Kind::Identifier ? reaching(text(root), start_byte(root), c.function) : nullptr;
    if (!b || b->kind != BindingKind::Import) return {};
  }
  // Through an import: the module file that defines the name, found without
  // reading it (this is asked for every call of the file). A package's
  // __init__.py may only re-export the name from elsewhere: not known.
  TSNode root = func;
  std::vector<std::string_view> parts;
  while (kind_of(root) == Kind::Attribute) {
    parts.push_back(text(attribute_name(root)));
    root = unparenthesize(attribute_object(root));
  }
  if (kind_of(root) != Kind::Identifier) return {};
  const Binding* b = reaching(text(root), start_byte(root), c.function);
  auto alias = aliases_.find(text(root));
  if (!b || b->kind != BindingKind::Import || alias == aliases_.end()) return {};
  std::string dotted = alias->second;
  for (size_t i = parts.size(); i-- > 0;) (dotted += '.') += parts[i];
  auto level = import_levels_.find(text(root));
  int dots = level == import_levels_.end() ? 0 : level->second;
  size_t dot = dotted.rfind('.');
  if (dot == std::string::npos && dots == 0) return {};
  // Many calls name the same thing (`torch.zeros`, `utils.log`): the file
  // is looked up once per name for the file being analyzed.
  std::string key = std::to_string(dots) + (packages ? "p:" : ":") + dotted;
  if (auto known = callee_files_.find(key); known != callee_files_.end()) return known->second;
  std::string module = dot == std::string::npos ? std::string() : dotted.substr(0, dot);
  std::string out;
  // The module defining the name first: where there is none (a library's),
  // the name is no submodule of the project either.
  std::string file = find_module_file(path_, module, dots);
  if (!file.empty() && find_module_file(path_, dotted, dots).empty()) {  // else a submodule, not a definition
    if (packages || std::filesystem::path(file).filename() != "__init__.py") out = normal(file);
  }
  callee_files_.emplace(std::move(key), out);
  return out;
}

bool Model::runs_module(const Call& c) const {
  if (value(c.func).kind == ValueKind::Module) return true;
  if (c.method.empty() || is_null(c.receiver)) return false;
  // A method of an object of the project's classes that runs a module of its own.
  Value receiver = value(c.receiver);
  auto method_runs_module = [&](const Model& home, int cls) {
    const Function* f = home.find_method(cls, c.method);
    if (!f) return false;
    int index = static_cast<int>(f - home.functions_.data());
    for (const Call& inner : home.calls_)
      if (inner.function == index && home.value(inner.func).kind == ValueKind::Module) return true;
    return false;
  };
  if (receiver.cls >= 0 && receiver.kind != ValueKind::Module)
    return method_runs_module(receiver.home ? *receiver.home : *this, receiver.cls);
  // A module of no known class (`model`, a parameter) whose method is one of
  // the file's own Module classes' (`model.step(x, states)` on the file's
  // network): the file's classes are what its modules are built from.
  if (receiver.kind != ValueKind::Module || receiver.cls >= 0 || c.method == "forward") return false;
  for (size_t k = 0; k < classes_.size(); ++k)
    if (module_class(static_cast<int>(k)) == ModuleAnswer::Yes && method_runs_module(*this, static_cast<int>(k)))
      return true;
  return false;
}

bool Model::runs_module_per_item(int loop) const {
  if (loop < 0) return false;
  const Loop& l = loops_[loop];
  // Whether the name at the root of `expr` is bound inside the loop.
  auto bound_in_loop = [&](TSNode expr) {
    expr = unparenthesize(expr);
    while (kind_of(expr) == Kind::Attribute || kind_of(expr) == Kind::Subscript)
      expr = unparenthesize(field(expr, kind_of(expr) == Kind::Attribute ? FieldName("object") : FieldName("value")));
    if (kind_of(expr) != Kind::Identifier || text(expr) == "self") return false;
    const Binding* b = reaching(text(expr), start_byte(expr), l.function);
    return b && loop_contains(loop, b->start);
  };
  // Whether `name.append(...)` (extend, insert) runs in the loop after `c`.
  auto grown_after = [&](std::string_view name, const Call& c) {
    auto it = std::upper_bound(calls_.begin(), calls_.end(), start_byte(c.node),
                               [](uint32_t at, const Call& x) { return at < start_byte(x.node); });
    for (; it != calls_.end() && start_byte(it->node) < l.end; ++it) {
      if (it->function != c.function || is_null(it->receiver)) continue;
      if (it->method != "append" && it->method != "extend" && it->method != "insert") continue;
      if (text(unparenthesize(it->receiver)) == name && loop_contains(loop, start_byte(it->node))) return true;
    }
    return false;
  };
  // The names the call reads: whether one is rebound (or grown in place)
  // later in the loop, the previous iteration's output fed back, and
  // whether one is bound in the loop before it, an input of this iteration.
  auto inputs = [&](const Call& c, bool& carried, bool& fresh) {
    std::vector<TSNode> work{c.args};
    while (!work.empty() && !carried) {
      TSNode n = work.back();
      work.pop_back();
      if (kind_of(n) == Kind::Identifier) {
        for (const Binding* b : bindings_of(text(n), c.function)) {
          if (b->kind == BindingKind::Parameter || b->kind == BindingKind::Import || !loop_contains(loop, b->start))
            continue;
          // `token = model(token)`: the binding that holds the call comes after it.
          if (b->start > start_byte(c.node) || ((b->kind == BindingKind::Assign || b->kind == BindingKind::AugAssign) && b->end >= end_byte(c.node)))
            carried = true;
          else
            fresh = true;
        }
        if (!carried) carried = grown_after(text(n), c);
        continue;
      }
      for (uint32_t i = 0; i < ts_node_named_child_count(n); ++i) work.push_back(ts_node_named_child(n, i));
    }
  };
  bool runs = false;
  for (const Call& c : calls_in(l.start, l.end)) {
    if (c.function != l.function || !loop_contains(loop, start_byte(c.node))) continue;
    if (!runs_module(c)) continue;
    bool carried = false, fresh = false;
    inputs(c, carried, fresh);
    if (carried) return false;  // a recurrence: decoding, denoising
    if (fresh && !bound_in_loop(c.func)) runs = true;  // not a loop over modules
  }
  return runs;
}

}  // namespace torchleak::python

