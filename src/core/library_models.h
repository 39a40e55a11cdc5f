// Library and framework knowledge as data: what calls of torch, Lightning,
// transformers, accelerate, ... return and do, which classes are modules or
// optimizers, and which framework hooks run per step or with autograd off.
// Read from model files (models/*.toml, embedded in the binary, and the
// user's files named by the configuration's `models` key); docs/models.md
// gives the format. The engine asks; the rules never name a library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torchleak {

// Maps keyed by name and looked up by a view: no temporary string per question.
struct ModelNameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using ModelNameMap = std::unordered_map<std::string, V, ModelNameHash, std::equal_to<>>;

// A model file that cannot be read: the message names the file, the line and the problem.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The autograd history of a call's result.
enum class GradFacet : uint8_t {
  Unknown,     // the model says nothing
  None,        // never carries history (item(), detach(), a fresh tensor)
  FromInputs,  // carries history when one of its inputs does (torch.cat, x.view)
  Attached,    // carries history whenever autograd is enabled (a module's output)
};

// Where a call's result lives.
enum class DeviceFacet : uint8_t { Unknown, Host, Accelerator, FromInputs };

// What a value is.
enum class ValueKind : uint8_t {
  Unknown, Tensor, Number, Container, Module, Optimizer, Loss, Loader, Generator, ModelOutput, Other, None,
};

// Whether a module holds parameters that train (its own or its submodules').
enum class ParameterFacet : uint8_t {
  Unknown,
  None,       // no parameter (nn.ReLU, nn.Dropout), or every one frozen
  Trainable,  // parameters with requires_grad (nn.Linear)
};

// What a context manager or decorator does to autograd.
enum class GradMode : uint8_t {
  Unchanged,
  Disabled,  // torch.no_grad()
  Enabled,   // torch.enable_grad()
  Argument,  // torch.set_grad_enabled(flag): the first argument (False: disabled)
  InferenceArgument,  // torch.inference_mode(mode=True): the first argument (True: disabled)
};

// What a framework calls a hook for.
enum class HookRole : uint8_t {
  None,
  TrainingStep,    // once per step over data (Lightning's training_step)
  EvaluationStep,  // once per evaluation batch (Lightning's validation_step)
  PerStep,         // once per step, around it (a callback's on_step_end, a backward hook)
};

// When a module runs a hook registered on it (`register_forward_hook(f)`):
// after each forward pass with (module, inputs, output), before it with
// (module, inputs), or during the backward pass with (module, grad_inputs,
// grad_outputs).
enum class ModuleHookRuns : uint8_t { Forward, ForwardPre, Backward };

// One operand of a call: its receiver (`self`), a positional argument
// (`arg0`), or that argument also passed by keyword (`arg0|loss`).
struct Operand {
  enum class Kind : uint8_t { Self, Argument } kind = Kind::Self;
  static constexpr uint32_t kKeywordOnly = UINT32_MAX;  // `*|name`: no position
  uint32_t index = 0;
  std::string keyword;
  bool operator==(const Operand&) const = default;
};

struct CallModel {
  std::string name;  // qualified: "torch.Tensor.item", "accelerate.Accelerator.backward"
  GradFacet grad = GradFacet::Unknown;
  DeviceFacet device = DeviceFacet::Unknown;
  ValueKind kind = ValueKind::Unknown;
  // The inputs that `FromInputs` reads; empty: the receiver and every argument.
  std::vector<Operand> from;
  // What iterating the result yields (`module.children()`: modules), when a
  // model says; with `pairs`, each element is a (name, element) pair
  // (`named_children()`, `ModuleDict.items()`).
  ValueKind elements = ValueKind::Unknown;
  bool pairs = false;
  // The result is a module whose parameters are frozen unless this operand
  // is given as False (`nn.Embedding.from_pretrained(w, freeze=True)`).
  std::optional<Operand> frozen;
  // The history of some fields and positions of the result, where they
  // differ from `grad` (a model output whose `mems` the library detaches).
  std::vector<std::pair<std::string, GradFacet>> field_grads;
  std::vector<std::pair<uint32_t, GradFacet>> item_grads;
  GradMode grad_mode = GradMode::Unchanged;  // as a context manager or decorator
  std::optional<Operand> backward;           // runs a backward pass through this operand's graph
  bool accumulates_grads = true;             // ... and adds into .grad (torch.autograd.grad does not)
  std::optional<Operand> steps;              // steps this optimizer
  std::optional<Operand> clears_grads;       // clears the gradients of this module or optimizer
  bool releases_cache = false;               // torch.cuda.empty_cache()
  std::optional<Operand> anomaly_detection;  // switches anomaly detection on when this operand is true
  bool anomaly_detection_block = false;       // ... on inside its with block (`detect_anomaly()`)
  bool in_place = false;                     // updates its receiver in place (add_, copy_)
  // Runs a loop over batches of data itself (a framework's `fit()`,
  // ignite's `Engine.run`): a call of it is a loop over steps.
  bool runs_loop = false;
  // Registers this operand, a callable, as a hook that the receiving module
  // runs at each of its calls (`module.register_forward_hook(hook)`).
  std::optional<Operand> hook;
  ModuleHookRuns hook_runs = ModuleHookRuns::Forward;
  // The result is an instance of this class (qualified), for a factory
  // function (`create_supervised_trainer(...)` builds an ignite Engine).
  std::string result_class;
  // A test of the machine or the process (`torch.cuda.is_available()`): the
  // same on every step of a run, and true on the runs the rules are about.
  bool environment_check = false;
  std::string file;                          // where it was declared
  uint32_t line = 0;
};

struct HookModel {
  std::string cls;     // qualified base class: "lightning.pytorch.LightningModule"
  std::string method;  // "validation_step"
  HookRole role = HookRole::None;
  GradMode grad_mode = GradMode::Unchanged;  // the framework runs it under this mode
  // The argument through which the framework passes the batch, already moved
  // to the module's device (Lightning's `batch`): argN counts after `self`.
  std::optional<Operand> batch;
  // A parameter of this name at the batch's position receives an iterator
  // over the batches instead, not moved to the device (Lightning's
  // `dataloader_iter`).
  std::string batch_iterator;
};

class LibraryModels {
 public:
  // The models shipped with torchleak (models/*.toml, embedded at build time).
  static const std::shared_ptr<const LibraryModels>& builtin();
  // The shipped models with the user's model files on top, in order. Throws ModelError.
  static std::shared_ptr<const LibraryModels> with_files(const std::vector<std::string>& paths);

  // Reads one model file's text into these models; a later file's entry for
  // a name replaces an earlier one. Throws ModelError naming `path`.
  void load(std::string_view text, const std::string& path);
  // The same for a file on disk (ModelError when it cannot be read).
  void load_file(const std::string& path);

  // The import path of `qualified` after the models' aliases
  // ("pytorch_lightning.LightningModule" -> "lightning.pytorch.LightningModule").
  std::string canonical(std::string_view qualified) const;
  // The same, only when an alias applies.
  std::optional<std::string> aliased(std::string_view qualified) const;

  // A function or class called by its qualified name.
  const CallModel* call(std::string_view qualified) const;
  // A method of a class (qualified), looked up through the class's model
  // bases (`[[classes]] bases`): ("torch.optim.Adam", "step").
  const CallModel* method(std::string_view cls, std::string_view name) const;
  // A method of torch.Tensor by name: what `x.<name>(...)` does when `x` is a
  // tensor or of unknown kind.
  const CallModel* tensor_method(std::string_view name) const;

  // The kind of a class (qualified), by name or by pattern; Unknown when no model says.
  ValueKind class_kind(std::string_view qualified) const;
  // Whether a module of this class (qualified) holds trainable parameters,
  // by name or pattern; Unknown when no model says.
  ParameterFacet class_parameters(std::string_view qualified) const;
  // Whether `qualified` is a class the models know (by name or pattern).
  bool knows_class(std::string_view qualified) const;

  // A hook `method` of a class deriving from `base` (qualified), or null.
  const HookModel* hook(std::string_view base, std::string_view method) const;
  // Whether some framework has a hook of this name (a gate before looking at bases).
  bool is_hook_name(std::string_view method) const { return hook_methods_.count(method) > 0; }
  // Whether `base` (qualified) is a class some hook belongs to.
  bool has_hooks(std::string_view base) const;

  // Whether some model of a callable whose name ends in `.name` (or is `name`)
  // has that effect: cheap gates before resolving a call's receiver.
  bool may_run_backward(std::string_view name) const { return has_effect(name, kBackward); }
  bool may_step(std::string_view name) const { return has_effect(name, kStep); }
  bool may_release_cache(std::string_view name) const { return has_effect(name, kReleaseCache); }
  bool may_set_grad_mode(std::string_view name) const { return has_effect(name, kGradMode); }
  bool may_switch_anomaly_detection(std::string_view name) const { return has_effect(name, kAnomalyDetection); }
  // Whether some model of this last name is a test of the machine or the
  // process (`is_main_process`): for a property or method of an object whose
  // class is not known.
  bool may_check_environment(std::string_view name) const { return has_effect(name, kEnvironmentCheck); }
  bool may_run_loop(std::string_view name) const { return has_effect(name, kRunsLoop); }
  bool may_register_hook(std::string_view name) const { return has_effect(name, kRegistersHook); }

  // Registries (`[[registries]]`): the configuration key that names a class
  // registered by the decorator `qualified` (`@HOOKS.register_module()`:
  // "type", as in `dict(type="MyHook")`), or null when no registry's
  // decorator pattern matches.
  const std::string* registry_key(std::string_view qualified_decorator) const;
  // Every configuration key of the registries ("type"), for collecting the names configurations give.
  const std::vector<std::string>& registry_keys() const { return registry_keys_; }


 private:
  friend class ModelFileReader;
  struct ClassPattern {
    std::string pattern;  // fnmatch(3) glob on the qualified name
    std::vector<std::string> except;
    ValueKind kind = ValueKind::Unknown;
    ParameterFacet parameters = ParameterFacet::Unknown;
    // Whether the pattern names `qualified` (canonical) and does not except it.
    bool covers(std::string_view qualified) const;
  };
  // What the class entries say of a class: its entry by name, else the last
  // pattern that covers it and says something (`unknown` is `T{}`).
  template <class T>
  T class_fact(std::string_view qualified, const ModelNameMap<T>& named, T ClassPattern::*fact) const;
  ModelNameMap<CallModel> calls_;
  std::vector<CallModel> call_patterns_;  // `name` holds the pattern
  ModelNameMap<std::string> aliases_;  // prefix -> prefix
  ModelNameMap<ValueKind> class_kinds_;
  ModelNameMap<ParameterFacet> class_parameters_;
  ModelNameMap<std::vector<std::string>> class_bases_;
  std::vector<ClassPattern> class_patterns_;
  ModelNameMap<HookModel> hooks_;  // "class\0method"
  ModelNameMap<bool> hook_classes_;
  ModelNameMap<bool> hook_methods_;  // the hooks' method names, a gate
  enum : unsigned {
    kBackward = 1,
    kStep = 2,
    kReleaseCache = 4,
    kGradMode = 8,
    kAnomalyDetection = 16,
    kEnvironmentCheck = 32,
    kRunsLoop = 64,
    kRegistersHook = 128
  };
  bool has_effect(std::string_view name, unsigned effect) const {
    auto it = effect_names_.find(name);
    return it != effect_names_.end() && (it->second & effect);
  }
  void note_effects(const std::string& name, const CallModel& m);
  ModelNameMap<unsigned> effect_names_;  // last component -> effects
  struct Registry {
    std::vector<std::string> decorators;  // glob patterns on qualified names
    std::string key;                      // the configuration key naming a class
  };
  std::vector<Registry> registries_;
  std::vector<std::string> registry_keys_;
};

}  // namespace torchleak
