// The Python semantic model, query by query: loops, grad-disabled regions,
// bindings, provenance and import aliases. Each test parses a small program
// and asserts exact answers about nodes found by their source text.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "python/model.h"

using namespace torchleak;
using namespace torchleak::python;

namespace {

// A parsed program and ways to point into it by source text.
class Program {
 public:
  explicit Program(std::string text, Config config = {})
      : text_(std::move(text)), config_(std::move(config)), model_(text_, config_) {}

  const Model& model() const { return model_; }

  // Byte offsets of the occurrences of `snippet` as whole tokens (`x` does not occur in `xs`).
  std::vector<uint32_t> occurrences(std::string_view snippet) const {
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    std::vector<uint32_t> out;
    for (size_t pos = text_.find(snippet); pos != std::string::npos; pos = text_.find(snippet, pos + 1)) {
      size_t end = pos + snippet.size();
      if (word(snippet.front()) && pos > 0 && word(text_[pos - 1])) continue;
      if (word(snippet.back()) && end < text_.size() && word(text_[end])) continue;
      out.push_back(static_cast<uint32_t>(pos));
    }
    return out;
  }

  // Byte offset of the `nth` occurrence (0-based) of `snippet` as whole
  // tokens; fails the test when there is none.
  uint32_t at(std::string_view snippet, int nth = 0) const {
    std::vector<uint32_t> all = occurrences(snippet);
    if (nth >= 0 && static_cast<size_t>(nth) < all.size()) return all[static_cast<size_t>(nth)];
    ADD_FAILURE() << "no occurrence " << nth << " of `" << snippet << "`";
    return 0;
  }

  // The innermost named node spanning exactly the `nth` occurrence of `snippet`.
  TSNode node(std::string_view snippet, int nth = 0) const {
    uint32_t start = at(snippet, nth);
    uint32_t end = start + static_cast<uint32_t>(snippet.size());
    TSNode n = ts_node_named_descendant_for_byte_range(model_.root(), start, end);
    while (!ts_node_is_null(n) && !(start_byte(n) == start && end_byte(n) == end)) n = ts_node_parent(n);
    EXPECT_FALSE(ts_node_is_null(n)) << "no node spans `" << snippet << "`";
    return n;
  }

  Provenance provenance(std::string_view snippet, int nth = 0) const { return model_.provenance(node(snippet, nth)); }
  Value value(std::string_view snippet, int nth = 0) const { return model_.value(node(snippet, nth)); }
  // The value of the last occurrence of `snippet` as whole tokens (a name in a return statement).
  Value last(std::string_view snippet) const {
    return model_.value(node(snippet, static_cast<int>(occurrences(snippet).size()) - 1));
  }
  GradState grad(std::string_view snippet, int nth = 0) const { return model_.grad_state(at(snippet, nth)); }
  int function_at(std::string_view snippet, int nth = 0) const { return model_.function_at(at(snippet, nth)); }

  // The loop whose statement (or comprehension) starts at `snippet`.
  int loop(std::string_view snippet, int nth = 0) const {
    uint32_t start = at(snippet, nth);
    const auto& loops = model_.loops();
    for (size_t i = 0; i < loops.size(); ++i)
      if (start_byte(loops[i].node) == start) return static_cast<int>(i);
    ADD_FAILURE() << "no loop starts at `" << snippet << "`";
    return -1;
  }

  // The binding whose statement starts at the `nth` occurrence of `statement`
  // and binds `name`.
  const Binding* binding(std::string_view name, std::string_view statement, int nth = 0) const {
    uint32_t start = at(statement, nth);
    for (const auto& b : model_.bindings())
      if (b.name == name && (b.start == start || start_byte(b.statement) == start)) return &b;
    ADD_FAILURE() << "no binding of `" << name << "` at `" << statement << "`";
    return nullptr;
  }

 private:
  std::string text_;
  Config config_;
  Model model_;
};

// --------------------------------------------------------------------------
// Loops

TEST(ModelLoops, ForWhileAndComprehensionRanges) {
  Program p(R"(def train(loader, steps):
    for x, y in loader:
        pass
    n = 0
    while n < steps:
        n += 1
    squares = [v * v for v in range(4)]
)");
  const auto& loops = p.model().loops();
  ASSERT_EQ(loops.size(), 3u);
  int f = p.loop("for x, y in loader"), w = p.loop("while n < steps"), c = p.loop("[v * v for v in range(4)]");
  EXPECT_EQ(loops[f].kind, LoopKind::For);
  EXPECT_EQ(loops[w].kind, LoopKind::While);
  EXPECT_EQ(loops[c].kind, LoopKind::Comprehension);
  // A for loop iterates from its target to the end of its body: the iterable
  // is evaluated once, before the first iteration.
  EXPECT_EQ(loops[f].start, p.at("x, y in loader"));
  EXPECT_EQ(loops[f].end, p.at("pass") + 4);
  EXPECT_TRUE(p.model().loop_contains(f, p.at("x, y in loader")));
  EXPECT_FALSE(p.model().loop_contains(f, p.at("for x, y")));
  EXPECT_FALSE(p.model().loop_contains(f, p.at("n = 0")));
  // A while loop re-evaluates its condition every iteration.
  EXPECT_EQ(loops[w].start, p.at("n < steps"));
  EXPECT_TRUE(p.model().loop_contains(w, p.at("n += 1")));
  // A comprehension is one loop over its whole text.
  EXPECT_EQ(loops[c].start, p.at("[v * v"));
  EXPECT_EQ(loops[c].end, p.at("(4)]") + 4);
  for (int l : {f, w, c}) {
    EXPECT_EQ(loops[l].function, 0);
    EXPECT_EQ(loops[l].parent, -1);
  }
}

TEST(ModelLoops, NestingStopsAtFunctionBoundaries) {
  Program p(R"(for epoch in range(3):
    for batch in loader:
        outs = [model(x) for x in batch]

        def hook(grads):
            for g in grads:
                print(g)
)");
  int outer = p.loop("for epoch"), inner = p.loop("for batch"), comp = p.loop("[model(x) for x in batch]"),
      nested = p.loop("for g in grads");
  const auto& loops = p.model().loops();
  EXPECT_EQ(loops[outer].parent, -1);
  EXPECT_EQ(loops[inner].parent, outer);
  EXPECT_EQ(loops[comp].parent, inner);
  EXPECT_EQ(loops[nested].parent, -1);  // another function
  EXPECT_EQ(loops[nested].function, p.function_at("for g in grads"));
  EXPECT_EQ(p.model().enclosing_loops(p.at("model(x)"), -1), (std::vector<int>{comp, inner, outer}));
  EXPECT_EQ(p.model().enclosing_loops(p.at("outs ="), -1), (std::vector<int>{inner, outer}));
  EXPECT_EQ(p.model().innermost_loop(p.at("print(g)"), p.function_at("print(g)")), nested);
  EXPECT_EQ(p.model().enclosing_loops(p.at("print(g)"), p.function_at("print(g)")), (std::vector<int>{nested}));
}

TEST(ModelLoops, StepLoopsIterateDataOrStepAnOptimizer) {
  Program p(R"(import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


def train(model, dataset, heads, optimizer, scaler, epochs):
    train_dl = DataLoader(dataset, batch_size=8)
    stream = iter(train_dl)
    for epoch in range(epochs):
        for step, (x, y) in enumerate(tqdm(train_dl)):
            for chunk in zip(x.chunk(4), y.chunk(4)):
                pass
            for head in heads:
                pass
    while True:
        batch = next(stream)
        scaler.step(optimizer)
    for t in range(10):
        optimizer.step()
    for t in range(10):
        scheduler.step()
    losses = [model(b) for b in train_dl]
    for layer in model.layers:
        pass
)");
  const Model& m = p.model();
  EXPECT_TRUE(m.is_step_loop(p.loop("for epoch")));  // a data loop nested in it
  EXPECT_TRUE(m.is_step_loop(p.loop("for step, (x, y)")));
  EXPECT_FALSE(m.is_step_loop(p.loop("for chunk")));
  EXPECT_FALSE(m.is_step_loop(p.loop("for head")));
  EXPECT_TRUE(m.is_step_loop(p.loop("while True")));  // scaler.step(optimizer)
  EXPECT_TRUE(m.is_step_loop(p.loop("for t in range(10)", 0)));
  EXPECT_FALSE(m.is_step_loop(p.loop("for t in range(10)", 1)));  // a scheduler is not an optimizer
  EXPECT_TRUE(m.is_step_loop(p.loop("[model(b) for b in train_dl]")));
  EXPECT_FALSE(m.is_step_loop(p.loop("for layer")));
  EXPECT_FALSE(m.is_step_loop(-1));
}

TEST(ModelLoops, AFreshOptimizationPerIterationIsNoStepOfTheOuterLoop) {
  Program p(R"(import torch


def invert(latents, embeddings, steps, inner):
    kept = []
    shared = torch.optim.Adam([embeddings], lr=1e-2)
    for i in range(steps):
        opt = torch.optim.Adam([embeddings], lr=1e-2)
        for j in range(inner):
            opt.step()
        for k in range(inner):
            shared.step()
        kept.append(embeddings.detach())
    for n in range(steps):
        opt2 = torch.optim.SGD([embeddings], lr=0.1)
        opt2.step()
    return kept
)");
  const Model& m = p.model();
  EXPECT_TRUE(m.is_step_loop(p.loop("for j")));
  // The optimizer built each iteration does not make `for i` a step loop; the shared one does.
  EXPECT_TRUE(m.is_step_loop(p.loop("for i")));
  EXPECT_TRUE(m.is_step_loop(p.loop("for n")));  // built and stepped in the same iteration
  Program q(R"(import torch


def invert(embeddings, steps, inner):
    for i in range(steps):
        opt = torch.optim.Adam([embeddings], lr=1e-2)
        for j in range(inner):
            opt.step()
)");
  EXPECT_FALSE(q.model().is_step_loop(q.loop("for i")));
  EXPECT_TRUE(q.model().is_step_loop(q.loop("for j")));
}

TEST(ModelLoops, DataLoaders) {
  Program p(R"(from torch.utils.data import DataLoader


def run(ds, loaders, n):
    data = DataLoader(ds)
    it = iter(data)
    for a in val_dataloader: pass
    for a in self.train_loader: pass
    for a in train_dataset: pass
    for a in batches: pass
    for a in dl: pass
    for a in it: pass
    for a in loaders["val"]: pass
    for a in loaders: pass
    for a in dataloaders[phase]: pass
    for a in sizes[phase]: pass
    for a in range(n): pass
    for a in zip(names, sizes): pass
    for a in enumerate(data, 1): pass
)");
  const Model& m = p.model();
  auto loader = [&](std::string_view s) { return m.is_data_loader(p.node(s)); };
  EXPECT_TRUE(loader("val_dataloader"));
  EXPECT_TRUE(loader("self.train_loader"));
  EXPECT_TRUE(loader("train_dataset"));
  EXPECT_TRUE(loader("batches"));
  EXPECT_TRUE(loader("dl"));
  EXPECT_TRUE(m.is_data_loader(p.node("it", 1)));  // iter() of a DataLoader(...)
  EXPECT_TRUE(loader("loaders[\"val\"]"));      // an element of a collection of loaders
  EXPECT_FALSE(m.is_data_loader(p.node("loaders", 2)));  // the collection itself yields loaders
  EXPECT_TRUE(loader("dataloaders[phase]"));
  EXPECT_FALSE(loader("sizes[phase]"));
  EXPECT_FALSE(loader("range(n)"));
  EXPECT_FALSE(loader("zip(names, sizes)"));
  EXPECT_TRUE(loader("enumerate(data, 1)"));
}

// --------------------------------------------------------------------------
// Grad-disabled regions

TEST(ModelGrad, WithStatements) {
  Program p(R"(import torch


def evaluate(model, x, flag):
    a = model(x)
    with torch.no_grad():
        b = model(x)
    with torch.inference_mode():
        c = model(x)
    with torch.inference_mode(False):
        d = model(x)
    with torch.inference_mode(mode=flag):
        e = model(x)
    with torch.set_grad_enabled(False):
        f = model(x)
    with torch.set_grad_enabled(True):
        g = model(x)
    with torch.set_grad_enabled(flag):
        h = model(x)
    with torch.autograd.no_grad():
        i = model(x)
    with torch.cuda.amp.autocast():
        j = model(x)
)");
  EXPECT_EQ(p.grad("a = model"), GradState::Enabled);
  EXPECT_EQ(p.grad("with torch.no_grad"), GradState::Enabled);  // the with line itself
  EXPECT_EQ(p.grad("b = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("c = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("d = model"), GradState::Enabled);
  EXPECT_EQ(p.grad("e = model"), GradState::Maybe);
  EXPECT_EQ(p.grad("f = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("g = model"), GradState::Enabled);
  EXPECT_EQ(p.grad("h = model"), GradState::Maybe);
  EXPECT_EQ(p.grad("i = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("j = model"), GradState::Enabled);
}

TEST(ModelGrad, DecoratorsAndAliases) {
  Program p(R"(import torch as T
from torch import no_grad


@T.no_grad()
def a(model, x):
    return model(x)


@T.no_grad
def b(model, x):
    return model(x)


@T.inference_mode()
def c(model, x):
    return model(x)


@no_grad()
def d(model, x):
    return model(x)


@staticmethod
def e(model, x):
    return model(x)


class Evaluator:
    @T.no_grad()
    def run(self, x):
        return self.model(x)

    def fit(self, x):
        return self.model(x)
)");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p.grad("return model(x)", i), GradState::Disabled) << i;
  EXPECT_EQ(p.grad("return model(x)", 4), GradState::Enabled);
  EXPECT_EQ(p.grad("return self.model(x)", 0), GradState::Disabled);
  EXPECT_EQ(p.grad("return self.model(x)", 1), GradState::Enabled);
  EXPECT_EQ(p.grad("def a"), GradState::Enabled);  // only the body
  EXPECT_EQ(p.model().functions()[p.function_at("return model(x)")].decorators,
            (std::vector<std::string>{"torch.no_grad"}));
  EXPECT_TRUE(p.model().function_has_decorator(p.function_at("return model(x)", 3), "torch.no_grad"));
}

TEST(ModelGrad, EnableGradInsideNoGrad) {
  Program p(R"(import torch


@torch.no_grad()
def attack(model, x, y, criterion):
    before = model(x)
    with torch.enable_grad():
        x.requires_grad_(True)
        loss = criterion(model(x), y)
        with torch.no_grad():
            inner = model(x)
        again = model(x)
    after = model(x)
    return before, loss, inner, again, after
)");
  EXPECT_EQ(p.grad("before = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("loss = criterion"), GradState::Enabled);
  EXPECT_EQ(p.grad("inner = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("again = model"), GradState::Enabled);
  EXPECT_EQ(p.grad("after = model"), GradState::Disabled);
  EXPECT_EQ(p.provenance("loss", 1), Provenance::Attached);
  EXPECT_EQ(p.provenance("before", 1), Provenance::Detached);
}

// --------------------------------------------------------------------------
// Bindings

TEST(ModelBindings, ReachingIsTheLastBindingBeforeTheUse) {
  Program p(R"(total = 10


def train(loader, scale=2.0):
    x = 1
    x = 2
    for batch in loader:
        y = x + batch
    return y, total, scale, missing


def configure():
    global total
    total = 3
)");
  const Model& m = p.model();
  int train = p.function_at("x = 1");
  const Binding* b = m.reaching("x", p.at("x + batch"), train);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b, p.binding("x", "x = 2"));
  b = m.reaching("y", p.at("y, total"), train);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->loop, p.loop("for batch"));
  // A module-level name read in a function.
  b = m.reaching("total", p.at("total, scale"), train);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->function, -1);
  EXPECT_EQ(b->start, p.at("total = 10"));
  b = m.reaching("scale", p.at("scale, missing"), train);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind, BindingKind::Parameter);
  EXPECT_EQ(m.reaching("missing", p.at("missing"), train), nullptr);
  // `global total` makes the function's assignment a module-level binding's update.
  EXPECT_EQ(p.binding("total", "global total")->kind, BindingKind::Global);
  b = m.reaching("batch", p.at("+ batch") + 2, train);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind, BindingKind::ForTarget);
}

TEST(ModelBindings, TupleUnpackingAndAttributeTargets) {
  Program p(R"(class Trainer:
    def fit(self, model, x):
        out, aux = model(x)
        a, b = out.sum(), 1
        self.total = 0
        self.total += out
        self.stats["loss"] = out
)");
  const Binding* out = p.binding("out", "out, aux");
  const Binding* aux = p.binding("aux", "out, aux");
  ASSERT_TRUE(out && aux);
  EXPECT_EQ(out->kind, BindingKind::Assign);
  EXPECT_EQ(out->element, 0);
  EXPECT_EQ(aux->element, 1);
  EXPECT_EQ(p.model().text(out->value), "model(x)");
  const Binding* b = p.binding("b", "a, b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->element, 1);
  const Binding* total = p.binding("self.total", "self.total = 0");
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(total->kind, BindingKind::Assign);
  const Binding* aug = p.binding("self.total", "self.total += out");
  ASSERT_NE(aug, nullptr);
  EXPECT_EQ(aug->kind, BindingKind::AugAssign);
  EXPECT_EQ(aug->op, "+=");
  const Binding* store = p.binding("self.stats", "self.stats[");
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->kind, BindingKind::SubscriptStore);
  EXPECT_EQ(p.model().text(store->value), "out");
}

TEST(ModelBindings, BoundBeforeAndRebound) {
  Program p(R"(history = []


def train(model, loader, log):
    total = 0.0
    for x in loader:
        window = 0.0
        total = total + x
        window += x
        count = 1
        self_ish = log
        history.append(x)
        stats.n += 1
    return total
)");
  const Model& m = p.model();
  int l = p.loop("for x in loader");
  EXPECT_TRUE(m.bound_before_loop("total", l));
  EXPECT_FALSE(m.bound_before_loop("window", l));
  EXPECT_FALSE(m.bound_before_loop("count", l));
  EXPECT_TRUE(m.bound_before_loop("log", l));      // a parameter
  EXPECT_TRUE(m.bound_before_loop("history", l));  // module level
  EXPECT_TRUE(m.bound_before_loop("stats.n", l));  // an attribute
  EXPECT_FALSE(m.bound_before_loop("total", -1));
  EXPECT_TRUE(m.rebound_in_loop("total", l));
  EXPECT_FALSE(m.rebound_in_loop("total", l, p.binding("total", "total = total + x")));
  EXPECT_FALSE(m.rebound_in_loop("history", l));
  EXPECT_TRUE(m.rebound_in_loop("x", l));  // the loop target
}

TEST(ModelBindings, GlobalsOutliveTheLoop) {
  Program p(R"(steps = 0


def train(loader):
    global seen
    for x in loader:
        seen += x
        steps_local = steps + 1
    return steps_local
)");
  const Model& m = p.model();
  int l = p.loop("for x in loader");
  EXPECT_TRUE(m.bound_before_loop("seen", l));  // declared global: lives outside the function
  EXPECT_FALSE(m.rebound_in_loop("seen", l));
  EXPECT_FALSE(m.reset_in_loop("seen", l));
  EXPECT_TRUE(m.bound_before_loop("steps", l));
  EXPECT_FALSE(m.bound_before_loop("steps_local", l));
  const Binding* g = p.binding("seen", "global seen");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->kind, BindingKind::Global);
  EXPECT_EQ(g->function, p.function_at("global seen"));
  EXPECT_FALSE(m.feeds_backward("seen", g->function));
}

TEST(ModelBindings, ResetInLoop) {
  Program p(R"(def train(loader, stats):
    total = 0.0
    acc = None
    preds = []
    window = 0.0
    parts = []
    for step, x in enumerate(loader):
        total = total + x
        acc = x if acc is None else torch.cat([acc, x])
        preds.append(x)
        window += x
        if step % 10 == 0:
            window = 0.0
        parts.append(x)
        parts.clear()
        stats = Stats()
        stats.total += x
        pair, other = 0, total
)");
  const Model& m = p.model();
  int l = p.loop("for step");
  EXPECT_FALSE(m.reset_in_loop("total", l));   // `total = total + x` reads it
  EXPECT_FALSE(m.reset_in_loop("acc", l));
  EXPECT_FALSE(m.reset_in_loop("preds", l));
  EXPECT_TRUE(m.reset_in_loop("window", l));   // reset under a condition still counts
  EXPECT_TRUE(m.reset_in_loop("parts", l));    // .clear()
  EXPECT_TRUE(m.reset_in_loop("stats.total", l));  // a fresh `stats`
  EXPECT_TRUE(m.reset_in_loop("step", l));     // the loop target
  EXPECT_TRUE(m.reset_in_loop("pair", l));
  EXPECT_TRUE(m.reset_in_loop("other", l));    // `other` is bound to `total`, not to itself
  EXPECT_FALSE(m.reset_in_loop("total", -1));
}

TEST(ModelBindings, HoldsList) {
  Program p(R"(class T:
    def __init__(self):
        self.history = []
        self.total = 0.0

    def run(self, xs, n):
        a = []
        b = [x * 2 for x in xs]
        c = list(xs)
        d = [None] * n
        e = 0.0
        f = torch.zeros(3)
        a += [1]
        return a, b, c, d, e, f
)");
  const Model& m = p.model();
  int run = p.function_at("a = []");
  uint32_t use = p.at("return a");
  EXPECT_TRUE(m.holds_list("a", use, run));  // through `a += [1]`
  EXPECT_TRUE(m.holds_list("b", use, run));
  EXPECT_TRUE(m.holds_list("c", use, run));
  EXPECT_TRUE(m.holds_list("d", use, run));
  EXPECT_FALSE(m.holds_list("e", use, run));
  EXPECT_FALSE(m.holds_list("f", use, run));
  EXPECT_FALSE(m.holds_list("xs", use, run));
  EXPECT_TRUE(m.holds_list("self.history", use, run));
  EXPECT_FALSE(m.holds_list("self.total", use, run));
}

TEST(ModelBindings, BackwardSubjectsAndWhatFeedsThem) {
  Program p(R"(import torch


def accumulate(model, loader, accelerator, k):
    acc = 0
    logged = 0.0
    parts = []
    for x in loader:
        acc = acc + model(x) / k
        parts.append(model(x))
        logged += acc.item()
    (acc / k).backward()
    total = torch.stack(parts).sum()
    final = total * 2
    accelerator.backward(final)
    grads = torch.autograd.grad(logged, model.parameters())


def closure_user(model, x):
    inner_total = model(x)

    def closure():
        inner_total.backward()
    return closure


class Trainer:
    def fit(self, loader):
        for x in loader:
            self.pending += self.model(x)

    def flush(self):
        self.pending.backward()
        self.pending = 0.0

    def other(self, loader):
        for x in loader:
            self.seen += self.model(x)
)");
  const Model& m = p.model();
  int acc_fn = p.function_at("acc = 0");
  EXPECT_TRUE(m.is_backward_subject("acc", acc_fn));
  EXPECT_TRUE(m.is_backward_subject("k", acc_fn));  // every name of `(acc / k)`
  EXPECT_TRUE(m.is_backward_subject("final", acc_fn));  // accelerator.backward(final)
  EXPECT_TRUE(m.is_backward_subject("logged", acc_fn));  // torch.autograd.grad(logged, ...)
  EXPECT_FALSE(m.is_backward_subject("parts", acc_fn));
  EXPECT_TRUE(m.feeds_backward("acc", acc_fn));
  EXPECT_TRUE(m.feeds_backward("parts", acc_fn));  // parts -> total -> final -> backward
  EXPECT_TRUE(m.feeds_backward("total", acc_fn));
  EXPECT_FALSE(m.feeds_backward("loader", acc_fn));
  // A closure's backward counts for the enclosing function's local.
  int closure_user = p.function_at("inner_total = model(x)");
  EXPECT_FALSE(m.is_backward_subject("inner_total", closure_user));
  EXPECT_TRUE(m.feeds_backward("inner_total", closure_user));
  // An attribute is followed through every method of its class.
  int fit = p.function_at("self.pending +=");
  EXPECT_FALSE(m.is_backward_subject("self.pending", fit));
  EXPECT_TRUE(m.feeds_backward("self.pending", fit));
  EXPECT_FALSE(m.feeds_backward("self.seen", p.function_at("self.seen +=")));
}

TEST(ModelBindings, FeedsBackwardIsFalseWithoutAPath) {
  Program p(R"(def train(model, loader, criterion, optimizer):
    running = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
        report = running / 10
    return report
)");
  int f = p.function_at("running = 0.0");
  EXPECT_TRUE(p.model().feeds_backward("loss", f));
  EXPECT_FALSE(p.model().feeds_backward("running", f));
  EXPECT_FALSE(p.model().feeds_backward("report", f));
}

TEST(ModelBindings, Mentions) {
  Program p(R"(a = stats.total + f(total=1) + total_steps
b = self.total * 2
)");
  const Model& m = p.model();
  TSNode first = p.node("stats.total + f(total=1) + total_steps");
  EXPECT_TRUE(m.mentions(first, "stats.total"));
  EXPECT_TRUE(m.mentions(first, "stats"));
  EXPECT_FALSE(m.mentions(first, "total"));  // an attribute name and a keyword are not reads
  EXPECT_TRUE(m.mentions(first, "total_steps"));
  EXPECT_TRUE(m.mentions(p.node("self.total * 2"), "self.total"));
  EXPECT_FALSE(m.mentions(p.node("self.total * 2"), "total"));
}

TEST(ModelBindings, ComprehensionVariablesStayInside) {
  Program p(R"(def f(model, inputs):
    z = model(inputs)
    detached = [z.detach() for z in inputs]
    return z
)");
  const Model& m = p.model();
  int f = p.function_at("z = model");
  const Binding* inside = m.reaching("z", p.at("z.detach()"), f);
  ASSERT_NE(inside, nullptr);
  EXPECT_EQ(inside->kind, BindingKind::ForTarget);
  const Binding* after = m.reaching("z", p.at("z", 3), f);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after, p.binding("z", "z = model"));
  EXPECT_EQ(p.provenance("z", 3), Provenance::Attached);  // the returned z
  EXPECT_EQ(m.provenance(p.binding("detached", "detached =")->value), Provenance::Detached);
}

// --------------------------------------------------------------------------
// Provenance

TEST(ModelProvenance, ModelsAndLosses) {
  Program p(R"(import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def forward(self, x):
        return x


def train(loader, student, teacher_logits):
    net = Net()
    layer = nn.Linear(4, 2)
    model = build()
    criterion = nn.CrossEntropyLoss()
    mse = nn.MSELoss()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    for x, y in loader:
        a = net(x)
        b = layer(x)
        c = model(x)
        d = criterion(a, y)
        e = mse(b, y)
        f = F.cross_entropy(c, y)
        g = F.cross_entropy(x, y)
        h = student(x)
        i = build()(x)
        j = y * 2
)");
  const Model& m = p.model();
  auto value = [&](std::string_view name) { return m.provenance(p.binding(name, std::string(name) + " = ")->value); };
  for (std::string_view v : {"a", "b", "c", "d", "e", "f", "h"}) EXPECT_EQ(value(v), Provenance::Attached) << v;
  EXPECT_EQ(value("g"), Provenance::Unknown);  // x and y come from the loader
  EXPECT_EQ(value("i"), Provenance::Unknown);  // an unknown factory's result
  EXPECT_EQ(value("j"), Provenance::Unknown);
  EXPECT_TRUE(m.is_module_instance(p.node("net", 1)));
  EXPECT_TRUE(m.is_module_instance(p.node("student", 2)));  // student.parameters()
  EXPECT_TRUE(m.is_loss_function(p.node("mse", 1)));
  EXPECT_TRUE(m.is_loss_function(p.node("criterion", 1)));
  EXPECT_FALSE(m.is_loss_function(p.node("net", 1)));
  EXPECT_TRUE(m.is_optimizer(p.node("opt", 0)));
}

TEST(ModelProvenance, DetachingOperations) {
  Program p(R"(import torch


def step(model, x):
    out = model(x)
    values = [
        out.item(),
        out.detach(),
        float(out),
        int(out.sum()),
        out.tolist(),
        out.cpu().numpy(),
        out.data,
        out.argmax(1),
        torch.argmax(out, 1),
        out.shape,
        torch.zeros(3),
        len(out),
    ]
    kept = [
        out.sum(),
        out.mean(),
        out.cpu(),
        out.to("cuda"),
        out[0],
        out * 2 + 1,
        -out,
        torch.relu(out),
        torch.nn.functional.softmax(out, -1),
        out.detach() + out,
        (out, 1),
        {"out": out},
        sum([out, out]),
        out if x else 0,
    ]
)");
  TSNode detached = p.binding("values", "values =")->value;
  uint32_t n = ts_node_named_child_count(detached);
  ASSERT_EQ(n, 12u);
  for (uint32_t i = 0; i < n; ++i) {
    TSNode e = ts_node_named_child(detached, i);
    EXPECT_EQ(p.model().provenance(e), Provenance::Detached) << p.model().text(e);
  }
  TSNode kept = p.binding("kept", "kept =")->value;
  n = ts_node_named_child_count(kept);
  ASSERT_EQ(n, 14u);
  for (uint32_t i = 0; i < n; ++i) {
    TSNode e = ts_node_named_child(kept, i);
    EXPECT_EQ(p.model().provenance(e), Provenance::Attached) << p.model().text(e);
  }
}

TEST(ModelProvenance, AssignmentUnpackingAndHuggingFaceOutputs) {
  Program p(R"(def step(model, batch, criterion):
    outputs = model(**batch)
    loss = outputs.loss
    logits = outputs.logits
    preds = logits.argmax(-1)
    out, aux = model(batch["x"])
    top, index = out.max(1)
    values, order = torch.sort(out)
    first, second = out.item(), out
    inputs, labels = batch["x"], batch["y"]
    return loss, logits, preds, out, aux, top, index, values, order, first, second, inputs, labels
)");
  const Model& m = p.model();
  TSNode list = p.node("loss, logits, preds, out, aux, top, index, values, order, first, second, inputs, labels");
  std::vector<Provenance> want = {Provenance::Attached, Provenance::Attached, Provenance::Detached,
                                  Provenance::Attached, Provenance::Attached, Provenance::Attached,
                                  Provenance::Detached, Provenance::Attached, Provenance::Detached,
                                  Provenance::Detached, Provenance::Attached, Provenance::Unknown,
                                  Provenance::Unknown};
  ASSERT_EQ(ts_node_named_child_count(list), want.size());
  for (uint32_t i = 0; i < want.size(); ++i) {
    TSNode e = ts_node_named_child(list, i);
    EXPECT_EQ(m.provenance(e), want[i]) << m.text(e);
  }
}

TEST(ModelProvenance, GradDisabledValuesAreDetached) {
  Program p(R"(import torch


def evaluate(model, x):
    with torch.no_grad():
        out = model(x)
    kept = out
    return kept, model(x)
)");
  EXPECT_EQ(p.provenance("out", 1), Provenance::Detached);  // bound under no_grad, read outside
  EXPECT_EQ(p.provenance("kept", 1), Provenance::Detached);
  EXPECT_EQ(p.provenance("model(x)", 1), Provenance::Attached);
}

TEST(ModelProvenance, BackwardSubjectsAndContainers) {
  Program p(R"(def train(helper, loader, criterion, model):
    losses = []
    numbers = []
    for x, y in loader:
        loss = helper(x, y)
        loss.backward()
        losses.append(criterion(model(x), y))
        numbers.append(criterion(model(x), y).item())
    mean = sum(losses) / len(losses)
    per_item = [l.item() for l in losses]
    stage = [criterion(model(x), y) for x, y in loader]
    return mean, numbers, per_item, stage, losses
)");
  EXPECT_EQ(p.provenance("loss", 1), Provenance::Attached);  // unknown helper, but backward() is called on it
  EXPECT_EQ(p.provenance("mean", 1), Provenance::Attached);  // the sum of appended attached values
  EXPECT_EQ(p.provenance("numbers", 2), Provenance::Detached);
  EXPECT_EQ(p.provenance("per_item", 1), Provenance::Detached);
  EXPECT_EQ(p.provenance("stage", 1), Provenance::Attached);
  EXPECT_EQ(p.provenance("losses", 5), Provenance::Attached);
}

TEST(ModelProvenance, FunctionSummaries) {
  Program p(R"(def step(model, x, criterion, y):
    loss = criterion(model(x), y)
    return loss


def logged_step(model, x, criterion, y):
    return criterion(model(x), y).item()


def run(model, x, criterion, y):
    a = step(model, x, criterion, y)
    b = logged_step(model, x, criterion, y)
    return a, b
)");
  EXPECT_EQ(p.provenance("a", 1), Provenance::Attached);
  EXPECT_EQ(p.provenance("b", 1), Provenance::Detached);
}

TEST(ModelProvenance, LocalFunctionsAnswerBeforeConventionalNames) {
  Program p(R"(import torch.nn.functional as F


def loss_fn(out, y):
    return F.mse_loss(out, y).item()


def run(model, x, y, criterion):
    a = loss_fn(model(x), y)
    b = criterion(model(x), y)
    return a, b
)");
  EXPECT_EQ(p.provenance("a", 1), Provenance::Detached);  // named like a loss, returns a number
  EXPECT_EQ(p.provenance("b", 1), Provenance::Attached);
}

TEST(ModelProvenance, LossesFromOtherModules) {
  Program p(R"(from losses import FocalLoss, dice_loss


class Trainer(Base):
    def step(self, model, x, y):
        focal = FocalLoss(gamma=2.0)
        a = focal(model(x), y)
        b = dice_loss(model(x), y)
        c = dice_loss(x, y)
        d = self.compute_loss(model(x), y)
        e = self.compute_metric(model(x), y)
        return a, b, c, d, e
)");
  const Model& m = p.model();
  auto value = [&](std::string_view name) { return m.provenance(p.binding(name, std::string(name) + " = ")->value); };
  EXPECT_EQ(value("a"), Provenance::Attached);
  EXPECT_EQ(value("b"), Provenance::Attached);
  EXPECT_EQ(value("c"), Provenance::Unknown);  // named for a loss, but nothing with history goes in
  EXPECT_EQ(value("d"), Provenance::Attached);
  EXPECT_EQ(value("e"), Provenance::Unknown);
  EXPECT_TRUE(m.is_loss_function(p.node("focal", 1)));
}

TEST(ModelProvenance, FrozenModulesPassOnlyTheirInputsHistory) {
  Program p(R"(import torch


def extract(backbone, head, encoder, adapter, loader, criterion):
    backbone.requires_grad_(False)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for p in encoder.parameters():
        p.requires_grad = False
    for name, p in adapter.named_parameters():
        if "bias" not in name:
            p.requires_grad = False
    for x, y in loader:
        a = backbone(x)
        b = head(a)
        c = encoder(x)
        d = adapter(x)
        e = backbone(head(x))
        f = backbone.forward(x)
    return a, b, c, d, e, f
)");
  const Model& m = p.model();
  auto value = [&](std::string_view name) { return m.provenance(p.binding(name, std::string(name) + " = ")->value); };
  EXPECT_EQ(value("a"), Provenance::Unknown);   // frozen, input from the loader
  EXPECT_EQ(value("b"), Provenance::Attached);  // `head` trains
  EXPECT_EQ(value("c"), Provenance::Unknown);   // every parameter frozen
  EXPECT_EQ(value("d"), Provenance::Attached);  // only some parameters frozen
  EXPECT_EQ(value("e"), Provenance::Attached);  // a frozen module passes its input's history on
  EXPECT_EQ(value("f"), Provenance::Unknown);
}

TEST(ModelGrad, SetGradEnabledAsAStatement) {
  Program p(R"(import torch


def export(model, x):
    before = model(x)
    torch.set_grad_enabled(False)
    during = model(x)
    torch.set_grad_enabled(True)
    after = model(x)
    return before, during, after


def other(model, x):
    return model(x)
)");
  EXPECT_EQ(p.grad("before = model"), GradState::Enabled);
  EXPECT_EQ(p.grad("during = model"), GradState::Disabled);
  EXPECT_EQ(p.grad("after = model"), GradState::Enabled);
  EXPECT_EQ(p.grad("return model(x)"), GradState::Enabled);  // the block ended with the function
}

// --------------------------------------------------------------------------
// Import aliases

TEST(ModelImports, QualifyThroughAliases) {
  Program p(R"(import torch as T
import torch.nn
import torch.nn.functional as F
from torch import nn
from torch.nn import functional as G, Linear as L
from torch.optim import AdamW
import numpy as np

a = T.nn.Linear
b = torch.nn.Conv2d
c = F.relu
d = nn.Module
e = G.gelu
f = L
g = AdamW
h = np.random.rand
i = unknown.thing
j = (T.zeros)
)");
  const Model& m = p.model();
  auto q = [&](std::string_view name) { return m.qualify(p.binding(std::string(name), std::string(name) + " = ")->value); };
  EXPECT_EQ(q("a"), "torch.nn.Linear");
  EXPECT_EQ(q("b"), "torch.nn.Conv2d");
  EXPECT_EQ(q("c"), "torch.nn.functional.relu");
  EXPECT_EQ(q("d"), "torch.nn.Module");
  EXPECT_EQ(q("e"), "torch.nn.functional.gelu");
  EXPECT_EQ(q("f"), "torch.nn.Linear");
  EXPECT_EQ(q("g"), "torch.optim.AdamW");
  EXPECT_EQ(q("h"), "numpy.random.rand");
  EXPECT_EQ(q("i"), "unknown.thing");
  EXPECT_EQ(q("j"), "torch.zeros");
  EXPECT_EQ(m.qualify(p.node("T.zeros")), "torch.zeros");
  EXPECT_EQ(m.qualify(p.node("(T.zeros)")), "torch.zeros");
  EXPECT_EQ(m.qualify(p.node("np.random.rand")), "numpy.random.rand");
  EXPECT_EQ(m.resolve_alias("T"), "torch");
  EXPECT_EQ(m.resolve_alias("torch"), "torch");
  EXPECT_EQ(m.resolve_alias("G"), "torch.nn.functional");
  EXPECT_EQ(m.resolve_alias("other"), "other");
  EXPECT_EQ(p.binding("T", "import torch as T")->kind, BindingKind::Import);
}

// Calls `f` for every node under `root`, named or not, in pre-order.
template <class F>
void for_each_node(TSNode root, F&& f) {
  TSTreeCursor cursor = ts_tree_cursor_new(root);
  for (bool done = false; !done;) {
    f(ts_tree_cursor_current_node(&cursor));
    if (ts_tree_cursor_goto_first_child(&cursor)) continue;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        done = true;
        break;
      }
    }
  }
  ts_tree_cursor_delete(&cursor);
}

}  // namespace

// for_each_named_child answers exactly what ts_node_named_child(n, i) does,
// below and above the count where it switches to a cursor, comments and
// anonymous tokens included; push_named_children stacks them to pop in order.
TEST(Syntax, NamedChildrenInSourceOrder) {
  for (int width : {0, 1, 4, 5, 40}) {
    std::string text = "t = [";
    for (int i = 0; i < width; ++i)
      text += (i ? ", " : "") + std::string(i % 3 == 2 ? "# c\n" : "") + "v" + std::to_string(i);
    text += "]\n";
    Program p(text);
    TSNode assignment = ts_node_named_child(ts_node_named_child(p.model().root(), 0), 0);
    TSNode list = field(assignment, "right");
    ASSERT_EQ(kind_of(list), Kind::List) << text;
    std::vector<std::string> expected, seen;
    for (uint32_t i = 0; i < ts_node_named_child_count(list); ++i)
      expected.emplace_back(p.model().text(ts_node_named_child(list, i)));
    for_each_named_child(list, [&](TSNode c) { seen.emplace_back(p.model().text(c)); });
    EXPECT_EQ(seen, expected) << text;
    EXPECT_GE(expected.size(), static_cast<size_t>(width)) << text;
    std::vector<TSNode> work;
    push_named_children(list, work);
    std::vector<std::string> popped;
    while (!work.empty()) {
      popped.emplace_back(p.model().text(work.back()));
      work.pop_back();
    }
    EXPECT_EQ(popped, expected) << text;
  }
}

// References are the names of function bodies: not the attribute of `x.attr`,
// not the keyword of `f(key=...)`, nothing at module level (a function's own
// name belongs to its definition, so it is there).
TEST(ModelReferences, NamesInFunctionBodies) {
  Program p(
      "top = make(size=1)\n"
      "def f(a):\n"
      "    b = a.attr\n"
      "    return g(key=b)\n");
  std::vector<std::string> names;
  for (const Reference& r : p.model().references()) names.emplace_back(p.model().text(r.node));
  EXPECT_EQ(names, (std::vector<std::string>{"f", "a", "b", "a", "g", "b"}));
}

// field() resolves names when compiled, against a list kept by hand: each
// must be one of the grammar's, in the order the list claims, and every
// field of the grammar must be in it.
TEST(Syntax, FieldNamesAreTheGrammars) {
  const TSLanguage* lang = language();
  uint32_t count = ts_language_field_count(lang);
  EXPECT_EQ(kFieldCount, count);
  for (size_t i = 0; i < kFieldCount; ++i) {
    SCOPED_TRACE(std::string(kFieldNames[i]));
    EXPECT_NE(kFieldIds[i], 0);
    EXPECT_EQ(std::string_view(ts_language_field_name_for_id(lang, kFieldIds[i])), kFieldNames[i]);
    if (i > 0) {
      EXPECT_LT(kFieldNames[i - 1], kFieldNames[i]);
    }
  }
  Program p("loss = model(x)\n");
  ASSERT_EQ(p.model().calls().size(), 1u);
  TSNode call = p.model().calls()[0].node;
  EXPECT_EQ(p.model().text(field(call, "function")), "model");
  EXPECT_EQ(p.model().text(field(call, "arguments")), "(x)");
  EXPECT_TRUE(is_null(field(call, "body")));
}

// The model's walk asks ts_node_symbol once per node and reads both the kind
// and the named-ness from tables: for every node of a program that uses
// aliased nodes, keywords, f-strings, a match statement and a syntax error,
// the named-ness table agrees with tree-sitter's own answer.
TEST(Syntax, SymbolTablesAgreeWithTheLibrary) {
  Program p(
      "import torch as T\n"
      "from x import (a, b as c)\n"
      "@T.no_grad()\n"
      "def f(x, *args, y: int = 1, **kw) -> None:\n"
      "    global g\n"
      "    s = f'{x!r:>{y}}'\n"
      "    match x:\n"
      "        case [1, *rest] if rest: pass\n"
      "        case {'k': v}: pass\n"
      "    print(lambda q: q, [i for i in x if i], {k: v for k, v in kw.items()})\n"
      "    return (yield x)\n"
      "class C(B, metaclass=M):\n"
      "    def g(self): x = = 1\n");
  const Model& m = p.model();
  size_t nodes = 0, errors = 0;
  for_each_node(m.root(), [&](TSNode n) {
    ++nodes;
    TSSymbol sym = ts_node_symbol(n);
    SCOPED_TRACE(ts_node_type(n));
    EXPECT_EQ(symbol_is_named(sym), ts_node_is_named(n));
    if (kind_of(n) == Kind::Error) ++errors;
  });
  EXPECT_GT(nodes, 150u);
  EXPECT_GE(errors, 1u);
}

// A dotted name written plainly is qualified from its text; written any other
// way (spaces, a comment, a line break, parentheses inside, a call or a
// subscript in the chain, a constant at its head) the chain is walked. Both
// give the same names.
TEST(ModelAliases, QualifiedFromTheTextOrByWalkingTheChain) {
  Program p(R"(import torch as T
from torch import nn as N2
a = T.nn.Linear
b = T . nn . Linear
c = (T
     .nn  # the layers
     .Linear)
d = (T).nn.Linear
e = T.nn.Linear2d.x_1
f = N2.Module
g = T.load(p).state
h = T.xs[0].y
i = None.x
j = self.enc.rnn
k = É.x
)");
  const Model& m = p.model();
  auto q = [&](std::string_view name) { return m.qualify(p.binding(std::string(name), std::string(name) + " = ")->value); };
  EXPECT_EQ(q("a"), "torch.nn.Linear");
  EXPECT_EQ(q("b"), "torch.nn.Linear");
  EXPECT_EQ(q("c"), "torch.nn.Linear");
  EXPECT_EQ(q("d"), "torch.nn.Linear");
  EXPECT_EQ(q("e"), "torch.nn.Linear2d.x_1");
  EXPECT_EQ(q("f"), "torch.nn.Module");
  EXPECT_EQ(q("g"), "");
  EXPECT_EQ(q("h"), "");
  EXPECT_EQ(q("i"), "");
  EXPECT_EQ(q("j"), "self.enc.rnn");
  EXPECT_EQ(q("k"), "É.x");
}

// The shortcuts to the fields of calls, keyword arguments and attributes give
// what field() gives, for every such node of a program that puts comments,
// line breaks and parentheses where they may go, and has a syntax error.
TEST(Syntax, FieldShortcutsAgreeWithField) {
  Program p(
      "x = (model  # the model\n"
      "     .encoder\n"
      "     # the layer\n"
      "     .rnn)(h,  # state\n"
      "           key=value,  # keyword\n"
      "           other = (a)\n"
      "           .b)\n"
      "y = f(i for i in xs)\n"
      "z = (g)(1)(2).h[0].k(lr=\n"
      "    0.1)\n"
      "w = obj.\n"
      "u = opt(lr=  # the rate\n"
      "        0.1, momentum  # below\n"
      "        = 0.9)\n"
      "v = call(a=)\n");
  const Model& m = p.model();
  size_t calls = 0, keywords = 0, attributes = 0;
  for_each_node(m.root(), [&](TSNode n) {
    SCOPED_TRACE(std::string(m.text(n)));
    switch (kind_of(n)) {
      case Kind::Call:
        ++calls;
        EXPECT_TRUE(ts_node_eq(call_function(n), field(n, "function")));
        EXPECT_TRUE(ts_node_eq(call_arguments(n), field(n, "arguments")));
        break;
      case Kind::KeywordArgument:
        ++keywords;
        EXPECT_TRUE(ts_node_eq(keyword_name(n), field(n, "name")));
        EXPECT_TRUE(ts_node_eq(keyword_value(n), field(n, "value")));
        break;
      case Kind::Attribute:
        ++attributes;
        EXPECT_TRUE(ts_node_eq(attribute_object(n), field(n, "object")));
        EXPECT_TRUE(ts_node_eq(attribute_name(n), field(n, "attribute")));
        break;
      default: break;
    }
  });
  EXPECT_GE(calls, 6u);
  EXPECT_GE(keywords, 3u);
  EXPECT_GE(attributes, 6u);
}

// --------------------------------------------------------------------------
// Calls through the library models: receivers' classes from construction,
// backward passes, optimizer steps, cache releases, grad modes and hooks.

namespace {

const Call* call_at(const Program& p, std::string_view snippet, int nth = 0) {
  uint32_t start = p.at(snippet, nth);
  for (const Call& c : p.model().calls())
    if (start_byte(c.node) == start) return &c;
  ADD_FAILURE() << "no call at `" << snippet << "`";
  return nullptr;
}

std::vector<std::string> subjects(const Program& p, std::string_view snippet) {
  std::vector<std::string> out;
  if (const Call* c = call_at(p, snippet))
    for (TSNode n : p.model().backward_subjects(*c)) out.emplace_back(p.model().text(n));
  return out;
}

}  // namespace

TEST(ModelCalls, StatementsAndTheAssignmentsTheyFeed) {
  Program p(R"(
def f(rnn, x, h, opt):
    out, h = rnn(x, h)
    y = (rnn(x, h))
    opt.step()
    z = [rnn(x, h)]
    print(len(out))
    return out, y, z
)");
  const Model& m = p.model();
  EXPECT_EQ(m.text(call_at(p, "rnn(x, h)", 0)->assignment), "out, h = rnn(x, h)");
  EXPECT_EQ(m.text(call_at(p, "rnn(x, h)", 1)->assignment), "y = (rnn(x, h))");
  EXPECT_TRUE(is_null(call_at(p, "rnn(x, h)", 2)->assignment));  // an element of a list
  EXPECT_TRUE(call_at(p, "opt.step()")->statement);
  EXPECT_TRUE(call_at(p, "print(len(out))")->statement);
  EXPECT_FALSE(call_at(p, "len(out)")->statement);
  EXPECT_FALSE(call_at(p, "rnn(x, h)", 0)->statement);
  EXPECT_TRUE(is_null(call_at(p, "opt.step()")->assignment));
}

TEST(ModelSwitches, OnlyTheConsequenceOfAnIfOnAnOffSwitch) {
  Program p(R"(
class Block:
    def __init__(self):
        self.keep = False

    def forward(self, x, verbose=False):
        if self.keep and x is not None:
            if x.dim() > 1:
                self.saved = x
        elif verbose:
            self.other = x
        else:
            self.third = x
        if verbose:
            self.fourth = x
        self.fifth = x
        return x
)");
  const Model& m = p.model();
  int forward = m.function_at(p.at("self.saved"));
  EXPECT_TRUE(m.switched_off(p.node("self.saved = x"), forward));  // nested under the off switch
  EXPECT_FALSE(m.switched_off(p.node("self.other = x"), forward));  // an elif: not the if's consequence
  EXPECT_FALSE(m.switched_off(p.node("self.third = x"), forward));
  EXPECT_TRUE(m.switched_off(p.node("self.fourth = x"), forward));  // a parameter no call passes
  EXPECT_FALSE(m.switched_off(p.node("self.fifth = x"), forward));
}

TEST(ModelCalls, ReceiversClassesAndBackwardSubjects) {
  Program p(R"(
import torch
from accelerate import Accelerator
from torch.cuda.amp import GradScaler
import lightning.pytorch as pl

def fit(model, loader, opt):
    accelerator = Accelerator()
    scaler = GradScaler()
    for x, y in loader:
        loss = model(x).sum()
        accelerator.backward(loss)
        scaler.scale(loss).backward()
        torch.autograd.backward([loss])
        grads = torch.autograd.grad(loss, model.parameters())
        scaler.step(opt)
        opt.step()
        engine.backward(loss)
        torch.cuda.empty_cache()

class Net(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        loss = self(batch).sum()
        self.manual_backward(loss)
        return loss
)");
  const Model& m = p.model();
  EXPECT_EQ(m.class_of(p.node("accelerator", 1)), "accelerate.Accelerator");
  EXPECT_EQ(m.class_of(p.node("scaler", 1)), "torch.amp.GradScaler");  // through the alias
  EXPECT_EQ(m.class_of(p.node("model", 1)), "");
  EXPECT_EQ(subjects(p, "accelerator.backward(loss)"), (std::vector<std::string>{"loss"}));
  EXPECT_EQ(subjects(p, "scaler.scale(loss).backward()"), (std::vector<std::string>{"scaler.scale(loss)"}));
  EXPECT_EQ(subjects(p, "torch.autograd.backward([loss])"), (std::vector<std::string>{"[loss]"}));
  EXPECT_EQ(subjects(p, "torch.autograd.grad(loss, model.parameters())"), (std::vector<std::string>{"loss"}));
  // A receiver of unknown class with a backward method given a value: the value.
  EXPECT_EQ(subjects(p, "engine.backward(loss)"), (std::vector<std::string>{"loss", "engine"}));
  // `self` of a LightningModule: the model of its base's manual_backward.
  EXPECT_EQ(subjects(p, "self.manual_backward(loss)"), (std::vector<std::string>{"loss"}));
  EXPECT_TRUE(m.accumulates_grads(*call_at(p, "accelerator.backward(loss)")));
  EXPECT_FALSE(m.accumulates_grads(*call_at(p, "torch.autograd.grad(loss, model.parameters())")));
  EXPECT_EQ(m.text(m.stepped_optimizer(*call_at(p, "scaler.step(opt)"))), "opt");
  EXPECT_EQ(m.text(m.stepped_optimizer(*call_at(p, "opt.step()"))), "opt");  // the default: by its name
  EXPECT_TRUE(m.releases_cache(*call_at(p, "torch.cuda.empty_cache()")));
  EXPECT_FALSE(m.releases_cache(*call_at(p, "opt.step()")));
}

TEST(ModelCalls, AReceiverOfUnknownClassCallsTheOnlyDefinitionOfTheMethod) {
  Program p(R"(
class Tracker:
    def collect(self, outputs):
        self.outputs.append(outputs)

class Logger:
    def write(self, record):
        pass

class Console:
    def write(self, record):
        print(record)

def train(tracker, logger, stats):
    tracker.collect(1)
    logger.write(2)
    stats = {}
    stats.update(3)
)");
  const Model& m = p.model();
  auto sites = [&](std::string_view cls, std::string_view method) {
    const Class* c = m.find_class(cls);
    const Function* f = m.find_method(static_cast<int>(c - m.classes().data()), method);
    return m.call_sites(*f).size();
  };
  EXPECT_EQ(sites("Tracker", "collect"), 1u);  // the only `collect` of the file
  EXPECT_EQ(sites("Logger", "write"), 0u);     // two classes define `write`
  EXPECT_EQ(sites("Console", "write"), 0u);
}

TEST(ModelCalls, AModuleReachedThroughGetattrWithAConstantName) {
  Program p(R"(
import torch as T
KIND = "cuda"
acc = getattr(T, KIND)
direct = getattr(T.backends, "cudnn")
twice = getattr(T, "cuda")
twice = getattr(T, "xpu")
def f(kind):
    local = getattr(T, kind)
    acc.empty_cache()
    direct.benchmark
    twice.empty_cache()
    local.empty_cache()
)");
  const Model& m = p.model();
  EXPECT_EQ(m.qualify(p.node("acc.empty_cache", 0)), "torch.cuda.empty_cache");
  EXPECT_EQ(m.qualify(p.node("direct.benchmark")), "torch.backends.cudnn.benchmark");
  EXPECT_EQ(m.qualify(p.node("twice.empty_cache")), "twice.empty_cache");  // bound twice
  EXPECT_EQ(m.qualify(p.node("local.empty_cache")), "local.empty_cache");  // not a constant, not module level
  std::vector<std::string> callees;
  for (const Call& c : m.calls()) callees.push_back(c.callee);
  EXPECT_NE(std::find(callees.begin(), callees.end(), "torch.cuda.empty_cache"), callees.end());
}

namespace {
// The index of the first function of the file named `name`, or -1.
int function_named(const Model& m, std::string_view name) {
  for (size_t i = 0; i < m.functions().size(); ++i)
    if (m.functions()[i].name == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

TEST(ModelCalls, ForwardHooksRunAtTheCallsOfTheirModule) {
  Program p(R"(
import functools
import torch

def add_hooks(net, store):
    def make(name):
        def hook(module, inputs, output):
            store[name].append(output)
        return hook
    for name, sub in net.named_modules():
        sub.register_forward_hook(make(name))

def partial_hook(tag, module, inputs, output):
    pass

def lost_hook(module, inputs, output):
    pass

def run(model, loader, handed_in):
    model.cuda()
    store = {}
    add_hooks(model, store)
    model.layer4.register_forward_hook(functools.partial(partial_hook, "l4"))
    handed_in.register_forward_hook(lost_hook)
    with torch.no_grad():
        for x in loader:
            model(x.cuda())
)");
  const Model& m = p.model();
  auto index = [&](std::string_view name) { return function_named(m, name); };
  const Call& model_call = *std::find_if(m.calls().begin(), m.calls().end(), [&](const Call& c) {
    return m.text(c.func) == "model";
  });
  // Through the maker, the loop over named_modules() and add_hooks' parameter.
  int hook = index("hook");
  ASSERT_EQ(m.hook_sites(hook).size(), 1u);
  EXPECT_EQ(m.hook_sites(hook)[0].call, &model_call);
  EXPECT_EQ(m.hook_sites(hook)[0].runs, ModuleHookRuns::Forward);
  ASSERT_EQ(m.hook_sites(index("partial_hook")).size(), 1u);
  // A module whose calls are not followed: a site without a call.
  ASSERT_EQ(m.hook_sites(index("lost_hook")).size(), 1u);
  EXPECT_EQ(m.hook_sites(index("lost_hook"))[0].call, nullptr);
  EXPECT_TRUE(m.hook_sites(index("run")).empty());
  // The hook runs under the mode of the model's call; its output is that call's value.
  TSNode store = p.node("store[name].append");
  EXPECT_EQ(m.grad_state(start_byte(store)), GradState::Disabled);
  EXPECT_EQ(m.grad_state(start_byte(p.node("pass", 1))), GradState::Enabled);  // lost_hook: may run anywhere
  EXPECT_EQ(m.value(p.node("output", 1)).device, Device::Accelerator);
  // `store`, a parameter of add_hooks, is the caller's `store` where the model runs.
  EXPECT_EQ(m.name_in_caller("store", hook, index("run")), "store");
  EXPECT_EQ(m.name_in_caller("output", hook, index("run")), "");  // the hook's own
  EXPECT_TRUE(m.runs_per_step(hook));  // once per batch of the loop over data
  EXPECT_FALSE(m.runs_per_step(index("make")));
}

TEST(ModelCalls, AHookRunsOnlyWhileRegistered) {
  Program p(R"(
import functools

def helper_hooks(net, hook):
    return [m.register_forward_hook(hook) for m in net.children()]

def once(module, inputs, output):
    pass

def kept(module, inputs, output):
    pass

def through_helper(module, inputs, output):
    pass

def tagged(tag, module, inputs, output):
    return tag, output

def late(module, inputs, output):
    pass

def run(model, loader, probe):
    model.cuda()
    before = model(probe)
    h = model.fc.register_forward_hook(once)
    first = model(probe)
    h.remove()
    handles = helper_hooks(model, through_helper)
    second = model(probe)
    for handle in handles:
        handle.remove()
    k = model.fc.register_forward_hook(kept)
    model.fc.register_forward_hook(functools.partial(tagged, "fc"))
    for x in loader:
        last = model(x)
    k.remove()
    model.fc.register_forward_hook(late)
)");
  const Model& m = p.model();
  auto index = [&](std::string_view name) { return function_named(m, name); };
  auto sites = [&](std::string_view hook) {
    std::vector<std::string> out;
    for (const Model::HookSite& s : m.hook_sites(index(hook)))
      out.push_back(s.call ? std::string(m.text(ts_node_parent(s.call->node))) : "?");
    return out;
  };
  EXPECT_EQ(sites("once"), (std::vector<std::string>{"first = model(probe)"}));
  EXPECT_EQ(sites("through_helper"), (std::vector<std::string>{"second = model(probe)"}));
  EXPECT_EQ(sites("kept"), (std::vector<std::string>{"last = model(x)"}));
  // Never removed: every call after the registration.
  EXPECT_EQ(sites("tagged"), (std::vector<std::string>{"last = model(x)"}));
  // Registered after the last call: no call runs it.
  EXPECT_TRUE(sites("late").empty());
  // The partial binds the tag first: the module's output is the fourth parameter.
  ASSERT_EQ(m.hook_sites(index("tagged")).size(), 1u);
  EXPECT_EQ(m.hook_sites(index("tagged"))[0].bound, 1u);
  EXPECT_EQ(m.value(p.node("output", 4)).device, Device::Accelerator);
  EXPECT_EQ(m.value(p.node("tag", 1)).device, Device::Unknown);
}

TEST(ModelCalls, AHooksModuleLevelNameIsNotTheCallersOwnOfTheSameName) {
  Program p(R"(
feats = []

def hook(module, inputs, output):
    feats.append(output)

def shadowing(model, loader):
    feats = []
    model.register_forward_hook(hook)
    for x in loader:
        model(x)

def plain(model, loader):
    model.register_forward_hook(hook)
    for x in loader:
        model(x)
)");
  const Model& m = p.model();
  auto index = [&](std::string_view name) { return function_named(m, name); };
  EXPECT_EQ(m.name_in_caller("feats", index("hook"), index("plain")), "feats");
  EXPECT_EQ(m.name_in_caller("feats", index("hook"), index("shadowing")), "");
}

TEST(ModelCalls, HooksAndGradModesFromTheModels) {
  Program p(R"(
import contextlib
import torch
import pytorch_lightning as pl

class Base(pl.LightningModule):
    pass

class Classifier(Base):
    def validation_step(self, batch, batch_idx):
        logits = self(batch)
        return logits

    def training_step(self, batch, batch_idx):
        return self(batch).sum()

class Plain:
    def validation_step(self, batch):
        return batch

def evaluate(model, loader):
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.inference_mode())
        for x in loader:
            out = model(x)
    after = model(x)
)");
  const Model& m = p.model();
  int validation = p.function_at("logits = self(batch)");
  ASSERT_NE(m.functions()[validation].hook, nullptr);  // through the in-file base
  EXPECT_EQ(m.functions()[validation].hook->role, HookRole::EvaluationStep);
  EXPECT_EQ(p.grad("logits = self(batch)"), GradState::Disabled);
  EXPECT_EQ(m.functions()[p.function_at("return self(batch).sum()")].hook->role, HookRole::TrainingStep);
  EXPECT_EQ(p.grad("return self(batch).sum()"), GradState::Enabled);
  EXPECT_EQ(m.functions()[p.function_at("return batch")].hook, nullptr);  // not a LightningModule
  EXPECT_EQ(p.grad("out = model(x)"), GradState::Disabled);  // entered on the ExitStack
  EXPECT_EQ(p.grad("after = model(x)"), GradState::Enabled);  // the stack's block has ended
}

TEST(ModelCalls, AUsersModelFileDescribesAnInHouseWrapper) {
  auto models = std::make_shared<LibraryModels>(*LibraryModels::builtin());
  models->load(R"(
[[classes]]
names = ["corp.Engine"]
kind = "other"

[[calls]]
names = ["corp.Engine.backward_and_step"]
effects = { backward = "arg0|loss", step = "arg1|optimizer" }

[[calls]]
names = ["corp.quiet"]
grad-mode = "disabled"
)", "corp.toml");
  Config config;
  config.models = models;
  Program p(R"(
from corp import Engine, quiet

def fit(model, loader, opt):
    engine = Engine()
    for x in loader:
        engine.backward_and_step(model(x).sum(), opt)
    with quiet():
        probe = model(x)
)", config);
  EXPECT_EQ(subjects(p, "engine.backward_and_step(model(x).sum(), opt)"),
            (std::vector<std::string>{"model(x).sum()"}));
  EXPECT_EQ(p.model().text(p.model().stepped_optimizer(*call_at(p, "engine.backward_and_step(model(x).sum(), opt)"))),
            "opt");
  EXPECT_EQ(p.grad("probe = model(x)"), GradState::Disabled);
}

// --------------------------------------------------------------------------
// Values: facets, structure, summaries, parameters, grad mode at entry

TEST(ModelValue, DeviceFromMovesFactoriesAndTheMachineTest) {
  Program p(R"(
import torch
device = "cuda" if torch.cuda.is_available() else "cpu"

def f(x, net):
    a = x.to(device)
    b = a.cpu()
    c = torch.zeros(3)
    d = torch.zeros(3, device="cuda")
    e = a + c
    s = a.sum()
    n = a.item()
    g = x.to(torch.float16)
    return a, b, c, d, e, s, n, g
)");
  EXPECT_EQ(p.last("a").device, Device::Accelerator);
  EXPECT_EQ(p.last("b").device, Device::Host);
  EXPECT_EQ(p.last("c").device, Device::Host);
  EXPECT_EQ(p.last("c").kind, ValueKind::Tensor);
  EXPECT_EQ(p.last("d").device, Device::Accelerator);
  EXPECT_EQ(p.last("e").device, Device::Accelerator);
  EXPECT_TRUE(p.last("s").scalar);
  EXPECT_EQ(p.last("s").device, Device::Accelerator);
  EXPECT_EQ(p.last("n").kind, ValueKind::Number);
  EXPECT_EQ(p.last("n").device, Device::Host);
  EXPECT_EQ(p.last("g").device, Device::Unknown);  // a dtype, not a device
}

TEST(ModelValue, FieldsElementsAndInPlaceStores) {
  Program p(R"(
import torch

def f(batch, loader):
    loader = torch.utils.data.DataLoader(batch)
    out = {"loss": torch.zeros(1).cuda(), "ids": [1, 2]}
    loss = out["loss"]
    ids = out["ids"]
    for k, v in out.items():
        pass
    for x in loader:
        for name in x.keys():
            x[name] = x[name].to("cuda")
        kept = x
    pair = (torch.ones(2), torch.ones(2).cuda())
    first, second = pair
    parts = [t.cuda() for t in batch]
    return loss, ids, v, kept, first, second, parts
)");
  EXPECT_EQ(p.last("loss").device, Device::Accelerator);
  EXPECT_EQ(p.last("ids").kind, ValueKind::Container);
  EXPECT_FALSE(p.last("ids").on_accelerator());
  EXPECT_TRUE(p.last("v").on_accelerator());  // some value of the dict is
  EXPECT_TRUE(p.last("kept").on_accelerator());  // x's entries were moved in place
  EXPECT_FALSE(p.value("x", 1).on_accelerator());  // before the loop body moves its entries
  EXPECT_EQ(p.last("first").device, Device::Host);
  EXPECT_EQ(p.last("second").device, Device::Accelerator);
  EXPECT_EQ(p.last("parts").element().device, Device::Accelerator);
}

TEST(ModelValue, ContainerBuiltinOverAGeneratorArgument) {
  // `tuple(h.detach() for h in hs)`: the generator is the call's whole argument list.
  Program p(R"(
import torch

def f(model, x):
    hs = model(x)
    kept = tuple(h.detach() for h in hs)
    joined = list(h * 2 for h in hs)
    listed = list([h.detach() for h in hs])
    return kept, joined, listed
)");
  EXPECT_EQ(p.last("kept").kind, ValueKind::Container);
  EXPECT_EQ(p.last("kept").element().grad, Provenance::Detached);
  EXPECT_NE(p.last("joined").element().grad, Provenance::Detached);
  EXPECT_EQ(p.last("listed").element().grad, Provenance::Detached);
  EXPECT_TRUE(p.last("kept").without_history());  // a container of detached tensors
  EXPECT_FALSE(p.last("joined").without_history());
  EXPECT_FALSE(p.last("hs").without_history());
}

TEST(ModelValue, IsinstanceGuardedReturnsFollowTheArgument) {
  Program p(R"(
import torch
import torch.nn.functional as F

def to_host(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    return x

def detach_all(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach()
    if isinstance(obj, dict):
        return {k: detach_all(v) for k, v in obj.items()}
    return obj

def f(model, x, y, other):
    loss = F.mse_loss(model(x), y)
    log = {"loss": loss}
    a = to_host(loss)
    b = to_host(log)
    c = to_host(other)
    d = detach_all(log)
    return a, b, c, d
)");
  EXPECT_EQ(p.last("a").grad, Provenance::Detached);  // only the tensor branch runs
  EXPECT_EQ(p.last("a").device, Device::Host);
  EXPECT_EQ(p.last("b").field("loss").grad, Provenance::Attached);  // a dict passes through as it is
  EXPECT_EQ(p.last("c").grad, Provenance::Unknown);  // which branch runs is not known
  EXPECT_NE(p.last("d").field("loss").grad, Provenance::Attached);  // the dict branch, not the pass-through
}

TEST(ModelValue, ModuleContainersYieldModules) {
  Program p(R"(
import torch.nn as nn

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 1)})
        self.params = nn.ParameterList([])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        for key in self.heads:
            pass
        for name, head in self.heads.items():
            y = head(x)
        for child in self.children():
            pass
        for p in self.params:
            pass
        return block, key, name, head, child, p
)");
  EXPECT_EQ(p.last("block").kind, ValueKind::Module);
  EXPECT_NE(p.last("key").kind, ValueKind::Module);  // iterating a ModuleDict yields its keys
  EXPECT_EQ(p.last("name").kind, ValueKind::Other);
  EXPECT_EQ(p.last("head").kind, ValueKind::Module);
  EXPECT_EQ(p.last("child").kind, ValueKind::Module);
  EXPECT_NE(p.last("p").kind, ValueKind::Module);  // a ParameterList holds parameters
}

TEST(ModelValue, TrainableParametersFromConstructionNotNames) {
  Program p(R"(
import torch
import torch.nn as nn

class Lookup(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(table)
        self.register_buffer("scale", torch.ones(1))
        self.size = self.embedding.weight.numel()
        self.act = nn.ReLU()

class Tuned(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(table, freeze=False)

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(1))

class Holder(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.lookup = Lookup(table)
        self.proj = nn.Linear(4, 4)

class Frozen(Lookup):
    def __init__(self, table):
        super().__init__(table)
        self.pool = nn.AdaptiveAvgPool1d(1)

class Given(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

class Buffered(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1), requires_grad=False)
)");
  const Model& m = p.model();
  auto of = [&](std::string_view name) {
    const Class* c = m.find_class(name);
    return c ? m.trainable_parameters(static_cast<int>(c - m.classes().data())) : Truth::Unknown;
  };
  EXPECT_EQ(of("Lookup"), Truth::False);  // frozen by default, a buffer, a number, a parameterless layer
  EXPECT_EQ(of("Tuned"), Truth::True);    // freeze=False
  EXPECT_EQ(of("Scaled"), Truth::True);
  EXPECT_EQ(of("Holder"), Truth::True);
  EXPECT_EQ(of("Frozen"), Truth::False);  // through its base
  EXPECT_EQ(of("Given"), Truth::Unknown);  // whatever it is handed
  EXPECT_EQ(of("Buffered"), Truth::False);
}

TEST(ModelValue, LibraryOutputFieldsAndPositions) {
  Program p(R"(
from transformers import TransfoXLLMHeadModel

def run(config, tokens):
    model = TransfoXLLMHeadModel(config)
    out = model(input_ids=tokens, mems=None)
    output = model(input_ids=tokens, return_dict=False)
    mems = out.mems
    scores = out.prediction_scores
    kept = output[1]
    first = output[0]
    return mems, scores, kept, first
)");
  EXPECT_EQ(p.last("mems").grad, Provenance::Detached);
  EXPECT_EQ(p.last("kept").grad, Provenance::Detached);
  EXPECT_EQ(p.last("scores").grad, Provenance::Attached);
  EXPECT_EQ(p.last("first").grad, Provenance::Attached);
}

TEST(ModelValue, SummariesFollowArgumentsThroughHelpersAndMethods) {
  Program p(R"(
import torch

def to_device(batch, device):
    return {k: v.to(device) for k, v in batch.items()}

class Runner:
    def step(self, model, inputs):
        inputs = to_device(inputs, "cuda")
        with torch.no_grad():
            outputs = model(**inputs)
        return outputs.loss.item(), outputs.logits, inputs.get("labels")

    def loop(self, model, loader):
        model.eval()
        for inputs in loader:
            loss, logits, labels = self.step(model, inputs)
            host = to_device(inputs, "cpu")
            return loss, logits, labels, host
)");
  EXPECT_EQ(p.last("loss").kind, ValueKind::Number);
  EXPECT_EQ(p.last("logits").device, Device::Accelerator);
  EXPECT_EQ(p.last("logits").grad, Provenance::Detached);  // computed under the callee's no_grad
  EXPECT_TRUE(p.last("labels").on_accelerator());
  EXPECT_FALSE(p.last("host").on_accelerator());  // the same helper, called with "cpu"
}

TEST(ModelValue, IsinstanceAndAnnotationsNarrowToAClassWhosePropertiesAreEvaluated) {
  Program p(R"(
import torch

class Sparse:
    def __init__(self, features, indices):
        self.features = features
        self.indices = indices

    @property
    def density(self):
        return self.indices.shape[0] / 1000

def by_assert(x):
    assert isinstance(x, Sparse)
    asserted = x.density
    return asserted

def by_branch(x, other):
    if other and isinstance(x, Sparse):
        branched = x.density
        return branched
    unknown = x.density
    return unknown

def by_annotation(x: Sparse):
    annotated = x.density
    return annotated

def rebound_after_assert(x, y):
    assert isinstance(x, Sparse)
    x = y
    rebound = x.density
    return rebound
)");
  // The getter computes from shapes: no history.
  EXPECT_EQ(p.last("asserted").grad, Provenance::Detached);
  EXPECT_EQ(p.last("branched").grad, Provenance::Detached);
  EXPECT_EQ(p.last("annotated").grad, Provenance::Detached);
  EXPECT_NE(p.last("unknown").grad, Provenance::Detached);  // outside the branch nothing is known
  EXPECT_NE(p.last("rebound").grad, Provenance::Detached);  // the assert was about the previous value
}

TEST(ModelValue, ModulesFromConstructionAndMovesAndParametersFromCallSites) {
  Program p(R"(
import torch
from torch import nn

class Net(nn.Module):
    def forward(self, x):
        return x

def evaluate(net, loader):
    for x in loader:
        y = net(x)
        return y

def main(loader):
    m = Net()
    m.to("cuda")
    evaluate(m, loader)
    plain = Net()
    return plain
)");
  EXPECT_EQ(p.last("m").kind, ValueKind::Module);
  EXPECT_EQ(p.value("m", 2).device, Device::Accelerator);  // moved in place
  EXPECT_EQ(p.last("net").kind, ValueKind::Module);    // the argument at its one call site
  EXPECT_EQ(p.last("y").device, Device::Accelerator);  // the output of a module on the device
  EXPECT_EQ(p.last("plain").device, Device::Host);
}

TEST(ModelValue, HookBatchesArriveOnTheModulesDevice) {
  Program p(R"(
import lightning.pytorch as pl

class Classifier(pl.LightningModule):
    def validation_step(self, batch, batch_idx):
        images, targets = batch
        return images
)");
  EXPECT_EQ(p.last("batch").device, Device::Accelerator);
  EXPECT_EQ(p.last("images").device, Device::Accelerator);
  EXPECT_EQ(p.value("batch_idx", 0).device, Device::Unknown);
}

TEST(ModelValue, NestedForTargetsTakeTheirPartOfTheBatch) {
  Program p(R"(
def train(model, loader, device):
    for step, (inputs, labels) in enumerate(loader):
        x = inputs.to(device)
        y = labels
)");
  EXPECT_EQ(p.value("labels", 1).grad, Provenance::Detached);
  EXPECT_EQ(p.value("labels", 1).device, Device::Host);
  EXPECT_EQ(p.value("inputs", 1).grad, Provenance::Detached);
}

TEST(ModelValue, AnnotatedNumbersAndImportedHelpersGivenOnlyNumbers) {
  Program p(R"(
from .embeddings import rotary_table, project

def build(dim: int, theta: Optional[float], x):
    a = rotary_table(dim, 1024, theta, use_real=False)
    b = rotary_table(dim, x)
    c = project(x.cuda())
    return a, b, c
)");
  EXPECT_EQ(p.value("dim", 1).kind, ValueKind::Number);
  EXPECT_EQ(p.value("theta", 1).grad, Provenance::Detached);
  EXPECT_EQ(p.last("a").grad, Provenance::Detached);
  EXPECT_NE(p.last("b").grad, Provenance::Detached);  // x may be a tensor with history
  EXPECT_NE(p.last("c").grad, Provenance::Detached);
}

TEST(ModelValue, AnIteratorOverBatchesIsNotABatch) {
  Program p(R"(
import lightning.pytorch as pl

class Recorder(pl.LightningModule):
    def validation_step(self, dataloader_iter):
        batch = next(dataloader_iter)
        return batch
)");
  EXPECT_EQ(p.last("batch").device, Device::Unknown);
}

TEST(ModelValue, CopiesAndMovesKeepOneElement) {
  Program p(R"(
def f(x):
    a = x.cuda()
    s = (a - 1).abs().sum()
    d = s.detach()
    m = s.to("cuda")
    c = s.clone()
    r = s.reshape(1, 1)
    v = a.detach()
    return s, d, m, c, r, v
)");
  EXPECT_TRUE(p.last("s").scalar);
  EXPECT_TRUE(p.last("d").scalar);
  EXPECT_EQ(p.last("d").device, Device::Accelerator);
  EXPECT_TRUE(p.last("m").scalar);
  EXPECT_TRUE(p.last("c").scalar);
  EXPECT_FALSE(p.last("r").scalar);  // an unknown method: the shape is not known
  EXPECT_FALSE(p.last("v").scalar);
  EXPECT_TRUE(p.last("v").holds_device_tensors());
  EXPECT_FALSE(p.last("d").holds_device_tensors());
}

TEST(ModelGrad, EntryModeIsTheMeetOverCallSites) {
  Program p(R"(
import torch

def score(model, x):
    out = model(x)
    return out

def train_only(model, x):
    return model(x)

def callback(x):
    return x * 2

def main(model, x):
    with torch.no_grad():
        score(model, x)
        train_only(model, x)
        callback(x)
    train_only(model, x)
    register(callback)
)");
  EXPECT_EQ(p.grad("out = model(x)"), GradState::Disabled);
  EXPECT_EQ(p.grad("return model(x)"), GradState::Enabled);  // one call site runs with grad
  EXPECT_EQ(p.grad("return x * 2"), GradState::Enabled);     // also passed as a callback
}
