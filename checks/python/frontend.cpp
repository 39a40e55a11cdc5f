// The Python frontend as the engine sees it: build the semantic model once,
// then run every enabled check against it.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "checks/python/check.h"
#include "core/project_index.h"
#include "core/suppression.h"
#include "python/project.h"

namespace torchleak::python {

namespace {

std::vector<RegisteredCheck>& checks_storage() {
  static std::vector<RegisteredCheck> c;
  return c;
}

std::string enclosing_context(const Model& model, uint32_t byte) {
  int fn = model.function_at(byte);
  return fn < 0 ? std::string("<module>") : model.functions()[fn].qualified_name;
}

// The line of the module's first statement other than its docstring: a
// `torchleak: skip-file` comment counts above it. 0 when there is none.
uint32_t first_statement_line(TSNode root) {
  uint32_t n = ts_node_named_child_count(root);
  bool first = true;
  for (uint32_t i = 0; i < n; ++i) {
    TSNode s = ts_node_named_child(root, i);
    if (kind_of(s) == Kind::Comment) continue;
    bool docstring = first && kind_of(s) == Kind::ExpressionStatement && ts_node_named_child_count(s) == 1 &&
                     kind_of(ts_node_named_child(s, 0)) == Kind::String;
    first = false;
    if (!docstring) return ts_node_start_point(s).row + 1;
  }
  return 0;
}

// The statement holding `node` (a compound statement's header only: what
// precedes its first block), as its tokens joined by single spaces with
// comments left out. Reformatting keeps it; it is what baselines fingerprint.
std::string statement_snippet(const Model& model, TSNode node) {
  constexpr size_t kMaxBytes = 4096;
  TSNode statement = node;
  for (TSNode p = ts_node_parent(statement); !is_null(p); p = ts_node_parent(p)) {
    Kind k = kind_of(p);
    if (k == Kind::Block || k == Kind::Module) break;
    statement = p;
  }
  std::string out;
  TSTreeCursor cursor = ts_tree_cursor_new(statement);
  bool done = false;
  while (!done && out.size() < kMaxBytes) {
    TSNode n = ts_tree_cursor_current_node(&cursor);
    Kind k = kind_of(n);
    if (k == Kind::Block) break;
    bool leaf = k == Kind::String || ts_node_child_count(n) == 0;
    if (leaf && k != Kind::Comment) {
      if (!out.empty()) out += ' ';
      out += model.text(n);
    }
    if (!leaf && k != Kind::Comment && ts_tree_cursor_goto_first_child(&cursor)) continue;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        done = true;
        break;
      }
    }
  }
  ts_tree_cursor_delete(&cursor);
  if (out.size() > kMaxBytes) out.resize(kMaxBytes);
  return out;
}

// Every registered check with its catalogue entry, looked up once: checks
// register before main() runs, and the catalogue is built in.
const std::vector<std::pair<const RuleInfo*, const Check*>>& checks_with_rules() {
  static const auto all = [] {
    std::vector<std::pair<const RuleInfo*, const Check*>> v;
    for (const auto& rc : registered_checks())
      if (const RuleInfo* rule = Catalogue::builtin().find(rc.rule_id)) v.emplace_back(rule, rc.check.get());
    return v;
  }();
  return all;
}

class PythonFrontend final : public LanguageFrontend {
 public:
  std::string_view language() const override { return "python"; }
  bool handles(std::string_view path) const override {
    return path.size() > 3 && (path.substr(path.size() - 3) == ".py" ||
                               (path.size() > 4 && path.substr(path.size() - 4) == ".pyi"));
  }
  bool parses(std::string_view text) const override {
    TSParser* parser = ts_parser_new();
    ts_parser_set_language(parser, python::language());
    TSTree* tree = python::parse_python(parser, text);
    bool ok = tree && !ts_node_has_error(ts_tree_root_node(tree));
    if (tree) ts_tree_delete(tree);
    ts_parser_delete(parser);
    return ok;
  }
  // The classes configurations name for the library models' registries
  // ("config-type": `dict(type="DetectAnomalyHook")`): a registered class
  // runs only where one does.
  static void config_facts(const Model& model, const std::string& path, FileResult& out) {
    const auto& keys = model.library().registry_keys();
    if (keys.empty()) return;
    for (int index : model.calls_named("dict")) {
      const Call& c = model.calls()[static_cast<size_t>(index)];
      if (c.callee != "dict") continue;
      for (const std::string& key : keys) {
        TSNode v = model.keyword_argument(c, key);
        if (is_null(v) || kind_of(v) != Kind::String) continue;
        // A plain literal: no prefix (f-strings, bytes), no escapes.
        std::string_view text = model.text(v);
        if (text.size() < 2 || (text.front() != '"' && text.front() != '\'') || text.back() != text.front() ||
            text.find('\\') != std::string_view::npos)
          continue;
        std::string_view name = text.substr(1, text.size() - 2);
        out.facts.push_back({"config-type", std::string(name), path, ts_node_start_point(c.node).row + 1, {}});
      }
    }
  }

  // Which classes the project trains: "constructed-by" (a class name, the
  // class of the file whose methods construct it, or "" for code outside
  // classes) and "trained-here" (a class defined or constructed in a file
  // that trains: it builds an optimizer or runs a backward pass).
  static void training_facts(const Model& model, const std::string& path, FileResult& out) {
    bool trains = model.trains();
    std::vector<std::pair<std::string, std::string>> constructed;  // (class, holder)
    for (const Call& c : model.calls()) {
      std::string_view name = last_component(c.callee);
      if (name.empty() || !std::isupper(static_cast<unsigned char>(name.front()))) continue;
      int cls = c.function >= 0 ? model.class_of_function(c.function) : -1;
      std::string holder = cls >= 0 ? model.classes()[static_cast<size_t>(cls)].name : std::string();
      if (holder == name) continue;
      std::pair<std::string, std::string> entry{std::string(name), std::move(holder)};
      if (std::find(constructed.begin(), constructed.end(), entry) == constructed.end()) constructed.push_back(entry);
    }
    for (const auto& [name, holder] : constructed) out.facts.push_back({"constructed-by", name, path, 0, {holder}});
    if (!trains) return;
    std::vector<std::string> trained;
    for (const auto& c : model.classes()) trained.push_back(c.name);
    for (const auto& entry : constructed) trained.push_back(entry.first);
    std::sort(trained.begin(), trained.end());
    trained.erase(std::unique(trained.begin(), trained.end()), trained.end());
    for (const std::string& name : trained) out.facts.push_back({"trained-here", name, path, 0, {}});
  }

  void analyze(const SourceFile& file, const Config& config, FileResult& out) const override {
    begin_file_analysis();
    Model model(file.text, config, file.path);
    if (model.has_syntax_errors()) {
      out.notes.push_back(fmt::format("syntax error near line {}; analyzed as far as the parser recovered",
                                      model.first_error_line()));
    }
    // Every class and its bases: the project index resolves module-ness across files.
    for (const auto& c : model.classes()) {
      out.facts.push_back({"class", c.name, file.path, ts_node_start_point(c.node).row + 1, c.bases});
    }
    training_facts(model, file.path, out);
    config_facts(model, file.path, out);
    // Comments that may hold suppressions, for the engine to apply.
    for (TSNode c : model.comments()) {
      if (!may_hold_directive(model.text(c))) continue;
      TSPoint at = ts_node_start_point(c);
      out.comments.push_back(comment_at(file.text, start_byte(c), end_byte(c), at.row + 1, at.column));
    }
    out.first_statement_line = first_statement_line(model.root());
    std::vector<std::pair<const RuleInfo*, const Check*>> enabled;
    for (auto [rule, check] : checks_with_rules())
      if (config.rule_enabled(*rule)) enabled.emplace_back(rule, check);
    for (auto [rule, check] : enabled) out.rules_run.push_back(rule->id);
    for (auto [rule, check] : enabled) {
      CheckContext ctx(model, *rule, file, out);
      check->collect(ctx);
    }
    for (auto [rule, check] : enabled) {
      CheckContext ctx(model, *rule, file, out);
      check->check(ctx);
    }
  }
};

[[maybe_unused]] const bool frontend_registered = [] {
  register_frontend(std::make_unique<PythonFrontend>());
  return true;
}();

}  // namespace

const std::vector<RegisteredCheck>& registered_checks() { return checks_storage(); }

bool register_check(std::string rule_id, std::unique_ptr<Check> check) {
  auto& c = checks_storage();
  c.push_back({std::move(rule_id), std::move(check)});
  std::sort(c.begin(), c.end(), [](const RegisteredCheck& a, const RegisteredCheck& b) { return a.rule_id < b.rule_id; });
  return true;
}

Diagnostic CheckContext::diagnostic(TSNode node, std::string message) const {
  Diagnostic d;
  d.rule_id = rule_.id;
  d.path = file_.path;
  TSPoint s = ts_node_start_point(node), e = ts_node_end_point(node);
  d.start = {s.row + 1, s.column};
  d.end = {e.row + 1, e.column};
  d.start_byte = ts_node_start_byte(node);
  d.end_byte = ts_node_end_byte(node);
  d.message = std::move(message);
  d.help = rule_.fix;
  d.source_line = std::string(model_.source().line_at(d.start_byte));
  d.context = enclosing_context(model_, d.start_byte);
  d.snippet = statement_snippet(model_, node);
  return d;
}

void CheckContext::report(Diagnostic d) { out_.diagnostics.push_back(std::move(d)); }

void CheckContext::defer(Diagnostic d, std::function<bool(const ProjectIndex&, Diagnostic&)> resolve) {
  out_.deferred.push_back({std::move(d), std::move(resolve)});
}

void CheckContext::fact(std::string kind, std::string key, TSNode where, std::vector<std::string> values) {
  out_.facts.push_back({std::move(kind), std::move(key), file_.path, ts_node_start_point(where).row + 1,
                        std::move(values)});
}

std::vector<Edit> append_call_edits(const Model& model, TSNode expr, std::string_view suffix) {
  Kind k = kind_of(expr);
  bool primary = k == Kind::Identifier || k == Kind::Attribute || k == Kind::Call || k == Kind::Subscript ||
                 k == Kind::ParenthesizedExpression;
  uint32_t s = start_byte(expr), e = end_byte(expr);
  if (primary) return {Edit{e, e, std::string(suffix)}};
  (void)model;
  std::string close = ")";  // not ")" + std::string(suffix): GCC 12's -O3 -Wrestrict misfires on it
  close += suffix;
  return {Edit{s, s, "("}, Edit{e, e, std::move(close)}};
}

}  // namespace torchleak::python
