// benchmarks/conv_layers.cpp — the two convolutions of the LeNet CNN (batch 128, NHWC, float,
// VALID; benchmarks/cnn_step.cpp), each pass on its own through the CPU kernels conv2d runs:
//   conv/lenet1  28x28x1 -> 24x24x32, 5x5: one input channel, a direct convolution on a CPU with
//                AVX2 or AVX-512 (backend/cpu/conv.hpp), im2col + GEMM elsewhere;
//   conv/lenet2  12x12x32 -> 8x8x64, 5x5: its forward pass a direct convolution on a CPU with
//                AVX-512 (backend/cpu/conv.hpp, direct_forward), the rest im2col + GEMM tiles;
//   conv/3x3_*   3x3 SAME layers of 64-256 channels, batch 8-32, forward passes only.
// Passes: forward (bias and ReLU fused; forward_im2col the same through im2col + GEMM, whichever
// path conv2d takes), filter_grad (the filter's gradient alone), backward (what
// the fused ReLU convolution's backward runs: g masked by the output, filter and bias gradients,
// and the input's for lenet2; lenet1's input takes none). Each row reports FLOPS (the multiply-adds
// of its products, two FLOPs each) and, as its label, the path: "direct" or "im2col".
//   build/benchmarks/bench_conv_layers --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <omp.h>

#include <string>
#include <vector>

#include <gradus/gradus.hpp>

namespace gd = gradus;
namespace cpu = gd::backend::cpu;
using gd::backend::ConvPlan;

namespace {

enum class Pass { forward, forward_im2col, filter_grad, backward };

const ConvPlan lenet1{.n = 128, .h = 28, .w = 28, .c = 1, .kh = 5, .kw = 5, .f = 32, .oh = 24, .ow = 24,
                      .sh = 1, .sw = 1, .dh = 1, .dw = 1, .ph = 0, .pw = 0};
const ConvPlan lenet2{.n = 128, .h = 12, .w = 12, .c = 32, .kh = 5, .kw = 5, .f = 64, .oh = 8, .ow = 8,
                      .sh = 1, .sw = 1, .dh = 1, .dw = 1, .ph = 0, .pw = 0};

/// 3 x 3 SAME layers of deeper networks, forward passes only: the direct one where
/// direct_forward takes them (AVX-512, rows a multiple of 4 pixels wide), beside im2col.
ConvPlan same3x3(int64_t n, int64_t hw, int64_t c, int64_t f) {
  return {.n = n, .h = hw, .w = hw, .c = c, .kh = 3, .kw = 3, .f = f, .oh = hw, .ow = hw,
          .sh = 1, .sw = 1, .dh = 1, .dw = 1, .ph = 1, .pw = 1};
}
const std::vector<std::pair<std::string, ConvPlan>> deeper = {
    {"3x3_16x16x64", same3x3(32, 16, 64, 64)},
    {"3x3_8x8x128", same3x3(32, 8, 128, 128)},
    {"3x3_16x16x256", same3x3(8, 16, 256, 256)},
    {"3x3_14x14x64", same3x3(32, 14, 64, 64)},  // 14 pixels: runs of 12 + 1 + 1, im2col
};

std::vector<float> normals(int64_t n, gd::Rng& rng) {
  const auto t = gd::Tensor<float>::random_normal({n}, rng, 0.f, 1.f);
  return std::vector<float>(t.data(), t.data() + n);
}

void BM_conv(benchmark::State& state, const ConvPlan& p, Pass pass) {
  omp_set_num_threads(int(state.range(0)));
  gd::Rng rng(7);
  const int64_t M = p.rows(), K = p.depth(), F = p.f;
  const auto x = normals(p.n * p.h * p.w * p.c, rng), w = normals(K * F, rng), b = normals(F, rng);
  const auto g = normals(M * F, rng);
  std::vector<float> y(size_t(M * F)), dx(x.size()), dw(w.size()), db(b.size());
  cpu::conv2d_forward(p, x.data(), w.data(), b.data(), y.data(), true);
  const bool input_grad = p.c > 1;  // as in the CNN: the first layer's input takes no gradient
  double products = 1;
  if (pass == Pass::backward) products = input_grad ? 2 : 1;
  for (auto _ : state) {
    switch (pass) {
      case Pass::forward:
        cpu::conv2d_forward(p, x.data(), w.data(), b.data(), y.data(), true);
        break;
      case Pass::forward_im2col:
        cpu::im2col_forward(p, x.data(), w.data(), b.data(), y.data(), true);
        break;
      case Pass::filter_grad:
        cpu::conv2d_backward(p, g.data(), x.data(), w.data(), static_cast<float*>(nullptr), false, dw.data(), false,
                             static_cast<float*>(nullptr), false, static_cast<const float*>(nullptr));
        break;
      case Pass::backward:
        cpu::conv2d_backward(p, g.data(), x.data(), w.data(), input_grad ? dx.data() : nullptr, false, dw.data(),
                             false, db.data(), false, y.data());
        break;
    }
    benchmark::DoNotOptimize(dw.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] =
      benchmark::Counter(2.0 * double(M * K * F) * products, benchmark::Counter::kIsIterationInvariantRate);
#if defined(GRADUS_SGEMM_X86)
  const bool direct =
      pass == Pass::forward ? cpu::direct_forward(p) : pass != Pass::forward_im2col && cpu::direct_conv(p);
  state.SetLabel(direct ? "direct" : "im2col");
#else
  state.SetLabel("im2col");
#endif
  omp_set_num_threads(omp_get_num_procs());
}

void add(const std::string& name, const ConvPlan& plan, const char* pass_name, Pass pass) {
  benchmark::RegisterBenchmark(("conv/" + name + "/" + pass_name).c_str(),
                               [&plan, pass](benchmark::State& s) { BM_conv(s, plan, pass); })
      ->ArgName("threads")
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

void register_all() {
  for (auto [name, plan] : {std::pair{"lenet1", &lenet1}, std::pair{"lenet2", &lenet2}}) {
    for (auto [pass_name, pass] : {std::pair{"forward", Pass::forward}, std::pair{"filter_grad", Pass::filter_grad},
                                   std::pair{"backward", Pass::backward}})
      add(name, *plan, pass_name, pass);
    add(name, *plan, "forward_im2col", Pass::forward_im2col);
  }
  for (const auto& [name, plan] : deeper) {
    add(name, plan, "forward", Pass::forward);
    add(name, plan, "forward_im2col", Pass::forward_im2col);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
