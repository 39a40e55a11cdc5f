// TL009 empty-cache-in-loop: torch.cuda.empty_cache() on every iteration of
// a loop over batches.
#include <fmt/format.h>

#include "checks/python/check.h"
#include "rule_messages.h"

namespace torchleak::python {

namespace {

class EmptyCacheInLoop final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    for (const Call& c : m.calls()) {
      if (!m.releases_cache(c)) continue;
      std::string where;
      if (c.loop >= 0) {
        if (every_iteration_loop(m, c) < 0) continue;
        where = "on every iteration";
      } else {
        // No loop of its own: a hook the framework calls once per step
        // (Lightning's training_step, a TrainerCallback's on_step_end).
        const Function* f = c.function >= 0 ? &m.functions()[static_cast<size_t>(c.function)] : nullptr;
        if (!f || !f->hook || f->hook->role == HookRole::None || conditional_between(m, c.node, f->body)) continue;
        where = fmt::format("on every step (`{}` runs once per step)", f->name);
      }
      Diagnostic d = ctx.diagnostic(
          c.node, fmt::format(fmt::runtime(messages::TL009::runs), fmt::arg("call", "torch.cuda.empty_cache()"),
                              fmt::arg("when", where)));
      d.help = "remove it, or make it periodic (`if step % 1000 == 0:`); a leak is a live reference, not cache";
      ctx.report(std::move(d));
    }
  }

 private:
  // The innermost loop over batches that runs the call unconditionally on
  // each of its iterations, or -1.
  static int every_iteration_loop(const Model& m, const Call& c) {
    for (int loop : m.enclosing_loops(start_byte(c.node), c.function)) {
      if (conditional_between(m, c.node, m.loops()[loop].node)) return -1;
      if (m.is_step_loop(loop)) return batch_level(m, loop) ? loop : -1;
    }
    return -1;
  }

  // A loop runs once per batch when it is a step loop and no loop nested in
  // it is one: an epoch loop around the loader loop runs once per epoch.
  static bool batch_level(const Model& m, int loop) {
    const Loop& l = m.loops()[loop];
    for (size_t i = static_cast<size_t>(loop) + 1; i < m.loops().size(); ++i) {
      const Loop& inner = m.loops()[i];
      if (start_byte(inner.node) >= end_byte(l.node)) break;
      if (inner.function == l.function && m.is_step_loop(static_cast<int>(i))) return false;
    }
    return true;
  }

  // Whether an if/elif/else, an except clause, a conditional expression or
  // a boolean short-circuit stands between `node` and `ancestor`. An `if`
  // that only tests the machine (`if torch.cuda.is_available():`) does not:
  // its body runs on every step of a GPU run.
  static bool conditional_between(const Model& m, TSNode node, TSNode ancestor) {
    for (TSNode n = ts_node_parent(node); !is_null(n) && !ts_node_eq(n, ancestor); n = ts_node_parent(n)) {
      switch (kind_of(n)) {
        case Kind::IfStatement:
          if (m.is_environment_check(field(n, "condition"))) break;
          return true;
        case Kind::ElifClause:
        case Kind::ElseClause:
        case Kind::ConditionalExpression:
        case Kind::BooleanOperator:
        case Kind::Lambda:
        case Kind::FunctionDefinition: return true;
        default: break;
      }
      if (std::string_view(ts_node_type(n)) == "except_clause") return true;
    }
    return false;
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(EmptyCacheInLoop, "TL009")

}  // namespace torchleak::python
