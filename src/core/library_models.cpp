#include "core/library_models.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <mutex>
#include <sstream>
#include <toml++/toml.h>

namespace torchleak {

extern const std::vector<std::pair<std::string, std::string>>& embedded_model_files();

namespace {

template <class E>
struct Choice {
  std::string_view word;
  E value;
};

constexpr std::array<Choice<GradFacet>, 4> kGrad = {{
    {"unknown", GradFacet::Unknown}, {"none", GradFacet::None},
    {"from-inputs", GradFacet::FromInputs}, {"attached", GradFacet::Attached}}};
constexpr std::array<Choice<DeviceFacet>, 4> kDevice = {{
    {"unknown", DeviceFacet::Unknown}, {"host", DeviceFacet::Host},
    {"accelerator", DeviceFacet::Accelerator}, {"from-inputs", DeviceFacet::FromInputs}}};
constexpr std::array<Choice<ValueKind>, 12> kKind = {{
    {"unknown", ValueKind::Unknown}, {"tensor", ValueKind::Tensor}, {"number", ValueKind::Number},
    {"container", ValueKind::Container}, {"module", ValueKind::Module}, {"optimizer", ValueKind::Optimizer},
    {"loss", ValueKind::Loss}, {"loader", ValueKind::Loader}, {"generator", ValueKind::Generator},
    {"model-output", ValueKind::ModelOutput}, {"other", ValueKind::Other}, {"none", ValueKind::None}}};
constexpr std::array<Choice<ParameterFacet>, 3> kParameters = {{
    {"unknown", ParameterFacet::Unknown}, {"none", ParameterFacet::None}, {"trainable", ParameterFacet::Trainable}}};
constexpr std::array<Choice<GradMode>, 5> kGradMode = {{
    {"unchanged", GradMode::Unchanged}, {"disabled", GradMode::Disabled}, {"enabled", GradMode::Enabled},
    {"argument", GradMode::Argument}, {"inference-argument", GradMode::InferenceArgument}}};
constexpr std::array<Choice<ModuleHookRuns>, 3> kHookRuns = {{
    {"forward", ModuleHookRuns::Forward}, {"forward-pre", ModuleHookRuns::ForwardPre},
    {"backward", ModuleHookRuns::Backward}}};
constexpr std::array<Choice<HookRole>, 4> kRole = {{
    {"none", HookRole::None}, {"training-step", HookRole::TrainingStep},
    {"evaluation-step", HookRole::EvaluationStep}, {"per-step", HookRole::PerStep}}};

}  // namespace

// Reads one model file, naming the file, the line and the entry in every error.
class ModelFileReader {
 public:
  ModelFileReader(LibraryModels& out, const std::string& path) : out_(out), path_(path) {}

  [[noreturn]] void fail(const toml::source_region& at, std::string_view where, std::string_view what) const {
    std::string place = at.begin.line ? fmt::format("{}:{}:{}", path_, at.begin.line, at.begin.column) : path_;
    throw ModelError(fmt::format("{}: {}: {}", place, where, what));
  }
  [[noreturn]] void fail(const toml::node& at, std::string_view where, std::string_view what) const {
    fail(at.source(), where, what);
  }

  const toml::table& table(const toml::node& n, std::string_view where) const {
    const toml::table* t = n.as_table();
    if (!t) fail(n, where, "must be a table");
    return *t;
  }

  std::string string(const toml::node& n, std::string_view where) const {
    auto s = n.value<std::string>();
    if (!s || s->empty()) fail(n, where, "must be a non-empty string");
    return *s;
  }

  std::vector<std::string> strings(const toml::node& n, std::string_view where) const {
    const toml::array* arr = n.as_array();
    if (!arr) fail(n, where, "must be an array of strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < arr->size(); ++i) out.push_back(string(*arr->get(i), fmt::format("{}[{}]", where, i)));
    return out;
  }

  bool boolean(const toml::node& n, std::string_view where) const {
    auto b = n.value<bool>();
    if (!b) fail(n, where, "must be true or false");
    return *b;
  }

  template <class E, size_t N>
  E choice(const toml::node& n, std::string_view where, const std::array<Choice<E>, N>& choices) const {
    std::string word = string(n, where);
    for (const auto& c : choices)
      if (c.word == word) return c.value;
    std::string expected;
    for (const auto& c : choices) expected += fmt::format("{}{}", expected.empty() ? "" : ", ", c.word);
    fail(n, where, fmt::format("must be one of {}, not '{}'", expected, word));
  }

  // "self", "arg0", "arg1|name".
  Operand operand(const toml::node& n, std::string_view where) const {
    std::string s = string(n, where);
    if (s == "self") return Operand{};
    Operand o;
    o.kind = Operand::Kind::Argument;
    if (s.size() > 2 && s.substr(0, 2) == "*|") {  // keyword-only: `*|detect_anomaly`
      o.index = Operand::kKeywordOnly;
      o.keyword = s.substr(2);
      return o;
    }
    std::string_view rest(s);
    size_t bar = rest.find('|');
    if (bar != std::string_view::npos) {
      o.keyword = std::string(rest.substr(bar + 1));
      rest = rest.substr(0, bar);
    }
    bool ok = rest.size() > 3 && rest.substr(0, 3) == "arg" && (bar == std::string_view::npos || !o.keyword.empty());
    for (char c : rest.substr(std::min<size_t>(3, rest.size())))
      ok = ok && c >= '0' && c <= '9';
    if (!ok) fail(n, where, fmt::format("must be self, argN, argN|keyword or *|keyword, not '{}'", s));
    o.index = static_cast<uint32_t>(std::stoul(std::string(rest.substr(3))));
    return o;
  }

  [[noreturn]] void unknown(const toml::key& key, std::string_view where, std::string_view expected) const {
    fail(key.source(), where, fmt::format("unknown key '{}' (expected one of: {})", key.str(), expected));
  }

  std::vector<std::string> names(const toml::table& t, std::string_view where, bool required = true) const {
    const toml::node* n = t.get("names");
    if (!n) {
      if (required) fail(t, where, "needs `names`, the qualified names it describes");
      return {};
    }
    std::vector<std::string> out = strings(*n, std::string(where) + ".names");
    if (out.empty() && required) fail(*n, std::string(where) + ".names", "must name at least one callable");
    return out;
  }

  void call(const toml::table& t, std::string_view where) {
    CallModel m;
    const toml::node* hook_runs_at = nullptr;
    m.file = path_;
    m.line = t.source().begin.line;
    for (const auto& [k, node] : t) {
      std::string key(k.str());
      std::string at = fmt::format("{}.{}", where, key);
      if (key == "names" || key == "patterns") continue;
      if (key == "result") {
        for (const auto& [rk, rn] : table(node, at)) {
          std::string rkey(rk.str());
          std::string rat = fmt::format("{}.{}", at, rkey);
          if (rkey == "grad") m.grad = choice(rn, rat, kGrad);
          else if (rkey == "device") m.device = choice(rn, rat, kDevice);
          else if (rkey == "kind") m.kind = choice(rn, rat, kKind);
          else if (rkey == "elements") m.elements = choice(rn, rat, kKind);
          else if (rkey == "pairs") m.pairs = boolean(rn, rat);
          else if (rkey == "frozen") m.frozen = operand(rn, rat);
          else if (rkey == "class") m.result_class = string(rn, rat);
          else if (rkey == "fields") {
            for (const auto& [fk, fn] : table(rn, rat))
              m.field_grads.emplace_back(std::string(fk.str()), choice(fn, fmt::format("{}.{}", rat, fk.str()), kGrad));
          } else if (rkey == "items") {
            for (const auto& [ik, in] : table(rn, rat)) {
              std::string index(ik.str());
              std::string iat = fmt::format("{}.{}", rat, index);
              bool digits = !index.empty() && index.size() < 6 &&
                            std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
              if (!digits) fail(ik.source(), iat, "a position must be a number (0, 1, ...)");
              m.item_grads.emplace_back(static_cast<uint32_t>(std::stoul(index)), choice(in, iat, kGrad));
            }
          }
          else if (rkey == "from") {
            const toml::array* arr = rn.as_array();
            if (!arr) fail(rn, rat, "must be an array of operands (self, argN)");
            for (size_t i = 0; i < arr->size(); ++i) m.from.push_back(operand(*arr->get(i), fmt::format("{}[{}]", rat, i)));
          } else unknown(rk, at, "grad, device, kind, class, elements, pairs, frozen, fields, items, from");
        }
      } else if (key == "grad-mode") {
        m.grad_mode = choice(node, at, kGradMode);
      } else if (key == "environment-check") {
        m.environment_check = boolean(node, at);
      } else if (key == "effects") {
        for (const auto& [ek, en] : table(node, at)) {
          std::string ekey(ek.str());
          std::string eat = fmt::format("{}.{}", at, ekey);
          if (ekey == "backward") m.backward = operand(en, eat);
          else if (ekey == "step") m.steps = operand(en, eat);
          else if (ekey == "clear-grads") m.clears_grads = operand(en, eat);
          else if (ekey == "release-cache") m.releases_cache = boolean(en, eat);
          else if (ekey == "anomaly-detection") {
            if (en.is_string() && en.value_or(std::string()) == "with-block") m.anomaly_detection_block = true;
            else m.anomaly_detection = operand(en, eat);
          }
          else if (ekey == "in-place") m.in_place = boolean(en, eat);
          else if (ekey == "accumulates-grads") m.accumulates_grads = boolean(en, eat);
          else if (ekey == "loop") m.runs_loop = boolean(en, eat);
          else if (ekey == "hook") m.hook = operand(en, eat);
          else if (ekey == "hook-runs") {
            m.hook_runs = choice(en, eat, kHookRuns);
            hook_runs_at = &en;
          }
          else unknown(ek, at, "backward, accumulates-grads, step, clear-grads, release-cache, anomaly-detection, "
                               "in-place, loop, hook, hook-runs");
        }
        if (hook_runs_at && !m.hook) fail(*hook_runs_at, at + ".hook-runs", "needs `hook`, the operand that is the registered callable");
      } else {
        unknown(k, where, "names, patterns, result, grad-mode, environment-check, effects");
      }
    }
    std::vector<std::string> patterns;
    if (const toml::node* p = t.get("patterns")) patterns = strings(*p, std::string(where) + ".patterns");
    std::vector<std::string> named = names(t, where, patterns.empty());
    for (const auto& name : named) {
      CallModel copy = m;
      copy.name = name;
      out_.note_effects(name, m);
      out_.calls_[name] = std::move(copy);
    }
    for (const auto& p : patterns) {
      CallModel copy = m;
      copy.name = p;
      out_.note_effects(p, m);
      out_.call_patterns_.push_back(std::move(copy));
    }
  }

  void cls(const toml::table& t, std::string_view where) {
    ValueKind kind = ValueKind::Unknown;
    ParameterFacet parameters = ParameterFacet::Unknown;
    bool has_kind = false;
    std::vector<std::string> patterns, except, bases;
    for (const auto& [k, node] : t) {
      std::string key(k.str());
      std::string at = fmt::format("{}.{}", where, key);
      if (key == "names") continue;
      if (key == "kind") {
        kind = choice(node, at, kKind);
        has_kind = true;
      } else if (key == "patterns") patterns = strings(node, at);
      else if (key == "except") except = strings(node, at);
      else if (key == "bases") bases = strings(node, at);
      else if (key == "parameters") parameters = choice(node, at, kParameters);
      else unknown(k, where, "names, patterns, except, kind, bases, parameters");
    }
    std::vector<std::string> named = names(t, where, false);
    if (named.empty() && patterns.empty()) fail(t, where, "needs `names` or `patterns`");
    if (!has_kind && bases.empty() && parameters == ParameterFacet::Unknown)
      fail(t, where, "needs `kind`, `bases` or `parameters`");
    for (const auto& n : named) {
      if (has_kind) out_.class_kinds_[n] = kind;
      if (parameters != ParameterFacet::Unknown) out_.class_parameters_[n] = parameters;
      if (!bases.empty()) out_.class_bases_[n] = bases;
    }
    for (const auto& p : patterns) {
      out_.class_patterns_.push_back({p, except, has_kind ? kind : ValueKind::Unknown, parameters});
      if (!bases.empty()) out_.class_bases_["pattern:" + p] = bases;
    }
  }

  void hook(const toml::table& t, std::string_view where) {
    std::vector<std::string> classes, methods;
    HookModel h;
    for (const auto& [k, node] : t) {
      std::string key(k.str());
      std::string at = fmt::format("{}.{}", where, key);
      if (key == "classes") classes = strings(node, at);
      else if (key == "methods") methods = strings(node, at);
      else if (key == "role") h.role = choice(node, at, kRole);
      else if (key == "grad-mode") h.grad_mode = choice(node, at, kGradMode);
      else if (key == "batch") {
        h.batch = operand(node, at);
        if (h.batch->kind != Operand::Kind::Argument) fail(node, at, "must be an argument (argN), not self");
      } else if (key == "batch-iterator") h.batch_iterator = string(node, at);
      else unknown(k, where, "classes, methods, role, grad-mode, batch, batch-iterator");
    }
    if (classes.empty()) fail(t, where, "needs `classes`, the framework's base classes");
    if (methods.empty()) fail(t, where, "needs `methods`, the hooks' names");
    if (!h.batch_iterator.empty() && !h.batch) fail(t, where, "`batch-iterator` needs `batch`");
    if (h.role == HookRole::None && h.grad_mode == GradMode::Unchanged)
      fail(t, where, "says nothing: give a `role` or a `grad-mode`");
    for (const auto& c : classes) {
      out_.hook_classes_[c] = true;
      for (const auto& m : methods) {
        HookModel copy = h;
        copy.cls = c;
        copy.method = m;
        out_.hooks_[c + '\0' + m] = std::move(copy);
        out_.hook_methods_[m] = true;
      }
    }
  }

  void registry(const toml::table& t, std::string_view where) {
    LibraryModels::Registry r;
    for (const auto& [k, node] : t) {
      std::string key(k.str());
      std::string at = fmt::format("{}.{}", where, key);
      if (key == "decorators") r.decorators = strings(node, at);
      else if (key == "config-key") r.key = string(node, at);
      else unknown(k, where, "decorators, config-key");
    }
    if (r.decorators.empty()) fail(t, where, "needs `decorators`, the registering decorators' names (globs)");
    if (r.key.empty()) fail(t, where, "needs `config-key`, the key under which a configuration names a class");
    if (std::find(out_.registry_keys_.begin(), out_.registry_keys_.end(), r.key) == out_.registry_keys_.end())
      out_.registry_keys_.push_back(r.key);
    out_.registries_.push_back(std::move(r));
  }

  void read(std::string_view text) {
    toml::table root;
    try {
      root = toml::parse(text, path_);
    } catch (const toml::parse_error& e) {
      fail(e.source(), "TOML", std::string(e.description()));
    }
    for (const auto& [k, node] : root) {
      std::string key(k.str());
      if (key == "library") {
        string(node, key);
      } else if (key == "aliases") {
        for (const auto& [ak, an] : table(node, key)) {
          std::string from(ak.str());
          if (from.empty()) fail(an, key, "an alias needs a non-empty name");
          out_.aliases_[from] = string(an, fmt::format("aliases.\"{}\"", from));
        }
      } else if (key == "calls" || key == "classes" || key == "hooks" || key == "registries") {
        const toml::array* arr = node.as_array();
        if (!arr) fail(node, key, fmt::format("must be an array of tables ([[{}]])", key));
        for (size_t i = 0; i < arr->size(); ++i) {
          std::string where = fmt::format("{}[{}]", key, i);
          const toml::table& t = table(*arr->get(i), where);
          if (key == "calls") call(t, where);
          else if (key == "classes") cls(t, where);
          else if (key == "registries") registry(t, where);
          else hook(t, where);
        }
      } else {
        fail(k.source(), key, "unknown key (expected one of: library, aliases, calls, classes, hooks, registries)");
      }
    }
  }

 private:
  LibraryModels& out_;
  const std::string& path_;
};

namespace {

std::vector<std::string> split_dots(std::string_view s) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    size_t dot = s.find('.', start);
    out.emplace_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

bool match_segments(const std::vector<std::string>& p, size_t i, const std::vector<std::string>& n, size_t j) {
  if (i == p.size()) return j == n.size();
  if (p[i] == "**") {
    for (size_t k = j; k <= n.size(); ++k)
      if (match_segments(p, i + 1, n, k)) return true;
    return false;
  }
  return j < n.size() && fnmatch(p[i].c_str(), n[j].c_str(), 0) == 0 && match_segments(p, i + 1, n, j + 1);
}

// A glob on dotted names: `*`, `?` and `[...]` match within one component,
// `**` any number of components: `torch.nn.[A-Z]*`, `numpy.**`.
bool glob_match(const std::string& pattern, std::string_view name) {
  // Most names fail on the pattern's literal prefix: no splitting for them.
  size_t literal = pattern.find_first_of("*?[");
  std::string_view prefix = std::string_view(pattern).substr(0, literal);
  if (name.substr(0, prefix.size()) != prefix) return false;
  if (literal == std::string::npos) return name.size() == prefix.size();
  return match_segments(split_dots(pattern), 0, split_dots(name), 0);
}

}  // namespace

void LibraryModels::note_effects(const std::string& name, const CallModel& m) {
  unsigned effects = (m.backward ? kBackward : 0u) | (m.steps ? kStep : 0u) | (m.releases_cache ? kReleaseCache : 0u) |
                     (m.grad_mode != GradMode::Unchanged ? kGradMode : 0u) |
                     (m.anomaly_detection || m.anomaly_detection_block ? kAnomalyDetection : 0u) |
                     (m.environment_check ? kEnvironmentCheck : 0u) | (m.runs_loop ? kRunsLoop : 0u) | (m.hook ? kRegistersHook : 0u);
  if (effects) effect_names_[name.substr(name.rfind('.') + 1)] |= effects;
}

void LibraryModels::load(std::string_view text, const std::string& path) { ModelFileReader(*this, path).read(text); }

void LibraryModels::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(fmt::format("{}: cannot read the model file", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  load(ss.str(), path);
}

const std::shared_ptr<const LibraryModels>& LibraryModels::builtin() {
  static const std::shared_ptr<const LibraryModels> models = [] {
    auto m = std::make_shared<LibraryModels>();
    for (const auto& [name, text] : embedded_model_files()) m->load(text, "models/" + name);
    return std::shared_ptr<const LibraryModels>(std::move(m));
  }();
  return models;
}

std::shared_ptr<const LibraryModels> LibraryModels::with_files(const std::vector<std::string>& paths) {
  if (paths.empty()) return builtin();
  auto m = std::make_shared<LibraryModels>(*builtin());
  for (const auto& p : paths) m->load_file(p);
  return m;
}

std::optional<std::string> LibraryModels::aliased(std::string_view q) const {
  if (aliases_.empty() || q.empty()) return std::nullopt;
  // The longest aliased prefix that ends at a dot or at the end of the name.
  for (size_t end = q.size();;) {
    if (auto it = aliases_.find(q.substr(0, end)); it != aliases_.end()) {
      std::string out = it->second;
      out.append(q.substr(end));
      return out;
    }
    size_t dot = q.rfind('.', end - 1);
    if (dot == std::string_view::npos || dot == 0) return std::nullopt;
    end = dot;
  }
}

std::string LibraryModels::canonical(std::string_view q) const {
  std::optional<std::string> a = aliased(q);
  return a ? std::move(*a) : std::string(q);
}

const CallModel* LibraryModels::call(std::string_view q) const {
  if (auto it = calls_.find(q); it != calls_.end()) return &it->second;
  std::optional<std::string> a = aliased(q);
  if (a)
    if (auto it = calls_.find(*a); it != calls_.end()) return &it->second;
  std::string_view c = a ? std::string_view(*a) : q;
  // Patterns in file order; the last match wins, so a later, narrower pattern overrides.
  const CallModel* found = nullptr;
  for (const auto& p : call_patterns_)
    if (glob_match(p.name, c)) found = &p;
  return found;
}

const CallModel* LibraryModels::method(std::string_view cls, std::string_view name) const {
  std::vector<std::string> work{canonical(cls)};
  for (size_t i = 0; i < work.size() && i < 32; ++i) {
    if (const CallModel* m = call(work[i] + "." + std::string(name))) return m;
    if (auto it = class_bases_.find(work[i]); it != class_bases_.end())
      work.insert(work.end(), it->second.begin(), it->second.end());
    for (const auto& p : class_patterns_) {
      if (!p.covers(work[i])) continue;
      if (auto it = class_bases_.find("pattern:" + p.pattern); it != class_bases_.end())
        work.insert(work.end(), it->second.begin(), it->second.end());
    }
  }
  return nullptr;
}

const CallModel* LibraryModels::tensor_method(std::string_view name) const {
  std::string q = "torch.Tensor.";
  q += name;
  auto it = calls_.find(q);
  return it == calls_.end() ? nullptr : &it->second;
}

bool LibraryModels::ClassPattern::covers(std::string_view c) const {
  return glob_match(pattern, c) && std::find(except.begin(), except.end(), c) == except.end();
}

template <class T>
T LibraryModels::class_fact(std::string_view q, const ModelNameMap<T>& named, T ClassPattern::*fact) const {
  std::string c = canonical(q);
  if (auto it = named.find(c); it != named.end()) return it->second;
  // Patterns in file order; the last match wins, so a later, narrower pattern overrides.
  T out{};
  for (const auto& p : class_patterns_)
    if (p.*fact != T{} && p.covers(c)) out = p.*fact;
  return out;
}

ValueKind LibraryModels::class_kind(std::string_view q) const {
  return class_fact(q, class_kinds_, &ClassPattern::kind);
}

ParameterFacet LibraryModels::class_parameters(std::string_view q) const {
  return class_fact(q, class_parameters_, &ClassPattern::parameters);
}

bool LibraryModels::knows_class(std::string_view q) const { return class_kind(q) != ValueKind::Unknown; }

const HookModel* LibraryModels::hook(std::string_view base, std::string_view method) const {
  std::string key = canonical(base);
  key += '\0';
  key += method;
  auto it = hooks_.find(key);
  return it == hooks_.end() ? nullptr : &it->second;
}

bool LibraryModels::has_hooks(std::string_view base) const {
  return hook_classes_.count(base) > 0 || hook_classes_.count(canonical(base)) > 0;
}

const std::string* LibraryModels::registry_key(std::string_view qualified_decorator) const {
  for (const Registry& r : registries_)
    for (const std::string& pattern : r.decorators)
      if (glob_match(pattern, qualified_decorator)) return &r.key;
  return nullptr;
}

}  // namespace torchleak
