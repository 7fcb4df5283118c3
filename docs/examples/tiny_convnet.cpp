// tiny_convnet.cpp - embedding maploc: load a state_dict saved on cuda:0 into our own weight
// buffers and run the network's forward pass, as a small C++ inference binary would.
//
// The network (fixtures/examples/generate_example.py, torchvision-style):
//   0: Conv2dNormActivation(3, 8, kernel_size=3)  = Conv2d(3, 8, 3, padding=1, bias=False),
//      BatchNorm2d(8) (eval: running statistics), ReLU
//   1: AdaptiveAvgPool2d(1), 2: Flatten, 3: Linear(8, 10)
//
// Usage: tiny_convnet CHECKPOINT INPUT.f32 EXPECTED.f32
// Exits 0 when our output equals torch's within 1e-5.
#include <maploc/maploc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

constexpr int kIn = 3, kMid = 8, kOut = 10, kH = 8, kW = 8;

// Our own weight buffers: the service owns its memory, maploc fills it.
struct Weights {
  std::vector<float> conv = std::vector<float>(kMid * kIn * 3 * 3);
  std::vector<float> bn_weight = std::vector<float>(kMid), bn_bias = std::vector<float>(kMid);
  std::vector<float> bn_mean = std::vector<float>(kMid), bn_var = std::vector<float>(kMid);
  std::int64_t bn_batches = 0;
  std::vector<float> fc_weight = std::vector<float>(kOut * kMid), fc_bias = std::vector<float>(kOut);
};

std::vector<float> read_f32(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw(std::istreambuf_iterator<char>(in), {});
  std::vector<float> out(raw.size() / sizeof(float));
  std::copy(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(out.size() * sizeof(float)),
            reinterpret_cast<char*>(out.data()));
  return out;
}

std::vector<float> forward(const Weights& w, const std::vector<float>& x) {
  constexpr float kEps = 1e-5f;  // BatchNorm2d's default
  std::vector<float> pooled(kMid, 0.0f);
  for (int o = 0; o < kMid; ++o) {
    const float scale = w.bn_weight[o] / std::sqrt(w.bn_var[o] + kEps);
    for (int y = 0; y < kH; ++y) {
      for (int xx = 0; xx < kW; ++xx) {
        float acc = 0.0f;
        for (int c = 0; c < kIn; ++c) {
          for (int ky = 0; ky < 3; ++ky) {
            for (int kx = 0; kx < 3; ++kx) {
              const int iy = y + ky - 1, ix = xx + kx - 1;
              if (iy < 0 || iy >= kH || ix < 0 || ix >= kW) continue;
              acc += w.conv[((o * kIn + c) * 3 + ky) * 3 + kx] * x[(c * kH + iy) * kW + ix];
            }
          }
        }
        const float bn = (acc - w.bn_mean[o]) * scale + w.bn_bias[o];
        pooled[o] += std::max(bn, 0.0f);
      }
    }
    pooled[o] /= static_cast<float>(kH * kW);
  }
  std::vector<float> out(kOut);
  for (int j = 0; j < kOut; ++j) {
    out[j] = w.fc_bias[j];
    for (int i = 0; i < kMid; ++i) out[j] += w.fc_weight[j * kMid + i] * pooled[i];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s CHECKPOINT INPUT.f32 EXPECTED.f32\n", argv[0]);
    return 2;
  }
  using maploc::remap::Device;
  using maploc::torch::DType;
  Weights w;
  try {
    // The checkpoint's storages are tagged cuda:0. "auto" keeps them on cuda:0 when a GPU
    // is present and puts them on the CPU otherwise; load_into copies back to our buffers.
    const auto checkpoint = maploc::torch::Checkpoint::open(argv[1]);
    maploc::remap::LoadOptions options;
    options.map = maploc::remap::MapLocation::parse("auto");
    const auto loaded = maploc::remap::load(checkpoint, options);
    std::printf("loaded %zu tensors onto %s\n", loaded.tensors().size(), loaded.device_of(0).str().c_str());

    const Device cpu = Device::cpu();
    const std::vector<maploc::remap::Destination> into = {
        {"0.0.weight", cpu, w.conv.data(), DType::kFloat32, {kMid, kIn, 3, 3}},
        {"0.1.weight", cpu, w.bn_weight.data(), DType::kFloat32, {kMid}},
        {"0.1.bias", cpu, w.bn_bias.data(), DType::kFloat32, {kMid}},
        {"0.1.running_mean", cpu, w.bn_mean.data(), DType::kFloat32, {kMid}},
        {"0.1.running_var", cpu, w.bn_var.data(), DType::kFloat32, {kMid}},
        {"0.1.num_batches_tracked", cpu, &w.bn_batches, DType::kInt64, {}},
        {"3.weight", cpu, w.fc_weight.data(), DType::kFloat32, {kOut, kMid}},
        {"3.bias", cpu, w.fc_bias.data(), DType::kFloat32, {kOut}},
    };
    const auto report = loaded.load_into(into);  // strict: every name must match
    std::printf("load_into: %zu tensors filled\n", report.loaded.size());
  } catch (const maploc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  const auto x = read_f32(argv[2]);
  const auto expected = read_f32(argv[3]);
  if (x.size() != static_cast<std::size_t>(kIn * kH * kW) || expected.size() != static_cast<std::size_t>(kOut)) {
    std::fprintf(stderr, "input or expected output has the wrong size\n");
    return 1;
  }
  const auto y = forward(w, x);
  float worst = 0.0f;
  for (int j = 0; j < kOut; ++j) {
    worst = std::max(worst, std::fabs(y[j] - expected[j]));
    std::printf("y[%d] = % .6f   torch % .6f\n", j, y[j], expected[j]);
  }
  std::printf("max |maploc - torch| = %.3g\n", worst);
  return worst <= 1e-5f ? 0 : 1;
}
