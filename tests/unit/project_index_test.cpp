// The project index (class hierarchies across files, deterministic lookups)
// and the findings resolved through it: TL003 for a module whose nn.Module
// ancestry is in another file, TL005 for a DataParallel wrap in another file.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/fixer.h"
#include "core/project_index.h"

using namespace torchleak;

namespace {

Fact class_fact(std::string name, std::string file, uint32_t line, std::vector<std::string> bases) {
  return Fact{"class", std::move(name), std::move(file), line, std::move(bases)};
}

const std::vector<std::string> kModule{"torch.nn.Module"};

TEST(ProjectIndex, DerivesFromFollowsBasesAcrossFiles) {
  ProjectIndex index;
  index.add(class_fact("BaseModel", "models/base.py", 4, {"torch.nn.Module"}));
  index.add(class_fact("Encoder", "models/encoder.py", 7, {"models.base.BaseModel"}));
  index.add(class_fact("BiEncoder", "train.py", 12, {"models.encoder.Encoder", "mixins.Logging"}));
  index.add(class_fact("Registry", "models/base.py", 20, {}));
  index.add(class_fact("Builder", "train.py", 30, {"models.base.Registry"}));
  index.finalize();

  EXPECT_TRUE(index.derives_from("BaseModel", kModule));
  EXPECT_TRUE(index.derives_from("Encoder", kModule));
  EXPECT_TRUE(index.derives_from("BiEncoder", kModule));  // two files away, past an unknown mixin
  EXPECT_FALSE(index.derives_from("Registry", kModule));
  EXPECT_FALSE(index.derives_from("Builder", kModule));
  EXPECT_FALSE(index.derives_from("Logging", kModule));  // a base no analyzed file defines
  EXPECT_FALSE(index.derives_from("Unknown", kModule));
}

TEST(ProjectIndex, DerivesFromTakesARootPredicate) {
  ProjectIndex index;
  index.add(class_fact("Stack", "model.py", 3, {"torch.nn.Sequential"}));
  index.add(class_fact("DeepStack", "deep.py", 9, {"model.Stack"}));
  index.finalize();
  auto torch_nn = [](std::string_view base) { return base.substr(0, 9) == "torch.nn."; };
  EXPECT_TRUE(index.derives_from("DeepStack", torch_nn));
  EXPECT_FALSE(index.derives_from("DeepStack", kModule));  // Sequential is not in the list
}

TEST(ProjectIndex, SubclassesOfCollectsEveryLevelAcrossFiles) {
  ProjectIndex index;
  index.add(class_fact("RNNEncoder", "encoders.py", 5, {"torch.nn.Module"}));
  index.add(class_fact("GRUEncoder", "gru.py", 3, {"encoders.RNNEncoder"}));
  index.add(class_fact("LSTMEncoder", "lstm.py", 3, {"encoders.RNNEncoder"}));
  index.add(class_fact("BiGRUEncoder", "gru.py", 20, {"GRUEncoder"}));
  index.add(class_fact("Decoder", "decoder.py", 2, {"torch.nn.Module"}));
  index.finalize();
  EXPECT_EQ(index.subclasses_of("RNNEncoder"),
            (std::vector<std::string>{"RNNEncoder", "GRUEncoder", "LSTMEncoder", "BiGRUEncoder"}));
  EXPECT_EQ(index.subclasses_of("GRUEncoder"), (std::vector<std::string>{"GRUEncoder", "BiGRUEncoder"}));
  EXPECT_EQ(index.subclasses_of("Decoder"), (std::vector<std::string>{"Decoder"}));
  EXPECT_EQ(index.subclasses_of("Missing"), (std::vector<std::string>{"Missing"}));
}

TEST(ProjectIndex, SubclassesOfAnswersTheSameBeforeAndAfterFinalize) {
  ProjectIndex index;
  index.add(class_fact("Zeta", "z.py", 1, {"base.Base"}));
  index.add(class_fact("Alpha", "a.py", 1, {"base.Base", "Base"}));  // the same base twice
  index.add(class_fact("Alpha", "a2.py", 4, {"Base"}));            // and a second class of that name
  index.add(class_fact("Mid", "m.py", 1, {"Alpha"}));
  const std::vector<std::string> expected{"Base", "Alpha", "Zeta", "Mid"};
  EXPECT_EQ(index.subclasses_of("Base"), expected);
  index.finalize();
  EXPECT_EQ(index.subclasses_of("Base"), expected);
  index.add(class_fact("Late", "l.py", 1, {"Mid"}));  // a fact after finalize() is not lost
  EXPECT_EQ(index.subclasses_of("Base"), (std::vector<std::string>{"Base", "Alpha", "Zeta", "Mid", "Late"}));
}

TEST(ProjectIndex, CyclesInBasesTerminate) {
  ProjectIndex index;
  index.add(class_fact("A", "a.py", 1, {"b.B"}));
  index.add(class_fact("B", "b.py", 1, {"c.C"}));
  index.add(class_fact("C", "c.py", 1, {"a.A"}));
  index.add(class_fact("Self", "s.py", 1, {"Self"}));
  index.add(class_fact("Leaf", "l.py", 1, {"a.A"}));
  index.finalize();
  EXPECT_FALSE(index.derives_from("A", kModule));
  EXPECT_FALSE(index.derives_from("Self", kModule));
  EXPECT_FALSE(index.derives_from("Leaf", kModule));
  EXPECT_EQ(index.subclasses_of("A"), (std::vector<std::string>{"A", "C", "Leaf", "B"}));
  EXPECT_EQ(index.subclasses_of("Self"), (std::vector<std::string>{"Self"}));
}

TEST(ProjectIndex, LookupsDoNotDependOnInsertionOrder) {
  std::vector<Fact> facts = {
      Fact{"dataparallel-wrap", "Tagger", "train.py", 40, {"nn.DataParallel", "model"}},
      Fact{"dataparallel-wrap", "Tagger", "eval.py", 12, {"DP", "model"}},
      Fact{"dataparallel-wrap", "Tagger", "train.py", 7, {"nn.DataParallel", "model"}},
      class_fact("Tagger", "model.py", 8, {"torch.nn.Module"}),
      class_fact("CRFTagger", "crf.py", 3, {"model.Tagger"}),
      class_fact("BeamTagger", "beam.py", 3, {"model.Tagger"}),
  };
  auto build = [](std::vector<Fact> fs) {
    auto index = std::make_unique<ProjectIndex>();
    index->add_all(std::move(fs));
    index->finalize();
    return index;
  };
  auto forward = build(facts);
  std::reverse(facts.begin(), facts.end());
  auto backward = build(facts);
  for (const auto* index : {forward.get(), backward.get()}) {
    auto wraps = index->find("dataparallel-wrap", "Tagger");
    ASSERT_EQ(wraps.size(), 3u);
    EXPECT_EQ(wraps[0]->file + ":" + std::to_string(wraps[0]->line), "eval.py:12");
    EXPECT_EQ(wraps[1]->file + ":" + std::to_string(wraps[1]->line), "train.py:7");
    EXPECT_EQ(wraps[2]->file + ":" + std::to_string(wraps[2]->line), "train.py:40");
    EXPECT_EQ(index->subclasses_of("Tagger"), (std::vector<std::string>{"Tagger", "BeamTagger", "CRFTagger"}));
  }
  EXPECT_TRUE(forward->find("dataparallel-wrap", "Other").empty());
  EXPECT_TRUE(forward->find("submodule", "Tagger").empty());
}

// --- findings resolved through the index ---------------------------------------

const char* kTaggerModel = R"(import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Tagger(nn.Module):
    def __init__(self, vocab, tags):
        super().__init__()
        self.embed = nn.Embedding(vocab, 64)
        self.lstm = nn.LSTM(64, 64, batch_first=True)
        self.proj = nn.Linear(64, tags)

    def forward(self, tokens, lengths):
        embedded = self.embed(tokens)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(output, batch_first=True)
        return self.proj(output)
)";

std::vector<Diagnostic> of_rule(const RunResult& r, std::string_view rule) {
  std::vector<Diagnostic> out;
  for (const auto& d : r.diagnostics)
    if (d.rule_id == rule) out.push_back(d);
  return out;
}

TEST(CrossFileResolution, DataParallelWrapInAnotherFileNamesTheWrap) {
  std::vector<SourceFile> files = {
      {"proj/model.py", kTaggerModel},
      {"proj/train.py",
       "import torch\nfrom torch import nn\n\nfrom model import Tagger\n\nmodel = Tagger(100, 9).cuda()\n"
       "if torch.cuda.device_count() > 1:\n    model = nn.DataParallel(model)\n"},
  };
  RunResult r = run_sources(files, Config{});
  auto found = of_rule(r, "TL005");
  ASSERT_EQ(found.size(), 1u);
  const Diagnostic& d = found[0];
  EXPECT_EQ(d.path, "proj/model.py");
  EXPECT_EQ(d.start.line, 16u);
  EXPECT_EQ(d.start.column, 20u);
  EXPECT_EQ(d.message,
            "`pad_packed_sequence` without `total_length` in `Tagger.forward`, and `Tagger` is replicated by "
            "`nn.DataParallel` at proj/train.py:8: each replica pads its slice of the batch to that slice's "
            "longest sequence, so the outputs gathered from the replicas disagree in length");
  ASSERT_TRUE(d.fix.has_value());
  EXPECT_EQ(d.fix->safety, FixSafety::Unsafe);
  int applied = 0;
  std::string fixed = apply_edits(kTaggerModel, d.fix->edits, &applied);
  EXPECT_EQ(applied, 1);
  EXPECT_NE(fixed.find("pad_packed_sequence(output, batch_first=True, total_length=embedded.size(1))"),
            std::string::npos);
}

TEST(CrossFileResolution, NoWrapNoFinding) {
  std::vector<SourceFile> files = {
      {"proj/model.py", kTaggerModel},
      {"proj/train.py", "from model import Tagger\n\nmodel = Tagger(100, 9).cuda()\n"},
  };
  EXPECT_TRUE(of_rule(run_sources(files, Config{}), "TL005").empty());
}

TEST(CrossFileResolution, ConfiguredWrapperCounts) {
  std::vector<SourceFile> files = {
      {"proj/model.py", kTaggerModel},
      {"proj/train.py",
       "from parallel import BalancedDataParallel\nfrom model import Tagger\n\n"
       "model = BalancedDataParallel(8, Tagger(100, 9), dim=0)\nother = BalancedDataParallel(module=Tagger(1, 2))\n"},
  };
  EXPECT_TRUE(of_rule(run_sources(files, Config{}), "TL005").empty());
  Config config;
  config.extra_data_parallel = {"BalancedDataParallel"};
  auto found = of_rule(run_sources(files, config), "TL005");
  ASSERT_EQ(found.size(), 1u);
  // An in-house wrapper may take the module anywhere: the first wrap, on line 4, passes it second.
  EXPECT_NE(found[0].message.find("`BalancedDataParallel` at proj/train.py:4"), std::string::npos)
      << found[0].message;
}

TEST(CrossFileResolution, SameClassNameInAnotherDirectoryIsNotWrapped) {
  std::vector<SourceFile> files = {
      {"a/model.py", kTaggerModel},
      {"a/train.py", "from torch import nn\nfrom model import Tagger\n\nmodel = nn.DataParallel(Tagger(1, 2))\n"},
      {"b/model.py", kTaggerModel},
      {"b/train.py", "from model import Tagger\n\nmodel = Tagger(1, 2)\n"},
  };
  auto found = of_rule(run_sources(files, Config{}), "TL005");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, "a/model.py");
}

TEST(CrossFileResolution, PackageImportsResolveFromAnAncestorDirectory) {
  std::vector<SourceFile> files = {
      {"src/nlp/models/tagger.py", kTaggerModel},
      {"src/nlp/scripts/train.py",
       "import torch\nfrom nlp.models.tagger import Tagger as T\n\nnet = torch.nn.DataParallel(T(1, 2))\n"},
  };
  auto found = of_rule(run_sources(files, Config{}), "TL005");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("`torch.nn.DataParallel` at src/nlp/scripts/train.py:4"), std::string::npos)
      << found[0].message;
}

TEST(CrossFileResolution, ModuleAncestryInAnotherFileDecidesTL003) {
  const char* model = R"(import torch
from base import Base


class Probe(Base):
    def forward(self, x):
        h = torch.tanh(x)
        self.hidden = (h, x * 2)
        return h
)";
  std::vector<SourceFile> as_module = {
      {"base.py", "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n"},
      {"probe.py", model},
  };
  auto found = of_rule(run_sources(as_module, Config{}), "TL003");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].start.line, 8u);
  EXPECT_EQ(found[0].start.column, 8u);
  ASSERT_TRUE(found[0].fix.has_value());
  EXPECT_EQ(found[0].fix->safety, FixSafety::Unsafe);
  int applied = 0;
  std::string fixed = apply_edits(model, found[0].fix->edits, &applied);
  EXPECT_NE(fixed.find("self.hidden = (h.detach(), (x * 2).detach())"), std::string::npos) << fixed;

  std::vector<SourceFile> as_plain_class = {
      {"base.py", "class Base:\n    pass\n"},
      {"probe.py", model},
  };
  EXPECT_TRUE(of_rule(run_sources(as_plain_class, Config{}), "TL003").empty());
  // Without the base's file nothing says Probe is a module.
  EXPECT_TRUE(of_rule(run_sources({{"probe.py", model}}, Config{}), "TL003").empty());
}

}  // namespace
