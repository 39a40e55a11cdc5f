// Imports resolved to the project's other files (python/project.h) and what
// the engine learns from them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "python/model.h"
#include "python/project.h"

namespace fs = std::filesystem;
using namespace torchleak;
using namespace torchleak::python;

namespace {

class ProjectModules : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("torchleak-modules-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string write(const std::string& rel, const std::string& text = "") {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string rel(const std::string& found) const {
    return found.empty() ? "" : fs::path(found).lexically_relative(root_).generic_string();
  }

  fs::path root_;
};

TEST_F(ProjectModules, ScriptImportsFromItsOwnDirectoryOnly) {
  std::string script = write("scripts/train.py");
  write("scripts/helpers.py");
  write("model.py");
  EXPECT_EQ(rel(find_module_file(script, "helpers", 0)), "scripts/helpers.py");
  // No project root above: a loose script does not see its parent's files.
  EXPECT_EQ(find_module_file(script, "model", 0), "");
  EXPECT_EQ(find_module_file(script, "torch", 0), "");
}

TEST_F(ProjectModules, AbsoluteImportsClimbToTheProjectRoot) {
  write("pyproject.toml");
  std::string script = write("pkg/train/run.py");
  write("pkg/__init__.py");
  write("pkg/models/__init__.py");
  write("pkg/models/net.py");
  EXPECT_EQ(rel(find_module_file(script, "pkg.models.net", 0)), "pkg/models/net.py");
  EXPECT_EQ(rel(find_module_file(script, "pkg.models", 0)), "pkg/models/__init__.py");
  EXPECT_EQ(find_module_file(script, "pkg.missing", 0), "");
}

TEST_F(ProjectModules, RelativeImportsStartFromThePackage) {
  std::string file = write("pkg/models/net.py");
  write("pkg/models/__init__.py");
  write("pkg/models/layers.py");
  write("pkg/utils.py");
  EXPECT_EQ(rel(find_module_file(file, "layers", 1)), "pkg/models/layers.py");
  EXPECT_EQ(rel(find_module_file(file, "utils", 2)), "pkg/utils.py");
  EXPECT_EQ(rel(find_module_file(file, "", 1)), "pkg/models/__init__.py");
  // A module never resolves to the file importing it.
  EXPECT_EQ(find_module_file(file, "net", 1), "");
}

TEST_F(ProjectModules, ValuesComeFromTheDefiningFile) {
  write("pyproject.toml");
  write("lib/__init__.py", "from .encode import embed, DEVICE\n");
  write("lib/encode.py",
        "import torch\n"
        "DEVICE = torch.device('cuda')\n"
        "def embed(model, x):\n"
        "    with torch.no_grad():\n"
        "        return model(x.to(DEVICE))\n");
  std::string text =
      "from lib import embed, DEVICE\n"
      "def run(model, x):\n"
      "    e = embed(model, x)\n"
      "    d = x.to(DEVICE)\n";
  std::string path = write("app/run.py", text);
  Config config;
  begin_file_analysis();
  Model m(text, config, path);
  const Binding* e = m.reaching("e", static_cast<uint32_t>(text.size()), 0);
  const Binding* d = m.reaching("d", static_cast<uint32_t>(text.size()), 0);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(d, nullptr);
  Value embedded = m.value(e->value);
  EXPECT_EQ(embedded.grad, Provenance::Detached);
  EXPECT_EQ(embedded.device, Device::Accelerator);
  EXPECT_EQ(m.value(d->value).device, Device::Accelerator);
  // Without its path, a model follows no import.
  Model alone(text, config);
  EXPECT_NE(alone.value(alone.reaching("e", static_cast<uint32_t>(text.size()), 0)->value).device,
            Device::Accelerator);
}

// A model built for another file's analysis follows no import for the value
// engine (every answer depends on two files at most), but a rule that walks
// a chain of files itself asks it one import at a time.
TEST_F(ProjectModules, ImportedDefinitionsAreFoundFromAForeignModel) {
  write("pyproject.toml");
  write("data/base.py", "class Crops:\n    pass\n\ndef jitter(x):\n    return x\n");
  write("data/city.py", "from data.base import Crops\nfrom data import base\n\nclass City(Crops):\n    pass\n");
  std::string text = "from data.city import City\nloader = City()\n";
  std::string path = write("train.py", text);
  Config config;
  begin_file_analysis();
  Model m(text, config, path);
  auto city = m.foreign_import("City");
  ASSERT_TRUE(city.has_value());
  ASSERT_GE(city->cls, 0);
  const Model& other = *city->model;
  EXPECT_EQ(rel(other.path()), "data/city.py");
  const Class& cls = other.classes()[static_cast<size_t>(city->cls)];
  TSNode base = ts_node_named_child(ts_node_child_by_field_name(cls.node, "superclasses", 12), 0);
  EXPECT_FALSE(other.foreign_definition(base).has_value());
  auto crops = other.imported_definition(base);
  ASSERT_TRUE(crops.has_value());
  EXPECT_EQ(rel(crops->model->path()), "data/base.py");
  EXPECT_EQ(crops->model->classes()[static_cast<size_t>(crops->cls)].name, "Crops");
  // `base.jitter`, through a module import.
  std::string jitter_text = "from data import base\nbase.jitter(1)\n";
  std::string jitter_path = write("data/use.py", jitter_text);
  Model user(jitter_text, config, jitter_path, /*resolves_imports=*/false);
  ASSERT_EQ(user.calls().size(), 1u);
  auto jitter = user.imported_definition(user.calls()[0].func);
  ASSERT_TRUE(jitter.has_value());
  ASSERT_NE(jitter->function, nullptr);
  EXPECT_EQ(jitter->function->name, "jitter");
  EXPECT_FALSE(user.foreign_definition(user.calls()[0].func).has_value());
}

// What a kept model resolved for one file's analysis is asked again for the
// next: the file it named may have changed (and its old model be gone).
TEST_F(ProjectModules, ImportedDefinitionsAreNotKeptAcrossAnalyses) {
  write("pyproject.toml");
  write("data/base.py", "class Crops:\n    pass\n");
  write("data/city.py", "from data.base import Crops\n\nclass City(Crops):\n    pass\n");
  std::string text = "from data.city import City\n";
  std::string path = write("train.py", text);
  Config config;
  auto base_of_city = [&]() -> std::optional<ForeignDefinition> {
    Model m(text, config, path);
    auto city = m.foreign_import("City");
    if (!city || city->cls < 0) return std::nullopt;
    const Class& cls = city->model->classes()[static_cast<size_t>(city->cls)];
    return city->model->imported_definition(
        ts_node_named_child(ts_node_child_by_field_name(cls.node, "superclasses", 12), 0));
  };
  begin_file_analysis();
  auto first = base_of_city();
  ASSERT_TRUE(first.has_value());
  EXPECT_GE(first->cls, 0);
  write("data/base.py", "class Renamed:\n    pass\n\n\nCROPS = None\n");
  begin_file_analysis();
  EXPECT_FALSE(base_of_city().has_value());
}

}  // namespace
