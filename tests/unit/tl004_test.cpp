// TL004 missing-worker-init-fn: what the fixture runner cannot reach with its
// default configuration (target-torch-version), and the cross-file name
// resolution that decides which class a DataLoader's dataset is.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/engine.h"
#include "disk_project.h"

using namespace torchleak;

namespace {

using TL004Project = torchleak::testing::DiskProject;

using Finding = std::tuple<std::string, std::string, uint32_t, uint32_t>;  // path, rule, line, 1-based column

std::vector<Finding> findings(const RunResult& r, const std::string& rule = "TL004") {
  std::vector<Finding> out;
  for (const auto& d : r.diagnostics)
    if (d.rule_id == rule) out.emplace_back(d.path, d.rule_id, d.start.line, d.start.column + 1);
  return out;
}

Config with_torch(std::string version) {
  Config c;
  c.select = {"TL004"};
  c.target_torch_version = std::move(version);
  return c;
}

// numpy's global RNG in __getitem__, two loaders: one with workers, one without.
const char* kGlobalNumpy = R"(import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class RandomFlips(Dataset):
    def __init__(self, images):
        self.images = images

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index]
        if np.random.rand() < 0.5:
            image = image[:, ::-1].copy()
        return torch.from_numpy(image)


train = DataLoader(RandomFlips([]), batch_size=32, num_workers=4)
debug = DataLoader(RandomFlips([]), batch_size=32)
)";

TEST(TL004, GlobalNumpyRngCountsBeforeTorch19) {
  RunResult r = run_sources({{"flips.py", kGlobalNumpy}}, with_torch("1.8"));
  ASSERT_TRUE(r.errors.empty());
  EXPECT_EQ(findings(r), (std::vector<Finding>{{"flips.py", "TL004", 20, 9}}));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  const Diagnostic& d = r.diagnostics[0];
  EXPECT_NE(d.message.find("`RandomFlips`"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("`np.random.rand`, line 15"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("target-torch-version 1.8"), std::string::npos) << d.message;
  EXPECT_NE(d.help.find("np.random.seed(torch.utils.data.get_worker_info().seed % 2**32)"), std::string::npos)
      << d.help;
}

TEST(TL004, GlobalNumpyRngIsReseededFromTorch19) {
  EXPECT_TRUE(findings(run_sources({{"flips.py", kGlobalNumpy}}, with_torch("1.9"))).empty());
  EXPECT_TRUE(findings(run_sources({{"flips.py", kGlobalNumpy}}, with_torch("2.4"))).empty());
  EXPECT_TRUE(findings(run_sources({{"flips.py", kGlobalNumpy}}, with_torch(""))).empty());
}

// A generator object is a bug on every version; the message names the
// dataset, the generator and where it is created, in the dataset's file.
TEST_F(TL004Project, GeneratorInAnotherFileIsNamedWithItsLine) {
  const char* dataset = R"(import numpy as np
from torch.utils.data import Dataset


class Jitter(Dataset):
    def __init__(self, points, seed=0):
        self.points = points
        self.rng = np.random.default_rng(seed)

    def __getitem__(self, index):
        return self.points[index] + self.rng.normal(size=3)
)";
  const char* train = R"(from torch.utils.data import DataLoader

from data.jitter import Jitter

loader = DataLoader(dataset=Jitter([]), num_workers=2)
)";
  for (const char* version : {"1.8", "2.4"}) {
    RunResult r = run({{"data/jitter.py", dataset}, {"train.py", train}}, with_torch(version));
    ASSERT_EQ(findings(r), (std::vector<Finding>{{"train.py", "TL004", 5, 10}})) << version;
    const Diagnostic& d = r.diagnostics[0];
    EXPECT_NE(d.message.find("`Jitter` draws from `self.rng = np.random.default_rng(seed)` (created once in "
                             "`Jitter.__init__`, data/jitter.py:8)"),
              std::string::npos)
        << d.message;
    EXPECT_NE(d.help.find("info.dataset.rng = np.random.default_rng(info.seed)"), std::string::npos) << d.help;
  }
}

// Two classes share a simple name; the import decides which one the loader uses.
TEST_F(TL004Project, ImportDecidesBetweenClassesOfTheSameName) {
  const char* random_version = R"(import random
from torch.utils.data import Dataset


class Clips(Dataset):
    def __init__(self):
        self.rng = random.Random(0)

    def __getitem__(self, i):
        return self.rng.random()
)";
  const char* plain_version = R"(from torch.utils.data import Dataset


class Clips(Dataset):
    def __getitem__(self, i):
        return i
)";
  auto train = [](const char* module) {
    return std::string("from torch.utils.data import DataLoader\nfrom ") + module +
           " import Clips\n\nloader = DataLoader(Clips(), num_workers=2)\n";
  };
  std::vector<SourceFile> files = {{"augmented/clips.py", random_version}, {"plain/clips.py", plain_version}};
  files.push_back({"train.py", train("plain.clips")});
  EXPECT_TRUE(findings(run(files, with_torch(""))).empty());
  files.back().text = train("augmented.clips");
  EXPECT_EQ(findings(run(files, with_torch(""))), (std::vector<Finding>{{"train.py", "TL004", 4, 10}}));
  // Not in the analyzed files at all: silent.
  files.back().text = train("vendor.clips");
  EXPECT_TRUE(findings(run(files, with_torch(""))).empty());
}

}  // namespace
