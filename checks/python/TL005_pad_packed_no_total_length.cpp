// TL005 pad-packed-no-total-length: `pad_packed_sequence(...)` without
// `total_length` in a module whose instances are wrapped in DataParallel
// somewhere in the project. Each replica pads its slice of the batch to the
// slice's own longest sequence, so the outputs DataParallel gathers disagree
// in length.
//
// First phase: every file records where it wraps which class in DataParallel
// ("dataparallel-wrap", keyed by the class's simple name) and which classes a
// module holds as submodules ("submodule", keyed by the held class). Second
// phase: the finding is kept only if the class defining the call, one of its
// subclasses, or a module holding either, is wrapped.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <unordered_set>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

constexpr int kMaxInstanceDepth = 8;

// Module methods that return the module itself.
constexpr std::array<std::string_view, 11> kReturnsSelf = {
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "share_memory", "requires_grad_"};

// Class methods that return a new instance of their class.
constexpr std::array<std::string_view, 6> kAlternateConstructors = {
    "from_pretrained", "from_config", "load", "load_from_checkpoint", "build", "create"};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_capitalized(std::string_view name) {
  return !name.empty() && std::isupper(static_cast<unsigned char>(name[0]));
}

bool is_pad_packed(std::string_view callee) {
  return callee == "torch.nn.utils.rnn.pad_packed_sequence" || callee == "torch.nn.utils.pad_packed_sequence";
}

bool is_pack_padded(std::string_view callee) {
  return callee == "torch.nn.utils.rnn.pack_padded_sequence" || callee == "torch.nn.utils.pack_padded_sequence";
}

enum class Wrapper : uint8_t { None, Constructor, Functional, Configured };

// DataParallel (class or functional form) and the config's in-house wrappers.
// DistributedDataParallel is not one: each process runs the whole module on
// its own whole batches and nothing is gathered across replicas.
Wrapper wrapper_kind(std::string_view callee, const Config& config) {
  if (callee == "torch.nn.DataParallel" || callee == "torch.nn.parallel.DataParallel" ||
      callee == "torch.nn.parallel.data_parallel.DataParallel" || callee == "DataParallel")
    return Wrapper::Constructor;
  if (callee == "torch.nn.parallel.data_parallel" || callee == "torch.nn.parallel.data_parallel.data_parallel")
    return Wrapper::Functional;
  for (const auto& extra : config.extra_data_parallel)
    if (!callee.empty() && (extra == callee || extra == last_component(callee))) return Wrapper::Configured;
  return Wrapper::None;
}

// The user-defined class an instance belongs to: its simple name, and where
// it comes from as seen by the file: "." (a class of this file), a dotted
// module ("model" for `from model import Tagger`), or "" when not known
// (a star import).
struct InstanceClass {
  std::string name;
  std::string origin;
};

// The class `expr` is an instance of: `Seq2Seq(...)`, `model` bound to one,
// `model.cuda()`, `self.model`, or the result of a factory function of this
// file; an empty name when it cannot be told.
InstanceClass class_of_instance(const Model& m, TSNode expr, int fn, int depth) {
  expr = unparenthesize(expr);
  if (is_null(expr) || depth > kMaxInstanceDepth) return {};
  switch (kind_of(expr)) {
    case Kind::Call: {
      TSNode func = unparenthesize(field(expr, "function"));
      if (kind_of(func) == Kind::Attribute &&
          std::find(kReturnsSelf.begin(), kReturnsSelf.end(), m.text(field(func, "attribute"))) != kReturnsSelf.end())
        return class_of_instance(m, field(func, "object"), fn, depth + 1);
      std::string callee = m.qualify(func);
      if (callee.empty() || starts_with(callee, "torch.")) return {};
      std::string_view leaf = last_component(callee);
      if (std::find(kAlternateConstructors.begin(), kAlternateConstructors.end(), leaf) !=
          kAlternateConstructors.end()) {
        // `Tagger.load_from_checkpoint(path)`: a class method that builds an instance.
        std::string owner = callee.substr(0, callee.size() - leaf.size() - 1);
        if (is_capitalized(last_component(owner))) callee = owner;
        leaf = last_component(callee);
      }
      if (is_capitalized(leaf)) {
        bool dotted = callee.find('.') != std::string::npos;
        if (!dotted) return {callee, m.find_class(callee) ? "." : ""};
        return {std::string(leaf), callee.substr(0, callee.size() - leaf.size() - 1)};
      }
      if (callee.find('.') != std::string::npos) return {};
      const Function* factory = m.find_function(callee);
      if (!factory) return {};
      int f = static_cast<int>(factory - m.functions().data());
      for (TSNode r : returned_values(*factory)) {
        InstanceClass c = class_of_instance(m, r, f, depth + 1);
        if (!c.name.empty()) return c;
      }
      return {};
    }
    case Kind::Identifier: {
      const Binding* b = m.reaching(m.text(expr), start_byte(expr), fn);
      // A parameter: the value engine follows the arguments of its calls
      // (`Trainer(AcousticModel())` reaches `model` in Trainer.__init__).
      if (b && b->kind == BindingKind::Parameter) {
        // (A class of another file: its name, from wherever it comes.)
        Value v = m.value(expr);
        const Model& home = v.home ? *v.home : m;
        if (v.cls >= 0) return {home.classes()[static_cast<size_t>(v.cls)].name, v.home ? "" : "."};
      }
      if (!b || b->kind != BindingKind::Assign || b->element >= 0) return {};
      return class_of_instance(m, b->value, b->function, depth + 1);
    }
    case Kind::Attribute: {
      std::string name = m.qualify(expr);
      int cls = m.class_of_function(fn);
      if (name.empty()) return {};
      for (const Binding& b : m.bindings()) {
        if (b.name != name || b.kind != BindingKind::Assign || b.element >= 0) continue;
        bool same_scope = b.function == fn || (cls >= 0 && m.class_of_function(b.function) == cls);
        if (!same_scope) continue;
        InstanceClass c = class_of_instance(m, b.value, b.function, depth + 1);
        if (!c.name.empty()) return c;
      }
      return {};
    }
    default: return {};
  }
}

std::string normalized(std::string_view path) {
  std::string out(path);
  std::replace(out.begin(), out.end(), '\\', '/');
  for (std::string_view ext : {".pyi", ".py"}) {
    if (out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0) {
      out.resize(out.size() - ext.size());
      break;
    }
  }
  return out;
}

// Whether `file` can be the module `origin` imported by `importer`: the
// module's path below the importer's directory or one of its ancestors
// (`model` -> dir/model.py, `pkg.model` -> root/pkg/model.py or
// root/pkg/model/__init__.py), or a file of that package (a re-export).
bool defines_module(std::string_view file, std::string_view origin, std::string_view importer) {
  std::string module(origin);
  std::replace(module.begin(), module.end(), '.', '/');
  std::string f = normalized(file);
  std::string dir = normalized(importer);
  for (;;) {
    dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    std::string base = dir.empty() ? module : dir + "/" + module;
    if (f == base || f == base + "/__init__" || starts_with(f, base + "/")) return true;
    if (dir.empty()) return false;
  }
}

// Whether a class that `importer` names with `origin` (see InstanceClass)
// can be the one defined in `file`.
bool names_class_of(std::string_view origin, std::string_view importer, std::string_view file) {
  if (origin.empty()) return true;
  if (origin == ".") return normalized(importer) == normalized(file);
  return defines_module(file, origin, importer);
}

std::string_view value_at(const Fact& f, size_t i) {
  return f.values.size() > i ? std::string_view(f.values[i]) : std::string_view();
}

struct WrapFound {
  const Fact* wrap = nullptr;
  std::string wrapped;    // the class named in the wrap
  bool contains = false;  // reached through a module holding the class
};

// The first DataParallel wrap of `cls` (defined in `file`), of a subclass of
// it, or of a module holding either as a submodule, nearest first. Every step
// names the class of the right file: two projects' `Model` or `Encoder`
// classes are not confused.
std::optional<WrapFound> find_wrap(const ProjectIndex& index, const std::string& cls, const std::string& file) {
  struct Item {
    std::string name;
    std::vector<std::string> files;  // where the class may be defined
    bool contains = false;
  };
  auto files_of = [&](const std::string& name, std::string_view origin, std::string_view importer) {
    std::vector<std::string> files;
    for (const Fact* f : index.find("class", name))
      if (names_class_of(origin, importer, f->file)) files.push_back(f->file);
    return files;
  };
  std::deque<Item> work{{cls, {file}, false}};
  std::set<std::string> seen;
  while (!work.empty()) {
    Item item = std::move(work.front());
    work.pop_front();
    for (const std::string& s : index.subclasses_of(item.name)) {
      if (!seen.insert(s).second) continue;
      std::vector<std::string> files = s == item.name ? item.files : files_of(s, "", "");
      auto any_file = [&](std::string_view origin, std::string_view importer) {
        return std::any_of(files.begin(), files.end(),
                           [&](const std::string& f) { return names_class_of(origin, importer, f); });
      };
      for (const Fact* wrap : index.find("dataparallel-wrap", s))
        if (any_file(value_at(*wrap, 1), wrap->file)) return WrapFound{wrap, s, item.contains};
      for (const Fact* f : index.find("submodule", s)) {
        if (f->values.empty() || !any_file(value_at(*f, 1), f->file)) continue;
        const std::string& holder = f->values.front();
        work.push_back({holder, files_of(holder, value_at(*f, 2), f->file), true});
      }
    }
  }
  return std::nullopt;
}

// A call of a class by its (capitalized) name: `Seq2seq(encoder, decoder)`.
bool constructs(const Model& m, const Call& call) {
  TSNode func = unparenthesize(field(call.node, "function"));
  Kind k = kind_of(func);
  if (k != Kind::Identifier && k != Kind::Attribute) return false;
  return !starts_with(call.callee, "torch.") && is_capitalized(last_component(m.text(func)));
}

// A call other than a constructor that builds an instance of a class of the
// project: a class method such as `from_pretrained`, or, where its result is
// stored on self (`self.encoder = build_encoder(cfg)`), a function of this
// file (reading a function's returns for every call of a helper would cost
// more than it finds).
bool built_by_factory(const Model& m, const Call& call, bool stored_on_self) {
  std::string_view leaf = last_component(call.callee);
  if (std::find(kAlternateConstructors.begin(), kAlternateConstructors.end(), leaf) != kAlternateConstructors.end())
    return true;
  return stored_on_self && call.callee.find('.') == std::string::npos && !call.callee.empty() &&
         m.find_function(call.callee);
}

// `model.cuda()`: a method of a module that returns the module itself.
bool returns_self(const Model& m, const Call& call) {
  TSNode func = unparenthesize(field(call.node, "function"));
  return kind_of(func) == Kind::Attribute &&
         std::find(kReturnsSelf.begin(), kReturnsSelf.end(), m.text(field(func, "attribute"))) != kReturnsSelf.end();
}

class PadPackedNoTotalLength final : public Check {
 public:
  void collect(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    for (const Call& call : m.calls()) {
      Wrapper kind = wrapper_kind(call.callee, ctx.config());
      if (kind == Wrapper::None) continue;
      // DataParallel(module, ...) and data_parallel(module, ...) take the module
      // first; an in-house wrapper may take it anywhere: the first argument
      // that is an instance of a known class.
      std::vector<TSNode> candidates{m.keyword_argument(call, "module")};
      uint32_t positions = kind == Wrapper::Configured ? m.positional_count(call) : 1;
      for (uint32_t i = 0; i < positions; ++i) candidates.push_back(m.positional_argument(call, i));
      InstanceClass cls;
      for (TSNode candidate : candidates) {
        if (!is_null(candidate)) cls = class_of_instance(m, candidate, call.function, 0);
        if (!cls.name.empty()) break;
      }
      if (cls.name.empty()) continue;
      ctx.fact("dataparallel-wrap", cls.name, call.node, {std::string(m.text(call.func)), cls.origin});
    }
    // Modules a module holds: instances built in its methods (`self.encoder =
    // Encoder(...)`, a list of layers handed to nn.Sequential) and instances
    // handed to its constructor (`Seq2seq(encoder, decoder)`). A wrap of the
    // holder runs the held module's forward on each replica.
    std::unordered_set<const void*> stored_on_self;  // calls whose result a method stores on self
    for (const Binding& b : m.bindings()) {
      if (b.kind != BindingKind::Assign || b.element >= 0 || b.function < 0 || !starts_with(b.name, "self.")) continue;
      TSNode v = unparenthesize(b.value);
      if (kind_of(v) == Kind::Call) stored_on_self.insert(v.id);
    }
    for (const Call& call : m.calls()) {
      bool construction = constructs(m, call);
      if (!construction &&
          (call.function < 0 || !built_by_factory(m, call, stored_on_self.count(call.node.id) > 0)))
        continue;
      InstanceClass built = class_of_instance(m, call.node, call.function, 0);
      if (built.name.empty()) continue;
      int method = call.function;
      while (method >= 0 && m.functions()[method].cls < 0) method = m.functions()[method].parent;
      if (method >= 0 && !returns_self(m, call)) {
        const std::string& holder = m.classes()[m.functions()[method].cls].name;
        if (built.name != holder) ctx.fact("submodule", built.name, call.node, {holder, built.origin, "."});
      }
      if (!construction || is_null(call.args) || kind_of(call.args) != Kind::ArgumentList) continue;
      uint32_t n = ts_node_named_child_count(call.args);
      for (uint32_t i = 0; i < n; ++i) {
        TSNode arg = ts_node_named_child(call.args, i);
        if (kind_of(arg) == Kind::KeywordArgument) arg = field(arg, "value");
        Kind k = kind_of(unparenthesize(arg));
        if (k != Kind::Identifier && k != Kind::Call) continue;
        InstanceClass held = class_of_instance(m, arg, call.function, 0);
        if (!held.name.empty() && held.name != built.name)
          ctx.fact("submodule", held.name, arg, {built.name, held.origin, built.origin});
      }
    }
  }

  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    auto config = std::make_shared<Config>(ctx.config());
    for (const Call& call : m.calls()) {
      if (!is_pad_packed(call.callee) || !lacks_total_length(m, call)) continue;
      int method = call.function;
      while (method >= 0 && m.functions()[method].cls < 0) method = m.functions()[method].parent;
      if (method < 0) continue;
      int cls = m.functions()[method].cls;
      std::vector<std::string> undecided;
      ModuleAnswer module = m.module_class(cls, &undecided);
      if (module == ModuleAnswer::No) continue;
      std::string class_name = m.classes()[cls].name;
      std::string where = m.functions()[method].qualified_name;
      Diagnostic d = ctx.diagnostic(call.node, "");
      add_fix(m, call, d);
      ctx.defer(std::move(d), [=](const ProjectIndex& index, Diagnostic& diag) {
        if (module == ModuleAnswer::Unknown) {
          auto root = [&](std::string_view base) { return is_module_base(base, *config); };
          bool is_module = std::any_of(undecided.begin(), undecided.end(), [&](const std::string& base) {
            return index.derives_from(last_component(base), root);
          });
          if (!is_module) return false;
        }
        std::optional<WrapFound> found = find_wrap(index, class_name, diag.path);
        if (!found) return false;
        std::string wrapped =
            found->wrapped == class_name
                ? fmt::format("`{}` is", class_name)
                : fmt::format("`{}`, which {} `{}`, is", found->wrapped,
                              found->contains ? "holds" : "derives from", class_name);
        diag.message = fmt::format(
            fmt::runtime(messages::TL005::replicated), fmt::arg("function", where), fmt::arg("module", wrapped),
            fmt::arg("wrapper", found->wrap->values.empty() ? "DataParallel" : found->wrap->values.front()),
            fmt::arg("location", index.location(found->wrap->file, found->wrap->line)));
        return true;
      });
    }
  }

 private:
  // pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None)
  static bool lacks_total_length(const Model& m, const Call& call) {
    if (is_null(call.args) || kind_of(call.args) != Kind::ArgumentList) return false;
    uint32_t n = ts_node_named_child_count(call.args);
    for (uint32_t i = 0; i < n; ++i) {
      Kind k = kind_of(ts_node_named_child(call.args, i));
      if (k == Kind::ListSplat || k == Kind::DictionarySplat) return false;  // it may be in there
    }
    return is_null(m.keyword_argument(call, "total_length")) && m.positional_count(call) < 4;
  }

  // The padded tensor the same function passed to pack_padded_sequence before
  // `pad`, and the dimension that holds its time steps; a null node if none.
  static TSNode padded_input(const Model& m, const Call& pad, int& time_dim, const Call*& pack) {
    pack = nullptr;
    for (const Call& c : m.calls()) {
      if (c.function != pad.function || !is_pack_padded(c.callee)) continue;
      if (start_byte(c.node) < start_byte(pad.node)) pack = &c;
    }
    if (!pack) return TSNode{};
    TSNode input = m.keyword_argument(*pack, "input");
    if (is_null(input)) input = m.positional_argument(*pack, 0);
    input = unparenthesize(input);
    if (is_null(input) || m.qualify(input).empty()) return TSNode{};
    TSNode batch_first = m.keyword_argument(*pack, "batch_first");
    if (is_null(batch_first)) batch_first = m.positional_argument(*pack, 2);
    Kind k = kind_of(unparenthesize(batch_first));
    if (is_null(batch_first) || k == Kind::False) {
      time_dim = 0;
    } else if (k == Kind::True) {
      time_dim = 1;
    } else {
      return TSNode{};  // decided at run time
    }
    return input;
  }

  static bool rebound_between(const Model& m, std::string_view name, int fn, uint32_t from, uint32_t to) {
    for (const Binding* b : m.bindings_of(name, fn))
      if (b->end > from && b->end <= to) return true;  // completed between the two calls
    return false;
  }

  // The statement holding `node`, when it starts its own line in a block
  // that also holds `later`.
  static TSNode own_line_statement(const Model& m, TSNode node, TSNode later) {
    TSNode stmt = node;
    for (TSNode p = ts_node_parent(stmt); !is_null(p); stmt = p, p = ts_node_parent(p)) {
      Kind k = kind_of(p);
      if (k == Kind::Block || k == Kind::Module) {
        if (!contains(p, start_byte(later))) return TSNode{};
        std::string_view text = m.source().text();
        uint32_t s = start_byte(stmt);
        uint32_t line_start = s;
        while (line_start > 0 && text[line_start - 1] != '\n') --line_start;
        for (uint32_t i = line_start; i < s; ++i)
          if (text[i] != ' ' && text[i] != '\t') return TSNode{};
        return stmt;
      }
      if (k == Kind::FunctionDefinition || k == Kind::ClassDefinition || k == Kind::Lambda) return TSNode{};
    }
    return TSNode{};
  }

  static void add_fix(const Model& m, const Call& pad, Diagnostic& d) {
    d.help = "pass `total_length=` the padded length of the input given to `pack_padded_sequence` "
             "(`padded.size(1)` with `batch_first=True`, else `padded.size(0)`)";
    int time_dim = 0;
    const Call* pack = nullptr;
    TSNode input = padded_input(m, pad, time_dim, pack);
    if (is_null(input)) return;
    uint32_t n = ts_node_named_child_count(pad.args);
    TSNode last{};
    for (uint32_t i = 0; i < n; ++i)
      if (kind_of(ts_node_named_child(pad.args, i)) != Kind::Comment) last = ts_node_named_child(pad.args, i);
    if (is_null(last)) return;
    std::string padded(m.text(input));
    std::string length = fmt::format("{}.size({})", padded, time_dim);
    uint32_t after = end_byte(last);
    // Unsafe: the output grows to the padded length of the input. Under
    // DataParallel on one device (or the CPU) the program without it is
    // correct, and code that reads every time step (a mean over time)
    // computes another value (the runtime oracle's TL005 leak_pooled.py).
    if (!rebound_between(m, m.qualify(input), pad.function, start_byte(pack->node), start_byte(pad.node))) {
      d.help = fmt::format("pass `total_length={}`", length);
      d.fix = Fix{fmt::format("Pad to `{}` with `total_length`", length), FixSafety::Unsafe,
                  {Edit{after, after, fmt::format(", total_length={}", length)}}};
      return;
    }
    // `x = pack_padded_sequence(x, ...)`: measure `x` before it is packed.
    TSNode stmt = own_line_statement(m, pack->node, pad.node);
    if (is_null(stmt) || !m.bindings_of("total_length", pad.function).empty()) {
      d.help = fmt::format("record `total_length = {}` before packing and pass `total_length=total_length`", length);
      return;
    }
    std::string_view text = m.source().text();
    uint32_t s = start_byte(stmt);
    uint32_t line_start = s;
    while (line_start > 0 && text[line_start - 1] != '\n') --line_start;
    std::string indent(text.substr(line_start, s - line_start));
    d.help = fmt::format("record `total_length = {}` before packing and pass `total_length=total_length`", length);
    // Unsafe: a new local `total_length` would hide a global of that name
    // read later in the function.
    d.fix = Fix{fmt::format("Pad to `{}` with `total_length`", length), FixSafety::Unsafe,
                {Edit{s, s, fmt::format("total_length = {}\n{}", length, indent)},
                 Edit{after, after, ", total_length=total_length"}}};
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(PadPackedNoTotalLength, "TL005")

}  // namespace torchleak::python
