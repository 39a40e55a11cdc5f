// TL011 oversized-layer: the estimate's numbers and their formatting (three
// significant digits, decimal units for parameters, binary ones for bytes),
// the boundary of the threshold, and a threshold from the configuration.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/engine.h"

using namespace torchleak;

namespace {

using Finding = std::tuple<uint32_t, uint32_t, std::string>;  // line, 1-based column, message

std::vector<Finding> findings(const std::string& source, uint64_t threshold = uint64_t{1} << 30) {
  Config c;
  c.select = {"TL011"};
  c.oversized_layer_bytes = threshold;
  RunResult r = run_sources({{"model.py", source}}, c);
  EXPECT_TRUE(r.errors.empty());
  std::vector<Finding> out;
  for (const auto& d : r.diagnostics) out.emplace_back(d.start.line, d.start.column + 1, d.message);
  return out;
}

TEST(TL011, MessageGivesParametersWeightsAndTrainingBytes) {
  EXPECT_EQ(findings("import torch.nn as nn\n"
                     "mix = nn.Linear(100000, 100000)\n"),
            (std::vector<Finding>{{2, 7,
                                   "nn.Linear(100000, 100000): 10.0 G parameters, 37.3 GiB of fp32 weights, "
                                   "149 GiB with gradients and Adam state"}}));
}

// 8192 * 8192 parameters are exactly 1 GiB with gradients and Adam state: not
// more than the threshold. The bias tips it over.
TEST(TL011, ThresholdIsExclusive) {
  EXPECT_EQ(findings("import torch.nn as nn\n"
                     "a = nn.Linear(8192, 8192, bias=False)\n"
                     "b = nn.Linear(8192, 8192)\n"
                     "from torch.optim import SGD\n"
                     "SGD(b.parameters(), lr=0.1)\n"),
            (std::vector<Finding>{{3, 5,
                                   "nn.Linear(8192, 8192): 67.1 M parameters, 256 MiB of fp32 weights, "
                                   "1.00 GiB with gradients and Adam state"}}));
}

TEST(TL011, RecurrentLayersCountEveryLayerAndDirection) {
  EXPECT_EQ(findings("from torch import nn\n"
                     "rnn = nn.RNN(4096, 4096, 3, bias=False, bidirectional=True)\n"
                     "rnn(x)[0].sum().backward()\n"),
            (std::vector<Finding>{{2, 7,
                                   "nn.RNN(4096, 4096, num_layers=3, bias=False, bidirectional=True): 268 M "
                                   "parameters, 1.00 GiB of fp32 weights, 4.00 GiB with gradients and Adam state"}}));
}

const char* kSmallLayers = R"(import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, vocab=1000, width=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, 999)
        self.rnn = nn.LSTM(1024, 1024, proj_size=256)
        self.conv = nn.Conv2d(width, width, 3)
        self.out = nn.Linear(self.hidden, vocab)
)";

// The same, with the code that trains it.
const std::string kTrainedSmallLayers = std::string(kSmallLayers) +
                                        "\n\nfrom torch.optim import Adam\n"
                                        "optimizer = Adam(Tagger().parameters())\n";

TEST(TL011, DefaultThresholdLetsSmallLayersPass) { EXPECT_TRUE(findings(kSmallLayers).empty()); }

// oversized-layer-threshold = 1 MiB: every layer with a known size is over it,
// and the message scales its units down (K parameters, MiB).
TEST(TL011, ConfiguredThresholdAndSmallerUnits) {
  EXPECT_EQ(findings(kSmallLayers, uint64_t{1} << 20),
            (std::vector<Finding>{
                {7, 22,
                 "nn.Embedding(1000, 999): 999 K parameters, 3.81 MiB of fp32 weights, 15.2 MiB with gradients "
                 "and Adam state"},
                {8, 20,
                 "nn.LSTM(1024, 1024, proj_size=256): 5.51 M parameters, 21.0 MiB of fp32 weights, 84.1 MiB with "
                 "gradients and Adam state"},
                {9, 21,
                 "nn.Conv2d(2048, 2048, 3): 37.8 M parameters, 144 MiB of fp32 weights, 576 MiB with gradients "
                 "and Adam state"},
            }));
}

// Between the two: 576 MiB is over a 512 MiB threshold, 84.1 MiB is not.
TEST(TL011, ThresholdBetweenTwoLayers) {
  auto f = findings(kTrainedSmallLayers, uint64_t{512} << 20);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(std::get<0>(f[0]), 9u);
}

// Nothing trains the Tagger: its layers are judged by their fp32 weights,
// and the convolution's 144 MiB is under 512 MiB; over 128 MiB it is not.
TEST(TL011, WeightsAloneWhenNothingTrains) {
  EXPECT_TRUE(findings(kSmallLayers, uint64_t{512} << 20).empty());
  auto f = findings(kSmallLayers, uint64_t{128} << 20);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(std::get<0>(f[0]), 9u);
}

TEST(TL011, UnknownSizesAreSilent) {
  EXPECT_TRUE(findings("import torch.nn as nn\n"
                       "import os\n"
                       "N = int(os.environ['N'])\n"
                       "def build(n, m=None):\n"
                       "    return nn.Linear(n, N), nn.Embedding(m, 100000), nn.Linear(*[100000, 100000])\n",
                       1)
                  .empty());
}

}  // namespace
