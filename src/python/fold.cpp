#include "python/fold.h"

#include <cerrno>
#include <cstdlib>

namespace torchleak::python {

namespace {

constexpr int kMaxDepth = 16;
constexpr uint32_t kMaxElements = 4096;

std::optional<int64_t> checked(bool overflow, int64_t v) {
  if (overflow) return std::nullopt;
  return v;
}

std::optional<int64_t> literal(std::string_view text) {
  std::string digits;
  for (char c : text)
    if (c != '_') digits += c;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;  // 0x.., 0o.., 0b..: not sizes
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> Folder::integer(TSNode n, int depth) const {
  n = unparenthesize(n);
  if (is_null(n) || depth > kMaxDepth) return std::nullopt;
  switch (kind_of(n)) {
    case Kind::Integer: return literal(m_.text(n));
    case Kind::UnaryOperator: {
      if (m_.text(field(n, "operator")) != "-") return std::nullopt;
      auto v = integer(field(n, "argument"), depth + 1);
      if (!v) return std::nullopt;
      return -*v;
    }
    case Kind::BinaryOperator: return binary(n, depth);
    case Kind::Identifier: return name(n, depth);
    case Kind::Call: {
      if (m_.qualify(field(n, "function")) != "int") return std::nullopt;
      TSNode args = field(n, "arguments");
      if (is_null(args) || ts_node_named_child_count(args) != 1) return std::nullopt;
      return integer(ts_node_named_child(args, 0), depth + 1);
    }
    default: return std::nullopt;
  }
}

std::optional<bool> Folder::boolean(TSNode n, int depth) const {
  n = unparenthesize(n);
  if (is_null(n) || depth > kMaxDepth) return std::nullopt;
  if (kind_of(n) == Kind::True) return true;
  if (kind_of(n) == Kind::False) return false;
  if (kind_of(n) != Kind::Identifier) return std::nullopt;
  Bound b = bound_value(n);
  if (is_null(b.value)) return std::nullopt;
  return Folder(*b.model, b.function).boolean(b.value, depth + 1);
}

std::optional<std::vector<int64_t>> Folder::integers(TSNode n, int depth) const {
  n = unparenthesize(n);
  if (is_null(n) || depth > kMaxDepth) return std::nullopt;
  if (kind_of(n) == Kind::Identifier) {
    Bound b = bound_value(n);
    if (is_null(b.value)) return std::nullopt;
    return Folder(*b.model, b.function).integers(b.value, depth + 1);
  }
  if (kind_of(n) != Kind::List && kind_of(n) != Kind::Tuple) return std::nullopt;
  std::vector<int64_t> out;
  uint32_t count = ts_node_named_child_count(n);
  if (count > kMaxElements) return std::nullopt;
  for (uint32_t i = 0; i < count; ++i) {
    TSNode item = ts_node_named_child(n, i);
    if (kind_of(item) == Kind::Comment) continue;
    auto v = integer(item, depth + 1);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<int64_t> Folder::binary(TSNode n, int depth) const {
  auto a = integer(field(n, "left"), depth + 1);
  auto b = integer(field(n, "right"), depth + 1);
  if (!a || !b) return std::nullopt;
  std::string_view op = m_.text(field(n, "operator"));
  int64_t r = 0;
  // The overflow test runs before r is read: function arguments have no
  // evaluation order, so the two must not share one call.
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(*a, *b, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(*a, *b, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(*a, *b, &r);
  if (op == "+" || op == "-" || op == "*") return checked(overflow, r);
  if (op == "//") {
    if (*b == 0) return std::nullopt;
    int64_t q = *a / *b;
    if ((*a % *b != 0) && ((*a < 0) != (*b < 0))) --q;  // Python floors
    return q;
  }
  if (op == "**") {
    if (*b < 0 || *b > 62) return std::nullopt;
    int64_t p = 1;
    for (int64_t i = 0; i < *b; ++i)
      if (__builtin_mul_overflow(p, *a, &p)) return std::nullopt;
    return p;
  }
  return std::nullopt;
}

std::optional<int64_t> Folder::name(TSNode n, int depth) const {
  std::string_view id = m_.text(n);
  for (const auto& [given, value] : given_)
    if (given == id) return value;
  Bound b = bound_value(n);
  if (is_null(b.value)) return std::nullopt;
  if (b.model == &m_ && b.function == function_) return integer(b.value, depth + 1);
  return Folder(*b.model, b.function).integer(b.value, depth + 1);
}

// The value a name holds at `n`: the default of a parameter of the enclosing
// function, or the value of its one plain assignment in that function, or of
// its one plain assignment at module level, or the module-level constant of
// another file of the project that an import binds it to.
Folder::Bound Folder::bound_value(TSNode n) const {
  std::string_view id = m_.text(n);
  if (function_ >= 0) {
    std::vector<const Binding*> local = m_.bindings_of(id, function_);
    if (!local.empty()) {
      if (local.size() != 1) return {};
      const Binding& b = *local.front();
      if (b.kind == BindingKind::Parameter) return {&m_, -1, parameter_default(m_.functions()[function_], id)};
      if (b.kind == BindingKind::Assign && b.element < 0 && b.loop < 0 && b.end <= start_byte(n))
        return {&m_, function_, b.value};
      return {};
    }
  }
  std::vector<const Binding*> global = m_.bindings_of(id, -1);
  if (global.size() != 1) return {};
  const Binding& b = *global.front();
  if (b.kind == BindingKind::Import) {
    auto def = m_.foreign_import(id);
    if (!def || !def->binding) return {};
    const Binding& there = *def->binding;
    if (there.element >= 0 || there.loop >= 0 || def->model->bindings_of(there.name, -1).size() != 1) return {};
    return {def->model, -1, there.value};
  }
  if (b.kind != BindingKind::Assign || b.element >= 0 || b.loop >= 0) return {};
  if (is_declared_global(id)) return {};
  return {&m_, -1, b.value};
}

// Whether some function rebinds the module-level name through `global`.
bool Folder::is_declared_global(std::string_view id) const {
  for (size_t f = 0; f < m_.functions().size(); ++f)
    for (const Binding* b : m_.bindings_of(id, static_cast<int>(f)))
      if (b->kind == BindingKind::Global) return true;
  return false;
}

TSNode Folder::parameter_default(const Function& f, std::string_view id) const {
  TSNode params = field(f.node, "parameters");
  uint32_t n = is_null(params) ? 0 : ts_node_named_child_count(params);
  for (uint32_t i = 0; i < n; ++i) {
    TSNode p = ts_node_named_child(params, i);
    Kind k = kind_of(p);
    if (k != Kind::DefaultParameter && k != Kind::TypedDefaultParameter) continue;
    if (m_.text(field(p, "name")) == id) return field(p, "value");
  }
  return TSNode{};
}

}  // namespace torchleak::python
