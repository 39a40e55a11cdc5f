// TL012 anomaly-detection-enabled: set_detect_anomaly(True) left on, or a
// detect_anomaly() block around a loop over batches.
#include <fmt/format.h>

#include "checks/python/check.h"
#include "core/vocabulary.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

// A condition in the same function: a debug flag. `if __name__ == "__main__":`
// is no guard, it is how a script runs.
bool under_condition(const Model& m, TSNode node) {
  for (TSNode n = ts_node_parent(node); !is_null(n); n = ts_node_parent(n)) {
    Kind k = kind_of(n);
    if (k == Kind::FunctionDefinition) return false;
    if (k == Kind::IfStatement && m.text(field(n, "condition")).find("__name__") != std::string_view::npos)
      continue;
    if (k == Kind::IfStatement || k == Kind::ElifClause || k == Kind::ElseClause ||
        k == Kind::ConditionalExpression || k == Kind::BooleanOperator)
      return true;
  }
  return false;
}

class AnomalyDetectionEnabled final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    if (is_test_file(ctx.path())) return;
    const Model& m = ctx.model();
    for (const Call& c : m.calls()) {
      // What switches it on comes from the library models: a setter
      // (`set_detect_anomaly(True)`, `Trainer(detect_anomaly=True)`) or a
      // context manager (`with detect_anomaly():`).
      const CallModel* model =
          m.library().may_switch_anomaly_detection(call_name(c)) ? m.call_model(c) : nullptr;
      if (!model) continue;
      bool setter = model->anomaly_detection.has_value();
      bool context = model->anomaly_detection_block;
      if (!setter && !context) continue;
      std::string keyword;
      if (setter) {
        TSNode mode = m.operand(c, *model->anomaly_detection);
        if (kind_of(mode) != Kind::True) continue;
        if (model->anomaly_detection->index == Operand::kKeywordOnly) keyword = model->anomaly_detection->keyword;
      }
      TSNode with_stmt = enclosing_with(c.node);
      if (context && is_null(with_stmt)) continue;  // detect_anomaly() outside `with` does nothing
      if (under_condition(m, c.node) || in_debug_function(m, c)) continue;
      if (!is_null(with_stmt)) {
        if (!contains_step_loop(m, with_stmt)) continue;
      }
      std::string what =
          !is_null(with_stmt) ? std::string(messages::TL012::around_loop)
          : keyword.empty()   ? fmt::format(fmt::runtime(messages::TL012::switched_on),
                                            fmt::arg("call", "set_detect_anomaly(True)"))
                              : fmt::format(fmt::runtime(messages::TL012::framework_flag), fmt::arg("flag", keyword));
      Diagnostic d = ctx.diagnostic(c.node, what);
      d.help = keyword.empty() ? "enable it only while debugging: `torch.autograd.set_detect_anomaly(args.debug)`"
                               : fmt::format("enable it only while debugging: `{}=args.debug`", keyword);
      // In a class a registry registers (`@HOOKS.register_module()`): it
      // runs only if a configuration of the project names it.
      int cls = m.class_of_function(c.function);
      if (m.registered_class(cls)) {
        std::string name = m.classes()[static_cast<size_t>(cls)].name;
        ctx.defer(std::move(d), [name](const ProjectIndex& index, Diagnostic&) {
          return !index.find("config-type", name).empty();
        });
        continue;
      }
      ctx.report(std::move(d));
    }
  }

 private:
  // The with statement whose item is this call, if any.
  static TSNode enclosing_with(TSNode call) {
    TSNode n = ts_node_parent(call);
    if (kind_of(n) == Kind::AsPattern) n = ts_node_parent(n);
    if (kind_of(n) != Kind::WithItem) return TSNode{};
    for (TSNode p = ts_node_parent(n); !is_null(p); p = ts_node_parent(p))
      if (kind_of(p) == Kind::WithStatement) return p;
    return TSNode{};
  }

  // A loop over steps in the block, written out or run by a framework
  // (`trainer.fit(model)`, ignite's `trainer.run(loader)`), in the block's
  // own function (not in a function it defines).
  static bool contains_step_loop(const Model& m, TSNode with_stmt) {
    for (size_t i = 0; i < m.loops().size(); ++i) {
      TSNode loop = m.loops()[i].node;
      if (start_byte(loop) >= start_byte(with_stmt) && end_byte(loop) <= end_byte(with_stmt) &&
          m.is_step_loop(static_cast<int>(i)))
        return true;
    }
    int function = m.function_at(start_byte(with_stmt));
    for (const Call& c : m.calls())
      if (c.function == function && start_byte(c.node) >= start_byte(with_stmt) &&
          end_byte(c.node) <= end_byte(with_stmt) && m.runs_loop(c))
        return true;
    return false;
  }

  static bool in_debug_function(const Model& m, const Call& c) {
    for (int f = c.function; f >= 0; f = m.functions()[f].parent) {
      const std::string& name = m.functions()[f].name;
      if (name.find("debug") != std::string::npos || name.rfind("test", 0) == 0) return true;
    }
    return false;
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(AnomalyDetectionEnabled, "TL012")

}  // namespace torchleak::python
