// The library models (models/*.toml and a user's model files): what the shipped
// files say of the calls the engine asks about, aliases, patterns, bases and
// hooks, a user's file extending them through the configuration, and every
// kind of malformed model file as an error naming the file, the line and the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/config_file.h"
#include "core/library_models.h"

namespace fs = std::filesystem;
using namespace torchleak;

namespace {

std::string load_error(const std::string& text) {
  LibraryModels m;
  try {
    m.load(text, "inhouse.toml");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LibraryModels, ShippedTensorMethods) {
  const LibraryModels& m = *LibraryModels::builtin();
  ASSERT_NE(m.tensor_method("item"), nullptr);
  EXPECT_EQ(m.tensor_method("item")->grad, GradFacet::None);
  EXPECT_EQ(m.tensor_method("item")->device, DeviceFacet::Host);
  EXPECT_EQ(m.tensor_method("item")->kind, ValueKind::Number);
  EXPECT_EQ(m.tensor_method("detach")->grad, GradFacet::None);
  EXPECT_EQ(m.tensor_method("cpu")->device, DeviceFacet::Host);
  EXPECT_EQ(m.tensor_method("cpu")->grad, GradFacet::FromInputs);
  EXPECT_TRUE(m.tensor_method("add_")->in_place);
  EXPECT_TRUE(m.tensor_method("index_put_")->in_place);
  ASSERT_TRUE(m.tensor_method("backward")->backward.has_value());
  EXPECT_EQ(m.tensor_method("backward")->backward->kind, Operand::Kind::Self);
  EXPECT_EQ(m.tensor_method("view"), nullptr);  // no model: the engine's default applies
}

TEST(LibraryModels, ShippedFunctionsAndPatterns) {
  const LibraryModels& m = *LibraryModels::builtin();
  EXPECT_EQ(m.call("torch.zeros")->grad, GradFacet::None);
  // torch.* and torch.nn.functional.* propagate; the pattern stops at one component.
  EXPECT_EQ(m.call("torch.cat")->grad, GradFacet::FromInputs);
  EXPECT_EQ(m.call("torch.nn.functional.cross_entropy")->grad, GradFacet::FromInputs);
  EXPECT_EQ(m.call("torch.utils.checkpoint.checkpoint"), nullptr);
  // numpy.** reaches every depth.
  EXPECT_EQ(m.call("numpy.random.rand")->grad, GradFacet::None);
  EXPECT_EQ(m.call("numpy.random.default_rng")->kind, ValueKind::Generator);
  EXPECT_EQ(m.call("builtins.float")->grad, GradFacet::None);
  EXPECT_EQ(m.call("builtins.sum")->grad, GradFacet::FromInputs);
  EXPECT_TRUE(m.call("torch.cuda.empty_cache")->releases_cache);
  EXPECT_EQ(m.call("torch.no_grad")->grad_mode, GradMode::Disabled);
  EXPECT_EQ(m.call("torch.set_grad_enabled")->grad_mode, GradMode::Argument);
  EXPECT_EQ(m.call("torch.inference_mode")->grad_mode, GradMode::InferenceArgument);
  ASSERT_TRUE(m.call("torch.autograd.backward")->backward.has_value());
  EXPECT_EQ(m.call("torch.autograd.backward")->backward->index, 0u);
  EXPECT_EQ(m.call("torch.autograd.backward")->backward->keyword, "tensors");
}

TEST(LibraryModels, ClassesAliasesAndBases) {
  const LibraryModels& m = *LibraryModels::builtin();
  EXPECT_EQ(m.class_kind("torch.nn.Linear"), ValueKind::Module);
  EXPECT_EQ(m.class_kind("torch.nn.CrossEntropyLoss"), ValueKind::Loss);
  EXPECT_EQ(m.class_kind("torch.nn.Parameter"), ValueKind::Unknown);
  EXPECT_EQ(m.class_kind("torch.nn.functional.relu"), ValueKind::Unknown);
  EXPECT_EQ(m.class_kind("torch.optim.AdamW"), ValueKind::Optimizer);
  EXPECT_EQ(m.class_kind("torch.optim.lr_scheduler.StepLR"), ValueKind::Other);
  EXPECT_EQ(m.class_kind("torch.utils.data.DataLoader"), ValueKind::Loader);
  EXPECT_EQ(m.class_kind("pytorch_lightning.LightningModule"), ValueKind::Module);
  EXPECT_EQ(m.class_kind("lightning.LightningModule"), ValueKind::Module);
  EXPECT_EQ(m.class_kind("transformers.BertForSequenceClassification"), ValueKind::Module);
  EXPECT_EQ(m.class_kind("transformers.modeling_outputs.CausalLMOutput"), ValueKind::ModelOutput);
  // A method found through the class's bases: Adam's step is an optimizer's step.
  const CallModel* step = m.method("torch.optim.Adam", "step");
  ASSERT_NE(step, nullptr);
  ASSERT_TRUE(step->steps.has_value());
  EXPECT_EQ(step->steps->kind, Operand::Kind::Self);
  EXPECT_NE(m.method("torch.nn.GRU", "zero_grad"), nullptr);
  // GradScaler under its old path: scale keeps its argument's history, step steps its argument.
  EXPECT_EQ(m.method("torch.cuda.amp.GradScaler", "scale")->grad, GradFacet::FromInputs);
  EXPECT_EQ(m.method("torch.cuda.amp.GradScaler", "step")->steps->kind, Operand::Kind::Argument);
  EXPECT_EQ(m.method("accelerate.Accelerator", "backward")->backward->index, 0u);
  EXPECT_EQ(m.method("accelerate.Accelerator", "unknown_method"), nullptr);
  // What iterating a module's contents yields.
  EXPECT_EQ(m.method("torch.nn.Sequential", "children")->elements, ValueKind::Module);
  EXPECT_FALSE(m.method("torch.nn.Sequential", "children")->pairs);
  EXPECT_EQ(m.method("torch.nn.ModuleDict", "items")->elements, ValueKind::Module);
  EXPECT_TRUE(m.method("torch.nn.ModuleDict", "items")->pairs);
  EXPECT_EQ(m.method("torch.nn.ModuleList", "__iter__")->elements, ValueKind::Module);
  EXPECT_EQ(m.method("torch.nn.ModuleDict", "__iter__"), nullptr);
  // Tests of the process, also by their last name for an object of unknown class.
  EXPECT_TRUE(m.method("accelerate.Accelerator", "is_main_process")->environment_check);
  EXPECT_TRUE(m.may_check_environment("is_world_process_zero"));
  EXPECT_TRUE(m.may_check_environment("get_rank"));
  EXPECT_FALSE(m.may_check_environment("empty_cache"));
}

TEST(LibraryModels, ParametersOfLayers) {
  const LibraryModels& m = *LibraryModels::builtin();
  EXPECT_EQ(m.class_parameters("torch.nn.Linear"), ParameterFacet::Trainable);
  EXPECT_EQ(m.class_parameters("torch.nn.modules.conv.Conv2d"), ParameterFacet::Trainable);
  EXPECT_EQ(m.class_parameters("torch.nn.ReLU"), ParameterFacet::None);
  EXPECT_EQ(m.class_parameters("torch.nn.Dropout"), ParameterFacet::None);
  EXPECT_EQ(m.class_parameters("torch.nn.Sequential"), ParameterFacet::Unknown);  // whatever it holds
  EXPECT_EQ(m.class_parameters("torch.nn.Module"), ParameterFacet::Unknown);
  EXPECT_EQ(m.class_parameters("mylib.Block"), ParameterFacet::Unknown);
  const CallModel* pretrained = m.call("torch.nn.Embedding.from_pretrained");
  ASSERT_NE(pretrained, nullptr);
  ASSERT_TRUE(pretrained->frozen.has_value());
  EXPECT_EQ(pretrained->frozen->index, 1u);
  EXPECT_EQ(pretrained->frozen->keyword, "freeze");

  LibraryModels user;
  user.load("[[classes]]\nnames = [\"corp.Scaler\"]\nparameters = \"none\"\n", "corp.toml");
  EXPECT_EQ(user.class_parameters("corp.Scaler"), ParameterFacet::None);
}

TEST(LibraryModels, FieldsAndPositionsOfAResult) {
  const CallModel* xl = LibraryModels::builtin()->method("transformers.TransfoXLLMHeadModel", "__call__");
  ASSERT_NE(xl, nullptr);
  ASSERT_EQ(xl->field_grads.size(), 1u);
  EXPECT_EQ(xl->field_grads[0].first, "mems");
  EXPECT_EQ(xl->field_grads[0].second, GradFacet::None);
  ASSERT_EQ(xl->item_grads.size(), 1u);
  EXPECT_EQ(xl->item_grads[0].first, 1u);
  // The layout before transformers 4.0 is known too.
  EXPECT_NE(LibraryModels::builtin()->method("transformers.modeling_xlnet.XLNetModel", "__call__"), nullptr);
  EXPECT_EQ(LibraryModels::builtin()->class_kind("transformers.modeling_bert.BertModel"), ValueKind::Module);
}

TEST(LibraryModels, Hooks) {
  const LibraryModels& m = *LibraryModels::builtin();
  const HookModel* v = m.hook("pytorch_lightning.LightningModule", "validation_step");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->grad_mode, GradMode::Disabled);
  EXPECT_EQ(v->role, HookRole::EvaluationStep);
  EXPECT_EQ(m.hook("lightning.pytorch.LightningModule", "training_step")->role, HookRole::TrainingStep);
  EXPECT_EQ(m.hook("lightning.pytorch.LightningModule", "training_step")->grad_mode, GradMode::Unchanged);
  EXPECT_EQ(m.hook("transformers.TrainerCallback", "on_step_end")->role, HookRole::PerStep);
  // skorch's validation_step disables grad in its own body, not around an override.
  EXPECT_EQ(m.hook("skorch.NeuralNet", "validation_step")->grad_mode, GradMode::Unchanged);
  EXPECT_EQ(m.hook("lightning.pytorch.LightningModule", "forward"), nullptr);
  EXPECT_EQ(m.hook("lightning.pytorch.LightningModule", "validation_step")->batch_iterator, "dataloader_iter");
  EXPECT_EQ(m.hook("lightning.pytorch.LightningModule", "training_step")->batch_iterator, "dataloader_iter");
  const CallModel* trainer = m.call("lightning.pytorch.Trainer");
  ASSERT_NE(trainer, nullptr);
  ASSERT_TRUE(trainer->anomaly_detection.has_value());
  EXPECT_EQ(trainer->anomaly_detection->index, Operand::kKeywordOnly);
  EXPECT_EQ(trainer->anomaly_detection->keyword, "detect_anomaly");
  EXPECT_TRUE(m.call("torch.autograd.detect_anomaly")->anomaly_detection_block);
  EXPECT_TRUE(m.has_hooks("transformers.Trainer"));
  EXPECT_FALSE(m.has_hooks("torch.nn.Module"));
  // OpenMMLab's registries: a class registered there is named by `type` in configurations.
  ASSERT_NE(m.registry_key("mmcv.runner.hooks.HOOKS.register_module"), nullptr);
  EXPECT_EQ(*m.registry_key("mmseg.registry.MODELS.register_module"), "type");
  EXPECT_EQ(m.registry_key("functools.lru_cache"), nullptr);
  EXPECT_EQ(m.registry_keys(), std::vector<std::string>{"type"});
}

TEST(LibraryModels, FactoriesAndFrameworkLoops) {
  const LibraryModels& m = *LibraryModels::builtin();
  // create_supervised_trainer builds an ignite Engine, whose run() loops over batches.
  const CallModel* factory = m.call("ignite.engine.create_supervised_trainer");
  ASSERT_NE(factory, nullptr);
  EXPECT_EQ(factory->result_class, "ignite.engine.Engine");
  const CallModel* run = m.method("ignite.engine.engine.Engine", "run");  // through the alias
  ASSERT_NE(run, nullptr);
  EXPECT_TRUE(run->runs_loop);
  EXPECT_TRUE(m.may_run_loop("run"));
  EXPECT_TRUE(m.method("pytorch_lightning.Trainer", "fit")->runs_loop);
  EXPECT_TRUE(m.method("transformers.Trainer", "train")->runs_loop);
  EXPECT_FALSE(m.may_run_loop("step"));
  EXPECT_FALSE(m.method("pytorch_lightning.Trainer", "predict"));  // no grad: no training loop
  EXPECT_EQ(m.call("ignite.engine.create_supervised_evaluator"), nullptr);
  EXPECT_EQ(m.call("fastai.vision.all.vision_learner")->result_class, "fastai.Learner");
  EXPECT_TRUE(m.method("fastai.vision.all.Learner", "fine_tune")->runs_loop);
  EXPECT_FALSE(m.call("lightning.pytorch.Trainer")->runs_loop);
}

TEST(LibraryModels, UserFileExtendsAndOverrides) {
  LibraryModels m(*LibraryModels::builtin());
  m.load(R"(
[aliases]
"corp.train.Engine" = "corp.Engine"

[[classes]]
names = ["corp.Engine"]
kind = "other"

[[calls]]
names = ["corp.Engine.backward_and_step"]
effects = { backward = "arg0|loss", step = "self" }

[[calls]]
names = ["torch.Tensor.item"]
result = { grad = "unknown" }

[[calls]]
names = ["corp.make_engine"]
result = { kind = "other", class = "corp.Engine" }

[[calls]]
names = ["corp.Engine.train_epochs"]
effects = { loop = true }

[[hooks]]
classes = ["corp.Engine"]
methods = ["eval_batch"]
role = "evaluation-step"
grad-mode = "disabled"
)", "inhouse.toml");
  const CallModel* c = m.method("corp.train.Engine", "backward_and_step");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->backward->keyword, "loss");
  EXPECT_EQ(c->file, "inhouse.toml");
  EXPECT_EQ(c->line, 9u);  // the entry's [[calls]] header
  EXPECT_EQ(m.tensor_method("item")->grad, GradFacet::Unknown);  // the later file wins
  EXPECT_EQ(m.hook("corp.train.Engine", "eval_batch")->grad_mode, GradMode::Disabled);
  EXPECT_EQ(m.call("corp.make_engine")->result_class, "corp.Engine");
  EXPECT_TRUE(m.method("corp.Engine", "train_epochs")->runs_loop);
  EXPECT_EQ(m.call("torch.zeros")->grad, GradFacet::None);  // the shipped models are kept
}

TEST(LibraryModels, MalformedFilesNameFileLineAndProblem) {
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { grad = \"detached\" }\n"),
            "inhouse.toml:3:19: calls[0].result.grad: must be one of unknown, none, from-inputs, attached, not "
            "'detached'");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nreturns = { grad = \"none\" }\n"),
            "inhouse.toml:3:1: calls[0]: unknown key 'returns' (expected one of: names, patterns, result, grad-mode, "
            "environment-check, effects)");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { elements = \"modules\" }\n"),
            "inhouse.toml:3:23: calls[0].result.elements: must be one of unknown, tensor, number, container, module, "
            "optimizer, loss, loader, generator, model-output, other, none, not 'modules'");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { pairs = \"yes\" }\n"),
            "inhouse.toml:3:20: calls[0].result.pairs: must be true or false");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { class = 3 }\n"),
            "inhouse.toml:3:20: calls[0].result.class: must be a non-empty string");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\neffects = { loop = \"yes\" }\n"),
            "inhouse.toml:3:20: calls[0].effects.loop: must be true or false");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\neffects = { hook-runs = \"forward\" }\n"),
            "inhouse.toml:3:25: calls[0].effects.hook-runs: needs `hook`, the operand that is the registered callable");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\neffects = { hook = \"arg0\", hook-runs = \"after\" }\n"),
            "inhouse.toml:3:40: calls[0].effects.hook-runs: must be one of forward, forward-pre, backward, not 'after'");
  EXPECT_EQ(load_error("[[calls]]\nresult = { grad = \"none\" }\n"),
            "inhouse.toml:1:1: calls[0]: needs `names`, the qualified names it describes");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\neffects = { backward = \"argument0\" }\n"),
            "inhouse.toml:3:24: calls[0].effects.backward: must be self, argN, argN|keyword or *|keyword, not 'argument0'");
  EXPECT_EQ(load_error("[[hooks]]\nclasses = [\"a.B\"]\nmethods = [\"step\"]\n"),
            "inhouse.toml:1:1: hooks[0]: says nothing: give a `role` or a `grad-mode`");
  EXPECT_EQ(load_error("[[hooks]]\nclasses = [\"a.B\"]\nmethods = [\"step\"]\nrole = \"per-step\"\n"
                       "batch-iterator = \"it\"\n"),
            "inhouse.toml:1:1: hooks[0]: `batch-iterator` needs `batch`");
  EXPECT_EQ(load_error("[[classes]]\nnames = [\"a.B\"]\n"),
            "inhouse.toml:1:1: classes[0]: needs `kind`, `bases` or `parameters`");
  EXPECT_EQ(load_error("[[classes]]\nnames = [\"a.B\"]\nparameters = \"frozen\"\n"),
            "inhouse.toml:3:14: classes[0].parameters: must be one of unknown, none, trainable, not 'frozen'");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { frozen = \"freeze\" }\n"),
            "inhouse.toml:3:21: calls[0].result.frozen: must be self, argN, argN|keyword or *|keyword, not 'freeze'");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { items = { first = \"none\" } }\n"),
            "inhouse.toml:3:22: calls[0].result.items.first: a position must be a number (0, 1, ...)");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"a.b\"]\nresult = { fields = { mems = \"gone\" } }\n"),
            "inhouse.toml:3:30: calls[0].result.fields.mems: must be one of unknown, none, from-inputs, attached, not "
            "'gone'");
  EXPECT_EQ(load_error("calls = 3\n"), "inhouse.toml:1:9: calls: must be an array of tables ([[calls]])");
  EXPECT_EQ(load_error("functions = []\n"),
            "inhouse.toml:1:1: functions: unknown key (expected one of: library, aliases, calls, classes, hooks, "
            "registries)");
  EXPECT_EQ(load_error("[[registries]]\ndecorators = [\"corp.REGISTRY.add\"]\n"),
            "inhouse.toml:1:1: registries[0]: needs `config-key`, the key under which a configuration names a class");
  EXPECT_EQ(load_error("[[registries]]\nconfig-key = \"type\"\n"),
            "inhouse.toml:1:1: registries[0]: needs `decorators`, the registering decorators' names (globs)");
  EXPECT_EQ(load_error("[[calls]\n"), "inhouse.toml:1:9: TOML: Error while parsing table header: expected ']', "
                                      "saw '\\n'");
  EXPECT_EQ(load_error("[[calls]]\nnames = [\"\"]\n"), "inhouse.toml:2:10: calls[0].names[0]: must be a non-empty string");
}

TEST(LibraryModels, ConfigurationLoadsUserFilesRelativeToItself) {
  fs::path dir = fs::temp_directory_path() / ("torchleak-models-" + std::to_string(::getpid()));
  fs::create_directories(dir / "tools");
  std::ofstream(dir / "torchleak.toml") << "models = [\"tools/inhouse.toml\"]\n";
  std::ofstream(dir / "tools" / "inhouse.toml")
      << "[[calls]]\nnames = [\"corp.fit.backward\"]\neffects = { backward = \"arg0\" }\n";
  std::ofstream(dir / "train.py") << "x = 1\n";
  ConfigResolver resolver(Config{}, "");
  const Config& c = resolver.for_file((dir / "train.py").string());
  ASSERT_NE(c.models, nullptr);
  EXPECT_NE(c.library().call("corp.fit.backward"), nullptr);
  EXPECT_NE(c.library().call("torch.zeros"), nullptr);

  // A broken model file is the configuration's error, naming both files.
  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "torchleak.toml") << "models = [\"missing.toml\"]\n";
  std::ofstream(dir / "other" / "train.py") << "x = 1\n";
  std::string error;
  try {
    resolver.for_file((dir / "other" / "train.py").string());
  } catch (const ConfigError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("torchleak.toml: models: "), std::string::npos) << error;
  EXPECT_NE(error.find("missing.toml: cannot read the model file"), std::string::npos) << error;
  fs::remove_all(dir);
}

}  // namespace
