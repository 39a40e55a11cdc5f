// The Python semantic model: built once per file from the tree-sitter tree in
// a single iterative walk, then queried by every check. It knows imports,
// functions, classes, loops, grad-disabled regions, bindings and calls, and
// answers which values carry autograd history. It knows nothing of rules.
#pragma once

#include <tree_sitter/api.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/config.h"
#include "core/diagnostic.h"
#include "core/vocabulary.h"
#include "python/syntax.h"

namespace torchleak::python {

// Provenance, Device and GradState are the shared vocabulary
// (core/vocabulary.h) the C++ checks use too.
using torchleak::Device;
using torchleak::GradState;
using torchleak::Provenance;
Provenance join(Provenance a, Provenance b);

struct ValueParts;
class Model;

// A condition's value where the engine can tell: an isinstance test of a
// parameter given the argument's value.
enum class Truth : uint8_t { False, True, Unknown };

// The abstract value of an expression, computed by one engine
// (Model::value): facets for autograd history, device and kind, and, where
// the code shows it, the value's structure: the positions of a tuple (a tuple
// display, a function's tuple return), the fields of a dict or model output
// (`out["loss"]`, `out.logits`) and a summary of a container's elements.
struct Value {
  Provenance grad = Provenance::Unknown;
  Device device = Device::Unknown;
  ValueKind kind = ValueKind::Unknown;
  bool scalar = false;  // one element (`.item()`, a full reduction `.sum()`)
  int cls = -1;         // an instance of this class of the file (`meter = Average()`)
  // The model of the file defining `cls` when it is another file of the
  // project (an imported class); null for a class of the file asking.
  const Model* home = nullptr;
  std::shared_ptr<const ValueParts> parts;

  // The same value as an instance of class `index` of `model` (null: the file asking).
  Value with_class(int index, const Model* model) const {
    Value out = *this;
    out.cls = index;
    out.home = model;
    return out;
  }
  // Whether the value, or something it holds, is on an accelerator.
  bool on_accelerator() const;
  // The same, counting only tensors of more than one element: a loss or a
  // full reduction per batch keeps device memory small.
  bool holds_device_tensors() const;
  // Whether the value carries no autograd history: detached, or a container
  // every known part of which carries none (`tuple(h.detach() for h in hs)`).
  bool without_history() const;
  // What a position, a field, or any element holds; Unknown when not known.
  Value item(size_t index) const;
  Value field(std::string_view name) const;
  Value element() const;
};

struct ValueParts {
  std::vector<Value> items;                            // positions
  std::vector<std::pair<std::string, Value>> fields;  // string keys and attributes
  std::optional<Value> element;                       // the join of every element
};

// A key for a node of one tree: its range and symbol (the caches of provenance and values).
uint64_t node_key(TSNode n);
// Whether a qualified callee builds a torch optimizer (`torch.optim.AdamW`),
// not a learning-rate scheduler.
bool is_torch_optimizer_class(std::string_view qualified);
// Whether a tensor method or torch function of this name returns (values, indices)
// when given a dim: `out.max(1)`, `torch.topk(x, k)`.
bool returns_values_and_indices(std::string_view name);

// The join of two values that may reach the same place (branches, call sites).
Value join(const Value& a, const Value& b);
Device join(Device a, Device b);

struct Function {
  TSNode node{};  // function_definition
  TSNode body{};
  std::string name;
  std::string qualified_name;  // "Trainer.fit", "train", "train.<locals>.step"
  int cls = -1;                // the class whose body defines it directly
  int parent = -1;             // the enclosing function
  std::vector<std::string> params;
  std::vector<std::string> decorators;  // qualified: "torch.no_grad"
  // The framework hook it overrides (Lightning's validation_step, ...), from
  // the library models and the class's bases; null for none.
  const HookModel* hook = nullptr;
};

struct Class {
  TSNode node{};
  std::string name;
  std::vector<std::string> bases;       // qualified where an import resolves them
  std::vector<std::string> decorators;  // qualified: "mmcv.runner.HOOKS.register_module"
  int function = -1;                    // enclosing function, -1 at module level
  std::vector<int> methods;
};

enum class LoopKind : uint8_t { For, While, Comprehension };

struct Loop {
  TSNode node{};
  // Bytes executed once per iteration: the target and body of a for loop, the
  // condition and body of a while loop, a whole comprehension.
  uint32_t start = 0;
  uint32_t end = 0;
  LoopKind kind = LoopKind::For;
  int function = -1;
  int parent = -1;  // the enclosing loop in the same function
};

enum class BindingKind : uint8_t {
  Assign,          // x = value (also each name of a tuple target)
  AugAssign,       // x += value
  SubscriptStore,  // container[k] = value; `name` is the container
  ForTarget,       // for x in ...
  WithTarget,      // with ... as x
  NamedExpr,       // (x := value)
  Parameter,
  Import,
  Global,          // global x / nonlocal x: the name lives outside the function
};

struct Binding {
  std::string name;  // "x", "self.cache"
  BindingKind kind = BindingKind::Assign;
  TSNode statement{};  // the assignment, augmented assignment, for statement, ...
  TSNode target{};     // the target expression
  TSNode value{};      // the right-hand side, when there is one
  int element = -1;    // position in a tuple target, -1 for a plain target
  int inner = -1;      // position in a nested tuple of a for target: `for i, (x, y) in ...`
  std::string op;      // operator of an augmented assignment: "+="
  int function = -1;
  int loop = -1;       // innermost loop in the same function
  uint32_t start = 0;  // statement range
  uint32_t end = 0;
};

// A name read or written in a function body (every identifier node there but
// the attribute of `x.attr` and the keyword of `f(key=...)`), with
// the ancestors rules ask about: `self.rng.random()` gives the identifier
// `self` with parent the attribute `self.rng`, grandparent `self.rng.random`
// and great-grandparent the call. In source order.
struct Reference {
  TSNode node{};
  TSNode parent{}, grandparent{}, great_grandparent{};
  int function = -1;  // innermost function holding it
};

struct Call {
  TSNode node{};
  TSNode func{};
  TSNode args{};
  std::string callee;  // qualified dotted name: "torch.nn.DataParallel", "self.encoder"
  std::string method;  // last component when func is an attribute: "append"
  TSNode receiver{};   // the object of an attribute callee
  int function = -1;
  int loop = -1;
  bool statement = false;  // the whole of an expression statement: its value is not used
  TSNode assignment{};     // the assignment whose right side is the call (`h = rnn(x, h)`), else null
};

// The last component of what a call calls: `opt.zero_grad()` -> "zero_grad",
// `torch.cuda.empty_cache()` -> "empty_cache".
inline std::string_view call_name(const Call& c) {
  if (!c.method.empty()) return c.method;
  std::string_view callee = c.callee;
  size_t dot = callee.rfind('.');
  return dot == std::string_view::npos ? callee : callee.substr(dot + 1);
}

// An `if` statement: where it starts, the byte range of its consequence
// (the block that runs when the condition holds) and its condition.
struct Conditional {
  uint32_t start = 0;
  uint32_t consequence_start = 0;
  uint32_t consequence_end = 0;
  TSNode condition{};
};

struct Region {
  uint32_t start = 0;
  uint32_t end = 0;
  GradState state = GradState::Disabled;
};

enum class ModuleAnswer : uint8_t { No, Yes, Unknown };

// Whether a qualified base-class name is a known nn.Module class: torch.nn.Module
// and the torch.nn layers and containers, torch.jit.ScriptModule, Lightning's
// LightningModule, transformers' PreTrainedModel, torchvision's models, and
// the config's extra_models.
bool is_module_base(std::string_view qualified, const Config& config);

// Hashing that accepts a string_view: sets and maps of names looked up by a
// name in the source text need no temporary std::string.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using NameSet = std::unordered_set<std::string, NameHash, std::equal_to<>>;
template <class V>
using NameMap = std::unordered_map<std::string, V, NameHash, std::equal_to<>>;

// The values of the `return <expr>` statements directly in `f` (not in the
// functions, classes or lambdas nested in it), in source order.
std::vector<TSNode> returned_values(const Function& f);

// A module-level definition in another file of the project (python/project.h):
// a function, a class, or a name bound by assignment.
struct ForeignDefinition {
  const Model* model = nullptr;
  const Function* function = nullptr;
  int cls = -1;
  const Binding* binding = nullptr;
};

class Model {
 public:
  // Parses `text` and builds the model. The tree lives as long as the model.
  // `path` is the file's path, from which its imports of the project's other
  // files are found; `resolves_imports` is false for a model built to answer
  // another file's analysis (python/project.h), which follows no imports of
  // its own, so that every answer depends on two files at most.
  Model(std::string_view text, const Config& config, std::string path = {}, bool resolves_imports = true);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  TSNode root() const;
  const SourceText& source() const { return source_; }
  const Config& config() const { return config_; }
  bool has_syntax_errors() const;
  // Position (1-based line) of the first syntax error, 0 when none.
  uint32_t first_error_line() const;

  const std::vector<Function>& functions() const { return functions_; }
  const std::vector<Class>& classes() const { return classes_; }
  const std::vector<Loop>& loops() const { return loops_; }
  const std::vector<Binding>& bindings() const { return bindings_; }
  const std::vector<Call>& calls() const { return calls_; }
  // The calls that start in [start, end), in source order (the table is in
  // source order: a binary search, not a scan of the file's calls).
  std::span<const Call> calls_in(uint32_t start, uint32_t end) const;
  const std::vector<TSNode>& comments() const { return comments_; }  // in source order
  const std::vector<Reference>& references() const { return references_; }  // in source order

  // --- names ---
  std::string_view text(TSNode n) const { return source_.of(n); }
  Position position(TSNode n) const;
  // The qualified dotted name of a name or attribute chain, with import
  // aliases resolved ("T.nn.Linear" -> "torch.nn.Linear"); "" for anything else.
  std::string qualify(TSNode n) const;
  // The qualified name an import binds `local` to, or `local` itself.
  std::string resolve_alias(std::string_view local) const;
  const std::string& path() const { return path_; }
  // What a name or attribute chain whose head an import binds (`helper`,
  // `utils.helper`, `cfg.HIDDEN`) names in another file of the project,
  // through re-exports (`from .model import Net` in a package's __init__.py);
  // nullopt for anything else or a file that cannot be found.
  std::optional<ForeignDefinition> foreign_definition(TSNode expr) const;
  // The same for the name `local` that an import statement binds.
  std::optional<ForeignDefinition> foreign_import(std::string_view local) const;
  // What foreign_definition answers, also asked of a model built for
  // another file's analysis: for a rule that follows a chain of files one
  // import at a time (a dataset's transform, defined in a third file).
  std::optional<ForeignDefinition> imported_definition(TSNode expr) const;
  // Whether an import statement of the file names another file of the
  // project (asked of the file system only, nothing is read).
  bool imports_project_files() const;
  // Forgets the answers computed so far (value and provenance caches), not
  // the structure: a model kept for several files answers each the same.
  void forget_answers() const;

  // --- scopes ---
  int function_at(uint32_t byte) const;  // innermost function, -1 at module level
  int class_of_function(int function) const { return function < 0 ? -1 : functions_[function].cls; }
  const Function* find_method(int cls, std::string_view name) const;
  const Function* find_function(std::string_view name) const;  // module level def
  const Class* find_class(std::string_view name) const;
  // Whether the class derives from torch.nn.Module through bases in this file.
  bool class_is_module(int cls) const;
  // The same question with every known Module base (is_module_base), answered
  // Unknown when only a base defined in another file can decide; those bases
  // (qualified) go to `undecided`, for ProjectIndex::derives_from.
  ModuleAnswer module_class(int cls, std::vector<std::string>* undecided = nullptr) const;
  bool function_has_decorator(int function, std::string_view qualified) const;
  // Whether a module of this class holds parameters that train: its bases'
  // and the attributes its methods set on `self` (nn.Parameter, layers,
  // submodules of the file's classes). False only when every one is known to
  // hold none (buffers, plain tensors, parameterless layers, a frozen
  // pretrained embedding): such a module records no graph of its own, its
  // output carries history only when its input does.
  Truth trainable_parameters(int cls) const;
  // The same for a module value (an instance of a class of the project).
  Truth trainable_parameters(const Value& module) const;
  // Whether a registry of the library models registers the class
  // (`@HOOKS.register_module()`): it runs only where a configuration names
  // it (`dict(type="DetectAnomalyHook")`, the "config-type" facts).
  bool registered_class(int cls) const;
  // The framework hook `function` overrides: a method whose class derives
  // (through bases of this file) from a class the library models give hooks.
  const HookModel* hook_model(int function) const;
  const LibraryModels& library() const { return config_.library(); }

  // --- calls, through the library models ---
  // The qualified class `expr` is an instance of, by its construction (`x =
  // GradScaler()`, `self.acc = Accelerator()`) or, for `self`, its class's
  // first base the models know; "" when unknown.
  std::string class_of(TSNode expr) const;
  // The model of what `c` calls: a function by qualified name, a method
  // through its receiver's class, else torch.Tensor's method of that name.
  const CallModel* call_model(const Call& c) const;
  // The expression an operand designates in `c` (null when absent).
  TSNode operand(const Call& c, const Operand& op) const;
  // What a call differentiates: the receiver of `loss.backward()`, the first
  // argument of `torch.autograd.backward(loss)` and `accelerator.backward(loss)`;
  // empty when `c` runs no backward pass.
  std::vector<TSNode> backward_subjects(const Call& c) const;
  // The same for a call whose model is already resolved.
  std::vector<TSNode> backward_subjects(const Call& c, const CallModel* model) const;
  bool is_backward_call(const Call& c) const { return !backward_subjects(c).empty(); }
  // Whether the file trains: it builds a torch optimizer or runs a backward pass.
  bool trains() const;
  // A backward call that adds into the parameters' .grad (not torch.autograd.grad).
  bool accumulates_grads(const Call& c) const;
  // The optimizer a call steps (`opt.step()`, `scaler.step(opt)`), or null.
  TSNode stepped_optimizer(const Call& c) const;
  // Whether `c` runs a loop over batches of data itself, as the library
  // models say: a framework's `trainer.fit(model)`, ignite's
  // `trainer.run(loader)` (the trainer built by create_supervised_trainer).
  bool runs_loop(const Call& c) const;
  // Whether `node` lies in a branch that cannot run when the flag `name` (a
  // plain name tested as `if name:` or `if not name:`) has `value`: a
  // function that serves two phases, specialised on its flag.
  bool excluded_when(TSNode node, std::string_view name, bool value) const;
  // The parameters of `function` that its own `if` statements test as flags.
  std::vector<std::string> flag_parameters(int function) const;
  // Whether `condition` only tests the machine or the process
  // (`torch.cuda.is_available()`, `dist.get_rank() == 0`,
  // `accelerator.is_main_process`, `not` of one, several joined by `and`;
  // the library models' environment-check entries): a branch under it runs
  // on every step of the runs that matter.
  bool is_environment_check(TSNode condition) const;
  // Whether `c` releases the accelerator's cache (torch.cuda.empty_cache()).
  bool releases_cache(const Call& c) const;

  // The calls whose call_name is `name`, by index into calls(), in source order.
  const std::vector<int>& calls_named(std::string_view name) const;

  // The file defining what `c` calls, as a normal path, when the engine can
  // tell cheaply: a function or class of this file or, through an import
  // (`helpers.f`), of another file of the project; a method of `self`'s
  // class. Empty when not known (another object's method).
  // With `packages`, a package's __init__.py that the import names is given
  // too (it may define the name, or only re-export it).
  std::string callee_file(const Call& c, bool packages = false) const;

  // Calls of `f` in this file: `f(...)`, `self.f(...)` from its class,
  // `x.f(...)` on an instance of its class (`meter = Average()`).
  std::vector<const Call*> call_sites(const Function& f) const;

  // --- loops ---
  int innermost_loop(uint32_t byte, int function) const;
  bool loop_contains(int loop, uint32_t byte) const;
  // Loops of the same function enclosing `byte`, innermost first.
  std::vector<int> enclosing_loops(uint32_t byte, int function) const;
  // Whether one iteration of `loop` spans at least one step over data: the
  // loop, or a loop nested in it, iterates a data loader or fetches a batch
  // from one (`next(it)`, `it = iter(loader)`), or the loop calls an
  // optimizer's step(), unless the optimizer is built in the same iteration
  // and stepped by a nested loop (a fresh optimization per timestep or item).
  // Loops over layers, heads, time steps or micro-batches are not step loops.
  bool is_step_loop(int loop) const;
  // Whether one call of `function` is one training step, with no loop of its
  // own: a framework's training-step or per-step hook (Lightning's
  // training_step, its backward hook), a function that steps an optimizer
  // itself, one that a step loop of the file calls, or the closure an
  // optimizer's step in a step loop calls (`opt.step(closure)`: a function
  // of the file by name, or the function that a function of the file
  // returns, `closure = self.make_closure(...)`).
  bool runs_per_step(int function) const;
  // A call of a module that runs `function` as a hook registered on it or on
  // one of its submodules (`layer.register_forward_hook(hook)`, for each
  // module of `model.named_modules()`; the library models say which calls
  // register hooks). The hook is a function of the file named, a method
  // (`self.save_output`), the nested function a maker returns
  // (`make_hook(name)`) or a `functools.partial` of one. The module is
  // followed through the registering function's parameters to the file's
  // calls of that function, and its calls are those of the function that
  // holds it.
  // A call runs the hook only while it is registered: not before the
  // registration in the same function (unless a loop around both comes back
  // to it), nor once the handle the registration returns is removed
  // (`h.remove()`, `for h in handles: h.remove()`) in the function that holds
  // it, the registering one or a caller binding what it returns. `bound` is
  // the number of positional arguments a `functools.partial` hook binds
  // before the module's; `keywords` the parameters it binds by name.
  struct HookSite {
    const Call* call = nullptr;
    ModuleHookRuns runs = ModuleHookRuns::Forward;
    size_t bound = 0;
    std::vector<std::string_view> keywords;
  };
  const std::vector<HookSite>& hook_sites(int function) const;
  // What `name` (a name or an attribute chain that `function`, a hook or a
  // closure, reads without binding) stands for in `at`, the function that
  // runs it: the same name for a module-level one or one of `at`'s own, and
  // the argument `at` passes when it is a parameter of an enclosing function
  // that `at` calls. Empty when `function` binds it (it starts afresh on each
  // call) or it is not followed.
  std::string name_in_caller(std::string_view name, int function, int at) const;
  // Whether `node` (in `function`) runs only under a switch that is off unless
  // someone outside turns it on: the body of an `if flag:` (also `and`-ed
  // with other tests) where `flag` is `self.attr` and every assignment of
  // that attribute in the file is False or None, or a parameter whose default
  // is False or None and that no call of the function in the file passes.
  // A debugging facility (`save_attention`, `register_hook=False`).
  bool switched_off(TSNode node, int function) const;
  // Whether `flag`, a parameter of `function`, is such a switch (switched_off).
  bool parameter_switched_off(int function, TSNode flag) const;
  // Whether each iteration of `loop` runs a module of the enclosing scope on
  // an input of its own (a name bound in the loop), none of them on the
  // previous iteration's output: a pass of a model over items (a dataset's
  // files, `for _ in range(n)` batches). Loops over modules and recurrences
  // (decoding token by token, denoising step by step) are not.
  bool runs_module_per_item(int loop) const;
  // Whether `c` runs a module: it calls one, or a method (of a class of the
  // file or of another file of the project) that calls one of its own.
  bool runs_module(const Call& c) const;
  // Whether `expr` iterates a data loader: a DataLoader(...) or a name like
  // `loader`, `val_dataloader`, `train_dl`, `dataset`, `batches`, also through
  // enumerate(), tqdm(), zip(), iter(), islice() and bindings.
  bool is_data_loader(TSNode expr) const;

  // --- grad ---
  GradState grad_state(uint32_t byte) const;

  // --- bindings ---
  // The last binding of `name` in `function` that ends before `use`
  // (flow-insensitive within straight-line code), else a module-level one.
  const Binding* reaching(std::string_view name, uint32_t use, int function) const;
  // Every binding of `name` in `function`.
  std::vector<const Binding*> bindings_of(std::string_view name, int function) const;
  // Whether `name` is bound in `function` before `loop` starts (or is a
  // parameter, a module-level name, a global, or an attribute).
  bool bound_before_loop(std::string_view name, int loop) const;
  // A plain (re)assignment of `name` inside `loop`, other than `except`.
  bool rebound_in_loop(std::string_view name, int loop, const Binding* except = nullptr) const;
  // Whether `.backward()` is called on an expression that mentions `name`
  // in `function` (also torch.autograd.backward / grad).
  bool is_backward_subject(std::string_view name, int function) const;
  // Whether `name` or a value computed from it (transitively through
  // assignments) is the subject of a backward call. An attribute `self.x` is
  // followed through every method of the class, a global or module-level name
  // through every function, a local through its function and the functions
  // nested in it.
  bool feeds_backward(std::string_view name, int function) const;
  // A binding inside `loop` that starts `name` afresh: an assignment whose
  // value does not read `name` (`total = 0`, `preds = []`, not `total = total
  // + x`), a for or with target, or `name.clear()`. For `a.b`, a fresh `a`.
  // With `every_iteration`, only a reset that runs on every iteration counts:
  // one under an `if`, a `try` or an inner loop of the body is periodic
  // (`if step % 100 == 0: total = 0`), and what it resets still carries
  // the iterations between two resets.
  bool reset_in_loop(std::string_view name, int loop, bool every_iteration = false) const;
  // The same for one call of a function that runs once per training step
  // (runs_per_step): `name` starts afresh on every call, in the function or,
  // for an attribute of `self`, in another per-step hook of its class
  // (`on_train_batch_start`). A reset in an epoch hook is periodic: it does
  // not count.
  bool reset_per_step(std::string_view name, int function) const;
  // Whether `name` at `use` holds a list: its binding (through augmented
  // assignments) is `[...]`, a list comprehension or `list(...)`.
  bool holds_list(std::string_view name, uint32_t use, int function) const;
  // Whether `expr` reads `name` (an identifier or an attribute chain).
  bool mentions(TSNode expr, std::string_view name) const;

  // --- values ---
  Provenance provenance(TSNode expr) const;
  // The abstract value of `expr` (value.cpp): facets and structure, followed
  // through bindings, in-place stores, calls of the file's functions and
  // methods (their returns evaluated with the arguments' values), the
  // parameters' values at the file's call sites, the library models, and the
  // batches the frameworks pass to their hooks.
  Value value(TSNode expr) const;
  // Whether `expr` carries autograd history: the value engine's answer when
  // it has one (a helper's tuple position that holds the batch moved to the
  // device has none), else the syntactic provenance.
  bool carries_history(TSNode expr) const;
  // The value of `expr`, in a function of the file, with the function's
  // parameters bound to the arguments of `call` (one of its call sites).
  Value value_in_call(TSNode expr, const Call& call) const;
  // The value `f` returns (a function or method of this file) given the
  // values of its arguments, `self` excepted: what another file's call of an
  // imported function receives. `level` counts the calls already entered.
  Value returns_given(const Function& f, const std::vector<Value>& positional,
                      const std::vector<std::pair<std::string, Value>>& keywords, int level) const;
  // The grad mode a function runs under when no region of its own decides:
  // Disabled when every call site of it in the file runs with grad disabled.
  GradState entry_grad(int function) const;
  bool is_module_instance(TSNode expr) const;
  bool is_loss_function(TSNode expr) const;
  bool is_optimizer(TSNode expr) const;

  // --- call arguments ---
  TSNode keyword_argument(const Call& call, std::string_view name) const;
  TSNode positional_argument(const Call& call, uint32_t index) const;
  // What `call` passes for parameter `index` of `f`, by keyword or by
  // position; `method`: the call binds the first parameter (`self`) itself,
  // and nothing is passed for it (a null node). Null when nothing is passed.
  TSNode argument_for(const Call& call, const Function& f, size_t index, bool method) const;
  uint32_t positional_count(const Call& call) const;

 private:
  // Gives the tables' storage back to the thread and frees the tree.
  void release() noexcept;
  struct Builder;
  friend struct Builder;

  bool reset_in_region(std::string_view name, int function, TSNode body, bool every_time,
                       const std::function<bool(uint32_t)>& inside) const;
  Provenance provenance_uncached(TSNode expr, int depth) const;
  // The value engine (value.cpp); `env` binds a function's parameters to the
  // arguments of the call being evaluated.
  struct ValueEnv;
  Value value_at(TSNode expr, const ValueEnv* env, int depth) const;
  Value value_uncached(TSNode expr, const ValueEnv* env, int depth) const;
  Value binding_value(const Binding& b, const ValueEnv* env, int depth) const;
  Value call_value(TSNode call, const ValueEnv* env, int depth) const;
  Value returns_value(const Function& f, const ValueEnv* env, int depth) const;
  Truth guard_truth(TSNode condition, const Function& f, const ValueEnv* env, int depth, bool& isinstance_test) const;
  Truth return_reachable(TSNode ret, const Function& f, const ValueEnv* env, int depth, bool& isinstance_test) const;
  Value parameter_value(const Function& f, size_t index, int depth) const;
  Value module_output(TSNode call, const Value& module, const ValueEnv* env, int depth) const;
  std::optional<Value> callable_output(TSNode call, TSNode func, const ValueEnv* env, int depth) const;
  Value arguments_joined(TSNode args, const ValueEnv* env, int depth) const;
  std::optional<Value> imported_function_output(const Call& c, TSNode func, const ValueEnv* env, int depth) const;
  // A call of another file's function or class (`def` given), or of a
  // method of an instance of another file's class (`receiver` given).
  std::optional<Value> foreign_call_output(const ForeignDefinition& def, TSNode args, const ValueEnv* env,
                                           int depth) const;
  std::optional<Value> foreign_method_output(const Value& receiver, std::string_view method, TSNode args,
                                             const ValueEnv* env, int depth) const;
  // The values of a call's arguments, as seen from another file (false when
  // a `*args` or `**kwargs` hides which parameter gets what).
  // An instance of the class `class_expr` names, of this file or (imported)
  // of another file of the project; nullopt for any other class.
  std::optional<Value> class_instance(TSNode class_expr) const;
  // What `use` (a name bound by `b`) is known to be an instance of from an
  // `assert isinstance(...)` before it, an `if isinstance(...):` around it,
  // or (with `annotations`) the annotation of the parameter binding it.
  std::optional<Value> narrowed_instance(TSNode use, const Binding& b, bool annotations) const;
  bool argument_values(TSNode args, const ValueEnv* env, int depth, std::vector<Value>& positional,
                       std::vector<std::pair<std::string, Value>>& keywords) const;
  std::optional<ForeignDefinition> resolve_foreign(const std::string& dotted, int level, int hops) const;
  // Binds `f`'s parameters (after `self` for a method) to the values of
  // `call`'s arguments, evaluated in `caller`'s binding.
  void bind_arguments(const Function& f, bool method, const Call& call, const ValueEnv* caller, int depth,
                      ValueEnv& inner) const;
  // `replaced` (when given) receives the string-keyed stores that replace a
  // field on every path from the binding to `use`, in source order.
  Value stored_into(std::string_view name, const Binding* from, uint32_t use, int function, const ValueEnv* env,
                    int depth, std::vector<std::pair<std::string, Value>>* replaced = nullptr) const;
  Device moved_to(TSNode call, const ValueEnv* env, int depth) const;
  Device device_argument(TSNode arg, const ValueEnv* env, int depth) const;
  bool module_moved_in_place(std::string_view name, int function) const;
  bool used_other_than_called(const Function& f, size_t calls) const;
  bool builtin_container_could_take(std::string_view name, const Call& c) const;
  // The functions of the file a callable expression read in `scope` stands
  // for: a def by name (one nested in the scope, else a module-level one), a
  // method (`self.m`), the nested functions that a call of a maker returns
  // (`make_hook(name)`, directly or through a name bound to it), or the
  // function a `functools.partial` wraps.
  struct Designated {
    int function = -1;
    size_t bound = 0;                        // positional arguments a partial binds
    std::vector<std::string_view> keywords;  // parameters it binds by name
  };
  std::vector<Designated> designated_functions(TSNode expr, int scope, int depth = 0) const;
  // Whether the hook registration `r` is in place when `site` calls its
  // module (HookSite).
  bool hook_registered_at(const Call& r, const Call& site) const;
  // The calls of the module `expr` (read in `function`) or of a module
  // holding it as a submodule, into `out` (hook_sites).
  void module_calls(TSNode expr, int function, int depth, std::vector<const Call*>& out) const;
  // The grad mode at entry of the forward of module class `cls` that the
  // file never calls by name: that of the modules holding it (entry_grad).
  GradState submodule_forward_grad(int cls) const;
  Provenance provenance_at(TSNode expr, int depth) const;
  Provenance binding_provenance(const Binding& b, int depth) const;
  Provenance call_provenance(TSNode call, int depth) const;
  Provenance function_returns(const Function& f, int depth) const;
  bool module_instance_at(TSNode expr, int depth) const;
  bool named_like(std::string_view name, std::initializer_list<std::string_view> exact,
                  std::initializer_list<std::string_view> suffixes) const;
  const Binding* attribute_binding(std::string_view name, int function) const;
  bool data_loader_at(TSNode expr, int depth) const;
  // Whether an attached value is put into container `name` before `use`
  // (append, extend, insert, `name[k] = v`).
  bool stores_attached(std::string_view name, uint32_t use, int function, int depth) const;

  SourceText source_;
  const Config& config_;
  std::string path_;
  bool resolves_imports_ = true;
  TSTree* tree_ = nullptr;

  std::vector<Function> functions_;
  std::vector<Class> classes_;
  std::vector<Loop> loops_;
  std::vector<Binding> bindings_;
  std::vector<Call> calls_;
  std::vector<Region> regions_;
  std::vector<Conditional> conditionals_;  // every `if` of the file, in source order
  std::vector<TSNode> comments_;
  std::vector<Reference> references_;
  NameMap<std::string> aliases_;
  NameMap<int> import_levels_;  // leading dots of a relative import, by local name
  mutable signed char imports_project_ = -1;  // imports_project_files(): -1 not asked yet
  // resolve_foreign's answers, by "level:dotted name" (the foreign models
  // live for the whole analysis of this file).
  mutable std::unordered_map<std::string, std::optional<ForeignDefinition>> foreign_cache_;
  mutable std::vector<signed char> isinstance_tests_;  // per function: -1 not asked, else whether it calls isinstance
  NameMap<std::vector<int>> bindings_by_name_;
  NameMap<int> top_functions_;    // find_function: the first module-level function of each name
  NameMap<int> classes_by_name_;  // find_class: the first class of each name
  mutable std::vector<signed char> step_loops_;  // per loop: -1 not asked, else is_step_loop
  bool step_loop_uncached(int loop) const;
  // What reaching() needs of a name bound many times (`total += loss` on
  // 20,000 lines), built on its first question so that each answer is a
  // binary search, not a scan of every binding of the name.
  struct ReachIndex {
    std::unordered_map<int, std::vector<int>> by_function;  // sorted by end, then by index
    std::unordered_set<int> declares_global;                // functions with `global name`
    int module_level = -1;                                  // the module-level binding starting last
    std::vector<int> comprehension;                         // comprehension variables, in order
  };
  mutable std::unordered_map<const std::vector<int>*, ReachIndex> reach_index_;
  // For each loop, the innermost loop whose node encloses it, whatever the
  // function or class in between (-1 for none): innermost_loop walks it.
  std::vector<int> loop_outer_;
  // (function, name) pairs mentioned in the subject of a backward call.
  std::unordered_set<std::string> backward_subjects_;
  // Names on which a Module-only method is called (parameters(), ...).
  std::unordered_set<std::string> module_evidence_;
  std::unordered_set<std::string> optimizer_names_;
  // Modules whose parameters are all frozen (`m.requires_grad_(False)`, or
  // `for p in m.parameters(): p.requires_grad = False`): a call of one
  // carries history only from its inputs.
  std::unordered_set<std::string> frozen_modules_;
  // `c.append(v)`, `c.extend(v)`, `c.insert(i, v)` calls by container name, in source order.
  std::unordered_map<std::string, std::vector<int>> stores_by_container_;

  mutable std::unordered_map<uint64_t, Provenance> provenance_cache_;
  mutable std::unordered_map<uint64_t, Value> value_cache_;
  mutable std::unordered_set<uint64_t> value_in_progress_;
  mutable std::unordered_map<int, Truth> trainable_;  // trainable_parameters(), Unknown while in progress
  mutable std::vector<signed char> entry_grad_;  // per function: -1 not asked, else a GradState
  mutable std::vector<bool> entry_grad_busy_;
  // The functions an optimizer's step calls as its closure in a step loop
  // (runs_per_step), by index; built on first need.
  mutable std::optional<std::vector<int>> step_closures_;
  // hook_sites(), per function; built on first need.
  mutable std::optional<std::vector<std::vector<HookSite>>> hook_sites_;
  mutable bool hook_sites_building_ = false;
  // callee_file() of an imported name, per name: cleared with the answers (the
  // lookups note the directories the analysis of a file depends on).
  mutable std::unordered_map<std::string, std::string> callee_files_;
  mutable std::string normal_path_;  // the file's path, lexically normal (callee_file)
  mutable std::vector<std::string> switches_asked_;  // parameter_switched_off, being decided
  // `del xs[:]` statements: the subscript and its function (reset_in_region).
  mutable std::optional<std::vector<std::pair<TSNode, int>>> slice_deletes_;
  // switched_off()'s answers, by flag: "self.<attr>", or "<function>:<parameter>".
  mutable std::unordered_map<std::string, bool> switches_;
  mutable NameMap<std::vector<int>> calls_by_name_;  // by call_name, built on first need
  mutable bool calls_indexed_ = false;
  // Mentions of the file's function names: as identifiers, and as `self.<name>`.
  mutable bool mentions_counted_ = false;
  mutable NameMap<size_t> name_mentions_;
  mutable NameMap<size_t> attribute_mentions_;
  mutable std::unordered_set<uint64_t> in_progress_;
};

}  // namespace torchleak::python
