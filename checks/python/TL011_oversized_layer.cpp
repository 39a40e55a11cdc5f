// TL011 oversized-layer: a layer whose parameters alone, with their
// gradients and Adam's two moment buffers (4 fp32 copies), need more memory
// than the configured threshold (Config::oversized_layer_bytes).
//
// Sizes are folded by the engine (python/fold.h): integer literals,
// arithmetic, names bound once, parameter defaults and constants imported
// from the project's other files. A layer built in a loop over a literal
// list of sizes (`for rows in TABLE_ROWS:`) is estimated for each and the
// largest counts. A size that does not fold makes the layer unknown: silent. An
// optional argument that does not fold (bias, num_layers, bidirectional)
// takes the value that gives fewer parameters, so the estimate is a lower
// bound.
//
// Numbers in the message are written by checks/size_format.h, shared with
// the C++ check.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "checks/python/check.h"
#include "core/project_index.h"
#include "checks/size_format.h"
#include "rule_messages.h"
#include "python/fold.h"

namespace torchleak::python {

namespace {

// Sizes beyond 2^40 are not layers anyone builds; the bound keeps every
// product below in 128 bits.
constexpr int64_t kMaxSize = int64_t{1} << 40;
constexpr int64_t kMaxKernelSide = 4096;
constexpr uint64_t kTrainingCopies = 4;  // weights, gradients, Adam's exp_avg and exp_avg_sq
constexpr uint64_t kFp32 = 4;
// Parameter counts are computed in 128 bits and checked against the 64-bit
// byte counts they must fit.
__extension__ typedef unsigned __int128 U128;

enum class Layer { Linear, Embedding, Bilinear, Conv, Recurrent };

struct LayerKind {
  std::string_view name;  // after "torch.nn."
  Layer layer;
  int dims = 0;   // convolutions: 1, 2 or 3
  int gates = 0;  // recurrent layers: 4 (LSTM), 3 (GRU), 1 (RNN)
};

constexpr LayerKind kLayers[] = {
    {"Linear", Layer::Linear},
    {"Embedding", Layer::Embedding},
    {"EmbeddingBag", Layer::Embedding},
    {"Bilinear", Layer::Bilinear},
    {"Conv1d", Layer::Conv, 1},
    {"Conv2d", Layer::Conv, 2},
    {"Conv3d", Layer::Conv, 3},
    {"ConvTranspose1d", Layer::Conv, 1},
    {"ConvTranspose2d", Layer::Conv, 2},
    {"ConvTranspose3d", Layer::Conv, 3},
    {"LSTM", Layer::Recurrent, 0, 4},
    {"GRU", Layer::Recurrent, 0, 3},
    {"RNN", Layer::Recurrent, 0, 1},
};

const LayerKind* layer_kind(std::string_view callee) {
  for (std::string_view prefix : {"torch.nn.", "torch.nn.modules."}) {
    if (callee.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = callee.substr(prefix.size());
    if (size_t dot = rest.rfind('.'); dot != std::string_view::npos && prefix == "torch.nn.modules.")
      rest = rest.substr(dot + 1);  // torch.nn.modules.linear.Linear
    for (const LayerKind& k : kLayers)
      if (k.name == rest) return &k;
  }
  return nullptr;
}

struct Estimate {
  uint64_t parameters = 0;
  std::vector<std::string> shown;  // the arguments as the message shows them
};

class OversizedLayer final : public Check {
 public:
  void check(CheckContext& ctx) const override {
    const Model& m = ctx.model();
    for (const Call& c : m.calls()) {
      const LayerKind* kind = layer_kind(c.callee);
      if (!kind || has_splat(c)) continue;
      std::optional<Estimate> e = estimate(m, c, *kind);
      if (!e) continue;
      uint64_t fp32 = 0, training = 0;
      if (__builtin_mul_overflow(e->parameters, kFp32, &fp32) ||
          __builtin_mul_overflow(fp32, kTrainingCopies, &training))
        continue;
      uint64_t threshold = ctx.config().oversized_layer_bytes;
      if (training <= threshold) continue;
      std::string args;
      for (const std::string& a : e->shown) args += (args.empty() ? "" : ", ") + a;
      Diagnostic d = ctx.diagnostic(
          c.node, fmt::format(fmt::runtime(messages::TL011::oversized),
                              fmt::arg("layer", fmt::format("{}({})", code_snippet(m.text(c.func)), args)),
                              fmt::arg("parameters", size_format::parameter_count(e->parameters)),
                              fmt::arg("weights", size_format::bytes(fp32)),
                              fmt::arg("training", size_format::bytes(training))));
      d.help = fmt::format(fmt::runtime(messages::TL011::help),
                           fmt::arg("threshold", size_format::bytes(ctx.config().oversized_layer_bytes)));
      // Gradients and Adam's state exist only for a layer something trains.
      // Too large in its weights alone, it is a finding whatever the use.
      if (fp32 > threshold) {
        ctx.report(std::move(d));
        continue;
      }
      // Else the project must train it: the file trains and the layer sits
      // outside a class, or the class holding it (or a class holding that
      // one, through constructions) is built or defined in a file that trains.
      int method = c.function;
      while (method >= 0 && m.functions()[method].cls < 0) method = m.functions()[method].parent;
      if (method < 0) {
        if (m.trains()) ctx.report(std::move(d));
        continue;
      }
      std::string holder = m.classes()[static_cast<size_t>(m.functions()[method].cls)].name;
      ctx.defer(std::move(d), [holder](const ProjectIndex& index, Diagnostic&) { return trained(index, holder); });
    }
  }

 private:
  // Whether a file that trains defines or builds `cls`, or a class that
  // holds it (breadth first over the classes whose methods construct it).
  static bool trained(const ProjectIndex& index, const std::string& cls) {
    std::vector<std::string> work{cls};
    std::vector<std::string> seen{cls};
    for (size_t i = 0; i < work.size() && i < 64; ++i) {
      if (!index.find("trained-here", work[i]).empty()) return true;
      for (const Fact* f : index.find("constructed-by", work[i])) {
        const std::string& by = f->values.empty() ? std::string() : f->values.front();
        if (by.empty() || std::find(seen.begin(), seen.end(), by) != seen.end()) continue;
        seen.push_back(by);
        work.push_back(by);
      }
    }
    return false;
  }

  static bool has_splat(const Call& c) {
    uint32_t n = is_null(c.args) ? 0 : ts_node_named_child_count(c.args);
    for (uint32_t i = 0; i < n; ++i) {
      Kind k = kind_of(ts_node_named_child(c.args, i));
      if (k == Kind::ListSplat || k == Kind::DictionarySplat) return true;
    }
    return false;
  }

  // An argument by position or by keyword.
  static TSNode argument(const Model& m, const Call& c, uint32_t position, std::string_view keyword) {
    TSNode kw = m.keyword_argument(c, keyword);
    return is_null(kw) ? m.positional_argument(c, position) : kw;
  }

  static std::optional<int64_t> size(const Folder& f, const Model& m, const Call& c, uint32_t position,
                                     std::string_view keyword) {
    auto v = f.integer(argument(m, c, position, keyword));
    if (!v || *v <= 0 || *v > kMaxSize) return std::nullopt;
    return v;
  }

  // bias: true when absent or folding to True; a value that does not fold
  // counts as False (the lower bound).
  static bool flag(const Folder& f, const Model& m, const Call& c, uint32_t position, std::string_view keyword,
                   bool absent) {
    TSNode a = argument(m, c, position, keyword);
    if (is_null(a)) return absent;
    return f.boolean(a).value_or(false);
  }

  // The estimate of the layer `c` builds; inside a loop over a literal list
  // of integers (`for rows in TABLE_ROWS:`), the largest of the layers built
  // with each element.
  static std::optional<Estimate> estimate(const Model& m, const Call& c, const LayerKind& kind) {
    Folder f(m, c.function);
    for (int loop : m.enclosing_loops(start_byte(c.node), c.function)) {
      const Loop& l = m.loops()[loop];
      if (l.kind != LoopKind::For) continue;
      TSNode target = unparenthesize(field(l.node, "left"));
      if (kind_of(target) != Kind::Identifier || !m.mentions(c.args, m.text(target))) continue;
      auto values = f.integers(field(l.node, "right"));
      if (!values || values->empty()) return std::nullopt;
      std::optional<Estimate> largest;
      for (int64_t v : *values) {
        Folder one(m, c.function);
        one.give(std::string(m.text(target)), v);
        auto e = estimate_with(one, m, c, kind);
        if (e && (!largest || e->parameters > largest->parameters)) largest = std::move(e);
      }
      return largest;
    }
    return estimate_with(f, m, c, kind);
  }

  static std::optional<Estimate> estimate_with(const Folder& f, const Model& m, const Call& c, const LayerKind& kind) {
    Estimate e;
    auto show = [&](int64_t v) { e.shown.push_back(std::to_string(v)); };
    U128 p = 0;
    switch (kind.layer) {
      case Layer::Linear: {
        auto in = size(f, m, c, 0, "in_features"), out = size(f, m, c, 1, "out_features");
        if (!in || !out) return std::nullopt;
        bool bias = flag(f, m, c, 2, "bias", true);
        show(*in), show(*out);
        if (!bias) e.shown.push_back("bias=False");
        p = static_cast<U128>(*in) * *out + (bias ? *out : 0);
        break;
      }
      case Layer::Embedding: {
        auto n = size(f, m, c, 0, "num_embeddings"), d = size(f, m, c, 1, "embedding_dim");
        if (!n || !d) return std::nullopt;
        show(*n), show(*d);
        p = static_cast<U128>(*n) * *d;
        break;
      }
      case Layer::Bilinear: {
        auto in1 = size(f, m, c, 0, "in1_features"), in2 = size(f, m, c, 1, "in2_features"),
             out = size(f, m, c, 2, "out_features");
        if (!in1 || !in2 || !out) return std::nullopt;
        bool bias = flag(f, m, c, 3, "bias", true);
        show(*in1), show(*in2), show(*out);
        if (!bias) e.shown.push_back("bias=False");
        p = static_cast<U128>(*in1) * *in2 * *out + (bias ? *out : 0);
        break;
      }
      case Layer::Conv: {
        auto in = size(f, m, c, 0, "in_channels"), out = size(f, m, c, 1, "out_channels");
        if (!in || !out) return std::nullopt;
        auto kernel = kernel_volume(f, m, c, kind.dims);
        if (!kernel) return std::nullopt;
        int64_t groups = 1;
        if (TSNode g = argument(m, c, 6, "groups"); !is_null(g)) {
          auto v = f.integer(g);
          if (!v || *v <= 0 || *in % *v != 0) return std::nullopt;
          groups = *v;
        }
        bool bias = flag(f, m, c, 7, "bias", true);
        show(*in), show(*out);
        e.shown.push_back(kernel->second);
        if (groups != 1) e.shown.push_back(fmt::format("groups={}", groups));
        if (!bias) e.shown.push_back("bias=False");
        p = static_cast<U128>(*in / groups) * *out * kernel->first + (bias ? *out : 0);
        break;
      }
      case Layer::Recurrent: {
        auto in = size(f, m, c, 0, "input_size"), h = size(f, m, c, 1, "hidden_size");
        if (!in || !h) return std::nullopt;
        show(*in), show(*h);
        // Positions after hidden_size: LSTM and GRU take (num_layers, bias,
        // batch_first, dropout, bidirectional, proj_size); RNN puts
        // nonlinearity before bias.
        uint32_t shift = kind.gates == 1 ? 1 : 0;
        int64_t layers = 1;
        if (TSNode a = argument(m, c, 2, "num_layers"); !is_null(a)) layers = f.integer(a).value_or(1);
        if (layers <= 0 || layers > 1024) return std::nullopt;
        bool bias = flag(f, m, c, 3 + shift, "bias", true);
        bool bidirectional = flag(f, m, c, 6 + shift, "bidirectional", false);
        int64_t proj = 0;
        if (kind.gates == 4)
          if (TSNode a = argument(m, c, 7, "proj_size"); !is_null(a)) proj = std::max<int64_t>(0, f.integer(a).value_or(0));
        if (proj >= *h) return std::nullopt;  // torch rejects it
        if (layers != 1) e.shown.push_back(fmt::format("num_layers={}", layers));
        if (!bias) e.shown.push_back("bias=False");
        if (bidirectional) e.shown.push_back("bidirectional=True");
        if (proj != 0) e.shown.push_back(fmt::format("proj_size={}", proj));
        U128 gates = static_cast<U128>(kind.gates) * *h;
        int64_t out = proj ? proj : *h;  // what each direction passes on
        int64_t directions = bidirectional ? 2 : 1;
        for (int64_t l = 0; l < layers; ++l) {
          U128 input = l == 0 ? static_cast<U128>(*in) : static_cast<U128>(out) * directions;
          U128 one = gates * input + gates * out + (bias ? 2 * gates : 0) +
                                  (proj ? static_cast<U128>(proj) * *h : 0);
          p += one * directions;
        }
        break;
      }
    }
    if (p > static_cast<U128>(UINT64_MAX / (kFp32 * kTrainingCopies))) return std::nullopt;
    e.parameters = static_cast<uint64_t>(p);
    return e;
  }

  // The product of the kernel's sides, and the kernel as the message shows
  // it: an int (the same on every side) or a tuple of `dims` ints.
  static std::optional<std::pair<int64_t, std::string>> kernel_volume(const Folder& f, const Model& m, const Call& c,
                                                                      int dims) {
    TSNode k = unparenthesize(argument(m, c, 2, "kernel_size"));
    if (is_null(k)) return std::nullopt;
    if (kind_of(k) == Kind::Tuple || kind_of(k) == Kind::List) {
      uint32_t n = ts_node_named_child_count(k);
      if (n != static_cast<uint32_t>(dims)) return std::nullopt;
      int64_t volume = 1;
      std::string shown;
      for (uint32_t i = 0; i < n; ++i) {
        auto v = f.integer(ts_node_named_child(k, i));
        if (!v || *v <= 0 || *v > kMaxKernelSide) return std::nullopt;
        volume *= *v;
        shown += (i ? ", " : "") + std::to_string(*v);
      }
      return std::pair{volume, "(" + shown + (n == 1 ? ",)" : ")")};
    }
    auto v = f.integer(k);
    if (!v || *v <= 0 || *v > kMaxKernelSide) return std::nullopt;
    int64_t volume = 1;
    for (int i = 0; i < dims; ++i) volume *= *v;
    return std::pair{volume, std::to_string(*v)};
  }
};

}  // namespace

TORCHLEAK_PYTHON_CHECK(OversizedLayer, "TL011")

}  // namespace torchleak::python
