// Checks whose catalogue entries have not landed yet (TL007, TL010) run here
// directly, through the translation-unit driver, on one LibTorch program with
// positives and look-alikes; their fixtures join fixtures/cpp with the entries.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "checks/cpp/check.h"
#include "cpp/compilation.h"
#include "cpp/driver.h"
#include "cpp/pch.h"
#include "cpp/translation_unit.h"

namespace fs = std::filesystem;
using namespace torchleak::cpp;

namespace {

const char* kProgram = R"(#include <torch/torch.h>

struct Net : torch::nn::Module {
  Net() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};

int main() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto opt = std::make_shared<torch::optim::Adam>(model->parameters());
  for (int i = 0; i < 4; ++i) {
    auto loss = model->forward(torch::randn({2, 4})).sum();
    loss.backward({}, /*retain_graph=*/true);
    optimizer.step();
  }
  for (int i = 0; i < 4; ++i) {
    auto loss = model->forward(torch::randn({2, 4})).sum();
    torch::autograd::backward({loss}, {}, true);
    opt->step();
  }
  for (int i = 0; i < 4; ++i) {
    optimizer.zero_grad();
    auto loss = model->forward(torch::randn({2, 4})).sum();
    loss.backward({}, false);
    optimizer.step();
  }
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 4; ++i) {
      auto loss = model->forward(torch::randn({2, 4})).sum();
      loss.backward();
      if (i % 2 == 1) {
        optimizer.step();
        optimizer.zero_grad();
      }
    }
  }
  auto once = model->forward(torch::randn({2, 4})).sum();
  once.backward({}, true);
  for (int i = 0; i < 4; ++i) optimizer.step();
}
)";

std::vector<std::pair<std::string, uint32_t>> findings_of(const std::vector<std::string>& rules) {
  std::string path = (fs::temp_directory_path() / "torchleak-pending-rules.cpp").string();
  auto env = [](const char* n) -> const char* { return std::getenv(n); };
  CompileCommand command = fallback_command(path, env);
  TuRequest request;
  request.path = path;
  request.text = kProgram;
  request.directory = command.directory;
  request.args = syntax_only_arguments(command.argv, path, {}, {});
  PchCache cache(TORCHLEAK_TEST_CACHE_DIR);
  PchCache::Result pch = cache.get(request.args, path, request.directory);
  if (!pch.path.empty()) request.args.insert(request.args.begin() + 1, {"-include-pch", pch.path});
  for (const RegisteredCheck& c : registered_checks())
    if (std::find(rules.begin(), rules.end(), c.rule_id) != rules.end()) request.checks.push_back(&c);
  EXPECT_EQ(request.checks.size(), rules.size());
  TuResult result = analyze_translation_unit(request);
  EXPECT_TRUE(result.parsed) << (result.errors.empty() ? "" : result.errors.front().message);
  std::vector<std::pair<std::string, uint32_t>> out;
  std::string_view text = kProgram;
  for (const TuFinding& f : result.findings) {
    uint32_t line = 1 + static_cast<uint32_t>(std::count(text.begin(), text.begin() + f.start_byte, '\n'));
    out.emplace_back(f.rule_id, line);
  }
  return out;
}

TEST(PendingRules, RetainGraphInLoopAndMissingZeroGrad) {
  using Found = std::vector<std::pair<std::string, uint32_t>>;
  Found got = findings_of({"TL007", "TL010"});
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(got, (Found{{"TL007", 15}, {"TL010", 16}, {"TL007", 20}, {"TL010", 21}}));
}

}  // namespace
