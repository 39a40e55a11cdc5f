// TL011 oversized-layer in LibTorch code: the same estimate and message as
// for Python (tests/unit/tl011_test.cpp), the layer as the code names it
// with its constant sizes evaluated by Clang, and the threshold from the
// configuration.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/engine.h"

namespace fs = std::filesystem;
using namespace torchleak;

namespace {

using Finding = std::tuple<uint32_t, uint32_t, std::string>;  // line, 1-based column, message

const char* kLayers = R"(#include <torch/torch.h>

constexpr int64_t kVocabulary = 1'000'000;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    a = register_module("a", torch::nn::Linear(100000, 100000));
    b = register_module("b", torch::nn::Linear(torch::nn::LinearOptions(8192, 8192).bias(false)));
    c = register_module("c", torch::nn::Linear(8192, 8192));
    d = register_module("d", torch::nn::Conv2d(torch::nn::Conv2dOptions(4096, 4096, {3, 3}).bias(false)));
    e = register_module("e", torch::nn::Embedding(kVocabulary, 512));
  }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
  torch::nn::Conv2d d{nullptr};
  torch::nn::Embedding e{nullptr};
};

int main() { NetImpl net; }
)";

std::vector<Finding> findings(uint64_t threshold) {
  std::string tmpl = (fs::temp_directory_path() / "torchleak-tl011-XXXXXX").string();
  fs::path dir = ::mkdtemp(tmpl.data());
  fs::path path = dir / "model.cpp";
  std::ofstream(path, std::ios::binary) << kLayers;
  Config c;
  c.select = {"TL011"};
  c.oversized_layer_bytes = threshold;
  c.cpp_cache_dir = TORCHLEAK_TEST_CACHE_DIR;
  RunResult r = run_sources({{path.string(), kLayers}}, c);
  for (const auto& e : r.errors) ADD_FAILURE() << e.message;
  std::vector<Finding> out;
  for (const auto& d : r.diagnostics) out.emplace_back(d.start.line, d.start.column + 1, d.message);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return out;
}

TEST(TL011Cpp, MessageGivesParametersWeightsAndTrainingBytes) {
  EXPECT_EQ(findings(uint64_t{1} << 30),
            (std::vector<Finding>{
                {7, 30,
                 "torch::nn::Linear(100000, 100000): 10.0 G parameters, 37.3 GiB of fp32 weights, 149 GiB with "
                 "gradients and Adam state"},
                // 8192 x 8192 without bias is exactly 1 GiB: not above the threshold; the bias tips it over.
                {9, 30,
                 "torch::nn::Linear(8192, 8192): 67.1 M parameters, 256 MiB of fp32 weights, 1.00 GiB with "
                 "gradients and Adam state"},
                {10, 48,
                 "torch::nn::Conv2dOptions(4096, 4096, {3, 3}).bias(false): 151 M parameters, 576 MiB of fp32 "
                 "weights, 2.25 GiB with gradients and Adam state"},
                {11, 30,
                 "torch::nn::Embedding(1000000, 512): 512 M parameters, 1.91 GiB of fp32 weights, 7.63 GiB with "
                 "gradients and Adam state"},
            }));
}

TEST(TL011Cpp, ThresholdComesFromTheConfiguration) {
  std::vector<Finding> got = findings(uint64_t{8} << 30);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::get<0>(got[0]), 7u);
}

}  // namespace
