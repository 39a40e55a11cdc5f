// The interface every Python check implements, and its registration.
// A check is one class in one file, named after its rule:
//
//   class AccumulateUndetached final : public Check { ... };
//   TORCHLEAK_PYTHON_CHECK(AccumulateUndetached, "TL001")
//
// `collect` records facts other files need (first phase); `check` reports
// findings, deferring the ones that depend on the project index.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis.h"
#include "core/catalogue.h"
#include "python/model.h"

namespace torchleak::python {

class CheckContext {
 public:
  CheckContext(const Model& model, const RuleInfo& rule, const SourceFile& file, FileResult& out)
      : model_(model), rule_(rule), file_(file), out_(out) {}

  const Model& model() const { return model_; }
  const RuleInfo& rule() const { return rule_; }
  const Config& config() const { return model_.config(); }
  const std::string& path() const { return file_.path; }

  // A diagnostic of this rule spanning `node`, with the enclosing function
  // as its context. Fill in `help` and `fix` before reporting it.
  Diagnostic diagnostic(TSNode node, std::string message) const;
  void report(Diagnostic d);
  // Reported only if `resolve` returns true once every file's facts are in.
  void defer(Diagnostic d, std::function<bool(const ProjectIndex&, Diagnostic&)> resolve);
  void fact(std::string kind, std::string key, TSNode where, std::vector<std::string> values);

 private:
  const Model& model_;
  const RuleInfo& rule_;
  const SourceFile& file_;
  FileResult& out_;
};

class Check {
 public:
  virtual ~Check() = default;
  virtual void collect(CheckContext&) const {}
  virtual void check(CheckContext& ctx) const = 0;
};

struct RegisteredCheck {
  std::string rule_id;
  std::unique_ptr<Check> check;
};

const std::vector<RegisteredCheck>& registered_checks();
bool register_check(std::string rule_id, std::unique_ptr<Check> check);

// Shared helpers for fixes.
// An edit that appends `suffix` to `expr`, parenthesizing it when needed:
// `loss` -> `loss.item()`, `a + b` -> `(a + b).item()`.
std::vector<Edit> append_call_edits(const Model& model, TSNode expr, std::string_view suffix);

// Whether `name`, stored or accumulated in `loop`, survives an iteration that
// is a step over data: walking from `loop` outwards through the loops in
// which `name` is bound before the loop and not started afresh, one of them
// is a step loop (Model::is_step_loop). A list filled per batch inside the
// batch loop, or a total summed over the heads of one step, does not. A
// periodic reset (`if step % 100 == 0: total = 0`) does not start it afresh:
// the iterations between two resets still chain their graphs.
inline bool survives_step(const Model& m, std::string_view name, int loop) {
  for (int l = loop; l >= 0; l = m.loops()[l].parent) {
    if (!m.bound_before_loop(name, l) || m.reset_in_loop(name, l, /*every_iteration=*/true)) return false;
    if (m.is_step_loop(l)) return true;
  }
  return false;
}

// Whether an attached value is a loss, for which `.item()` is the idiom: its
// text names a loss, or it is a call to a loss function or criterion.
// A name is followed to its assignment: `kl = F.kl_div(...)`.
inline bool looks_like_loss(const Model& m, TSNode value, int depth = 0) {
  value = unparenthesize(value);
  if (depth > 4) return false;
  if (m.text(value).find("loss") != std::string_view::npos) return true;
  if (kind_of(value) == Kind::BinaryOperator)  // `criterion(out, y) * 0.5`
    return looks_like_loss(m, field(value, "left"), depth + 1) || looks_like_loss(m, field(value, "right"), depth + 1);
  if (kind_of(value) == Kind::Identifier) {
    const Binding* b = m.reaching(m.text(value), start_byte(value), m.function_at(start_byte(value)));
    return b && b->kind == BindingKind::Assign && b->element < 0 && looks_like_loss(m, b->value, depth + 1);
  }
  if (kind_of(value) != Kind::Call) return false;
  TSNode func = field(value, "function");
  if (m.is_loss_function(func)) return true;
  std::string callee = m.qualify(func);
  std::string_view prefix = "torch.nn.functional.";
  if (callee.compare(0, prefix.size(), prefix) != 0) return false;
  std::string_view name = std::string_view(callee).substr(prefix.size());
  return name.find("entropy") != std::string_view::npos || name == "kl_div" || name.find("loss") != std::string_view::npos;
}

// The part of an attached value that carries the history, for a fix that
// reads naturally: in `loss * x.size(0)` it is `loss` (`loss.item() *
// x.size(0)`). Narrows only through arithmetic whose other side is known to
// be Detached; otherwise the value itself.
inline TSNode attached_operand(const Model& m, TSNode value) {
  for (TSNode n = unparenthesize(value);;) {
    Kind k = kind_of(n);
    if (k == Kind::UnaryOperator) {
      n = unparenthesize(ts_node_named_child(n, ts_node_named_child_count(n) - 1));
      continue;
    }
    if (k != Kind::BinaryOperator) return n;
    TSNode left = unparenthesize(field(n, "left")), right = unparenthesize(field(n, "right"));
    Provenance l = m.provenance(left), r = m.provenance(right);
    if (l == Provenance::Attached && r == Provenance::Detached) n = left;
    else if (r == Provenance::Attached && l == Provenance::Detached) n = right;
    else return n;
  }
}

// The text of `whole` with `suffix` appended to its part `part`, which is
// parenthesized when needed: (`loss * n`, `loss`, ".item()") gives
// `loss.item() * n`. For a help line; the fix uses append_call_edits.
inline std::string with_suffix(const Model& m, TSNode whole, TSNode part, std::string_view suffix) {
  Kind k = kind_of(part);
  bool primary = k == Kind::Identifier || k == Kind::Attribute || k == Kind::Call || k == Kind::Subscript ||
                 k == Kind::ParenthesizedExpression;
  std::string_view all = m.text(whole);
  size_t from = start_byte(part) - start_byte(whole), to = end_byte(part) - start_byte(whole);
  std::string out(all.substr(0, from));
  out += primary ? std::string(m.text(part)) : "(" + std::string(m.text(part)) + ")";
  out += suffix;
  out += all.substr(to);
  return out;
}

// Source text for a message: whitespace runs collapsed to one space, cut to
// `max` characters with "..." when longer.
inline std::string code_snippet(std::string_view text, size_t max = 40) {
  std::string out;
  for (char c : text) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() <= max) return out;
  size_t cut = max > 3 ? max - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // not inside a code point
  return out.substr(0, cut) + "...";
}

// A short form of an expression for a message: its text when it fits, else
// `callee(...)` for a call, else the text cut.
inline std::string code_snippet(const Model& model, TSNode expr, size_t max = 40) {
  std::string full = code_snippet(model.text(expr), max + 1);
  if (full.size() <= max) return full;
  if (kind_of(expr) == Kind::Call) {
    std::string callee = code_snippet(model.text(field(expr, "function")), max > 5 ? max - 5 : 0);
    if (callee.find("...") == std::string::npos) return callee + "(...)";
  }
  return code_snippet(model.text(expr), max);
}

}  // namespace torchleak::python

#define TORCHLEAK_PYTHON_CHECK(ClassName, RuleId)                                    \
  namespace {                                                                        \
  [[maybe_unused]] const bool registered_##ClassName =                               \
      ::torchleak::python::register_check(RuleId, std::make_unique<ClassName>());    \
  }
