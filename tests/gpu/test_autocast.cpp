// Mixed precision on the GPU: gd::autocast(gd::bf16 / gd::fp16) rounds the inputs of float
// products (cuBLAS's fast 16-bit compute types, tensor cores) and keeps float accumulation; a
// node's backward products use the precision of its forward; fp16 training needs the
// LossScaler. References are computed here in double from the float inputs and from the same
// inputs rounded to bfloat16 / half. cuBLAS *may* round (the compute types allow it, and a GPU's
// kernel may keep float), so on a real GPU the results are checked to lie within the rounding's
// bound of the float product; the emulated device always rounds, and there the results must be
// the rounded inputs' products to float accuracy.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gradus/gradus.hpp"
#include "gradus/io.hpp"
#include "gradus/losses.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"
#include "gradus/train.hpp"

#include "../support/classification_net.hpp"
#include "../support/gpu.hpp"
#include "../support/relative_l2.hpp"

namespace gd = gradus;

namespace {

using gradus_test::gpu_available;
using gradus_test::uniform;

/// x rounded to the nearest bfloat16 (ties to even).
float to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}
/// x rounded to the nearest IEEE half (ties to even; beyond 65504: inf).
float to_fp16(float x) { return float(static_cast<_Float16>(x)); }

float round_to(gd::Precision p, float x) { return p == gd::bf16 ? to_bf16(x) : to_fp16(x); }
/// The relative error bound of one rounding: 2^-8 for bfloat16 (8 significant bits), 2^-11 for
/// half (11 bits).
double unit_roundoff(gd::Precision p) { return p == gd::bf16 ? 0x1p-8 : 0x1p-11; }

bool emulated_device() { return gd::cuda(0).name().find("emulated") != std::string::npos; }

/// C = op(A)·op(B) in double for row-major A [m,k] and B [k,n], each input passed through `r`,
/// and Σ|a·b| per element (the scale of each element's rounding error).
struct Product {
  std::vector<double> c, magnitude;
};
template <class R>
Product reference(const gd::Tensor<float>& a, const gd::Tensor<float>& b, bool tb, int64_t m, int64_t k, int64_t n, R r) {
  Product p{std::vector<double>(size_t(m * n)), std::vector<double>(size_t(m * n))};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double x = r(a.data()[i * k + q]), y = r(tb ? b.data()[j * k + q] : b.data()[q * n + j]);
        s += x * y;
        mag += std::abs(x * y);
      }
      p.c[size_t(i * n + j)] = s;
      p.magnitude[size_t(i * n + j)] = mag;
    }
  return p;
}

/// Checks a product computed on the GPU under precision `p` against the references: within the
/// rounding's bound of the float inputs' product always; on the emulated device, equal to the
/// rounded inputs' product to float accuracy, and not equal to the float inputs' product.
void check_product(const gd::Tensor<float>& got, const gd::Tensor<float>& a, const gd::Tensor<float>& b, bool tb,
                   int64_t m, int64_t k, int64_t n, gd::Precision p) {
  const Product exact = reference(a, b, tb, m, k, n, [](float x) { return double(x); });
  const Product rounded = reference(a, b, tb, m, k, n, [p](float x) { return double(round_to(p, x)); });
  const double u = unit_roundoff(p), float_sum = double(k) * 0x1p-24;
  double worst_exact = 0, worst_rounded = 0;
  for (size_t i = 0; i < exact.c.size(); ++i) {
    const double v = double(got.data()[i]), mag = exact.magnitude[i] + 1e-30;
    worst_exact = std::max(worst_exact, std::abs(v - exact.c[i]) / mag);
    worst_rounded = std::max(worst_rounded, std::abs(v - rounded.c[i]) / mag);
  }
  CHECK(worst_exact <= 2.01 * u + float_sum);  // |x̃ỹ - xy| <= (2u + u²)|xy|, plus float accumulation
  if (emulated_device()) {
    CHECK(worst_rounded <= float_sum);
    CHECK(worst_exact > 4 * float_sum);  // the inputs were rounded: a float product would not be this far off
  }
}

}  // namespace

TEST_CASE("autocast scopes nest and restore this thread's precision; CPU products round under bf16 only, double "
          "products never",
          "[gpu]") {
  CHECK(gd::autocast_precision() == gd::fp32);
  {
    gd::autocast outer(gd::bf16);
    CHECK(gd::autocast_precision() == gd::bf16);
    {
      gd::autocast inner(gd::fp16);
      CHECK(gd::autocast_precision() == gd::fp16);
    }
    CHECK(gd::autocast_precision() == gd::bf16);
  }
  CHECK(gd::autocast_precision() == gd::fp32);
  const auto a = uniform<float>({9, 70}, -1, 1, 1), b = uniform<float>({70, 5}, -1, 1, 2);
  const gd::Tensor<float> plain = gd::matmul(a, b);
  gd::Tensor<float> mixed, half_cpu;
  {
    gd::autocast bf(gd::bf16);
    mixed = gd::matmul(a, b);
  }
  {
    gd::autocast half(gd::fp16);
    half_cpu = gd::matmul(a, b);
  }
  // bf16 on the CPU: the product of the inputs rounded to bfloat16 (tests/backend/test_gemm_bf16.cpp
  // checks the kernels); fp16 is a GPU's precision, which the CPU ignores
  gd::Tensor<float> ar = a.clone(), br = b.clone();
  for (int64_t i = 0; i < ar.size(); ++i) ar.data()[i] = gd::round_to_bfloat16(ar.data()[i]);
  for (int64_t i = 0; i < br.size(); ++i) br.data()[i] = gd::round_to_bfloat16(br.data()[i]);
  const gd::Tensor<float> rounded = gd::matmul(ar, br);
  for (int64_t i = 0; i < plain.size(); ++i) {
    CHECK(mixed.data()[i] == Approx(rounded.data()[i]).margin(1e-5));
    CHECK(half_cpu.data()[i] == plain.data()[i]);
  }
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto ad = uniform<double>({9, 70}, -1, 1, 3), bd = uniform<double>({70, 5}, -1, 1, 4);
  gd::Tensor<double> on_gpu;
  {
    gd::autocast half(gd::fp16);
    on_gpu = gd::matmul(ad.to(g), bd.to(g)).to(gd::cpu);
  }
  const gd::Tensor<double> on_cpu = gd::matmul(ad, bd);
  for (int64_t i = 0; i < on_cpu.size(); ++i) CHECK(on_gpu.data()[i] == Approx(on_cpu.data()[i]).epsilon(1e-12));
}

TEST_CASE("matmul under autocast on the GPU: rounded inputs, float sums, and a backward pass in the forward's precision",
          "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const int64_t m = 33, k = 200, n = 17;
  const auto a = uniform<float>({m, k}, -1, 1, 10), b = uniform<float>({k, n}, -1, 1, 11);
  for (const gd::Precision p : {gd::bf16, gd::fp16}) {
    INFO("precision " << p);
    gd::Var<float> va(a.to(g), true), vb(b.to(g), true);
    gd::Var<float> y;
    {
      gd::autocast mixed(p);
      y = gd::matmul(va, vb);
    }
    REQUIRE(gd::autocast_precision() == gd::fp32);
    gd::backward(gd::sum(y * y));  // outside the scope: the product's backward still runs in p
    const gd::Tensor<float> yh = y.value().to(gd::cpu), ga = va.grad().to(gd::cpu), gb = vb.grad().to(gd::cpu);
    check_product(yh, a, b, false, m, k, n, p);
    // dA = dY·Bᵀ and dB = Aᵀ·dY with dY = 2Y, Y as the GPU computed it
    const gd::Tensor<float> dy = yh * 2.0f;
    check_product(ga, dy, b, true, m, n, k, p);
    const gd::Tensor<float> at = gd::transpose(a), dyt = gd::transpose(dy);
    const gd::Tensor<float> gbt = gd::transpose(gb);
    check_product(gbt, dyt, at, true, n, m, k, p);
  }
}

TEST_CASE("a CNN's gradients under autocast stay within each precision's tolerance of float's", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::Rng rng(20);
  gd::nn::Sequential net(
      gd::nn::Conv2d<float>({.in = 1, .filters = 6, .kernel_size = {5, 5}, .activation = gd::nn::relu}, rng),
      gd::nn::MaxPool2d{}, gd::nn::Flatten{}, gd::nn::Dense<float>({.in = 4 * 4 * 6, .out = 32, .activation = gd::nn::tanh}, rng),
      gd::nn::Dense<float>({.in = 32, .out = 10}, rng));
  net.to(g);
  const auto x = gd::Tensor<float>::random_normal({16, 12, 12, 1}, rng).to(g);
  gd::Tensor<int64_t> labels({16});
  for (int64_t i = 0; i < 16; ++i) labels(i) = int64_t(rng.below(10));
  const auto yd = labels.to(g);
  const auto gradients = [&](gd::Precision p) {
    for (auto& w : net.parameters()) w.zero_grad();
    gd::Var<float> loss;
    {
      gd::autocast mixed(p);
      loss = gd::losses::sparse_softmax_cross_entropy_with_logits(yd, net.forward(x));
    }
    gd::backward(loss);
    std::vector<gd::Tensor<float>> out;
    for (auto& w : net.parameters()) out.push_back(w.grad().to(gd::cpu));
    return out;
  };
  const auto full = gradients(gd::fp32);
  // ‖g_p − g‖ / ‖g‖ per parameter. On the emulated device, which always rounds: bf16 0.049 for
  // the first convolution's kernel (where rounding flips some of max pooling's choices, and the
  // kernel's gradient sums 1,024 terms of both signs) and at most 0.021 for the others; fp16
  // at most 0.0009. The bounds are twice the worst of each.
  for (const gd::Precision p : {gd::bf16, gd::fp16}) {
    INFO("precision " << p);
    const auto mixed = gradients(p);
    double largest = 0;
    for (size_t i = 0; i < full.size(); ++i) {
      INFO("parameter " << i << " " << full[i].shape());
      const double rel = gradus_test::relative_l2(mixed[i], full[i]);
      CHECK(rel <= (p == gd::bf16 ? 0.1 : 0.002));
      largest = std::max(largest, rel);
    }
    if (emulated_device()) CHECK(largest > 1e-6);  // the rounding took place
  }
}

TEST_CASE("fp16: a LossScaler keeps gradients that a half cannot hold", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const auto x = uniform<float>({16, 32}, -1, 1, 30), w0 = uniform<float>({32, 8}, -1, 1, 31);
  // loss = 1e-8 · Σ x·w: dW = 1e-8 · xᵀ·1, and the product's upstream gradient, 1e-8, is below
  // half's smallest subnormal (2^-24 ≈ 6e-8): unscaled, fp16 products make it 0
  const auto train_step = [&](bool scaled, gd::Tensor<float>* grad) {
    gd::Var<float> w(w0.to(g), true);
    gd::optim::SGD<float> opt({w}, {.lr = 1.0});
    gd::Var<float> loss;
    {
      gd::autocast half(gd::fp16);
      loss = gd::sum(gd::matmul(x.to(g), w)) * 1e-8f;
    }
    if (scaled) {
      gd::optim::LossScaler<float> scaler;
      opt.zero_grad();
      scaler.backward(loss);
      CHECK(scaler.unscale(opt));
      *grad = w.grad().to(gd::cpu);
      scaler.grow();
      opt.step();
      CHECK(scaler.scale() == 65536.0);
    } else {
      opt.minimize(loss);
      *grad = w.grad().to(gd::cpu);
    }
  };
  gd::Tensor<float> plain, scaled;
  train_step(false, &plain);
  train_step(true, &scaled);
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 8; ++j) {
      double want = 0;
      for (int64_t r = 0; r < 16; ++r) want += 1e-8 * double(x.data()[r * 32 + i]);
      // the scaled gradient 65536e-8 and x each round once to half; sums of 16 terms in float
      CHECK(double(scaled.data()[i * 8 + j]) == Approx(want).epsilon(0).margin(16 * 1e-8 * 2.01 * 0x1p-11 + 1e-14));
      if (emulated_device()) CHECK(plain.data()[i * 8 + j] == 0.0f);  // underflowed without the scaler
    }
}

TEST_CASE("an MLP trained under bf16 and fp16 autocast on the GPU follows float's loss curve", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  gd::Rng data_rng(40);
  const auto x = gd::Tensor<float>::random_normal({128, 64}, data_rng).to(g);
  gd::Tensor<int64_t> labels({128});
  for (int64_t i = 0; i < 128; ++i) labels(i) = int64_t(data_rng.below(10));
  const auto yd = labels.to(g);
  const auto train = [&](gd::Precision p) {
    gd::Rng rng(41);
    gd::nn::Sequential net(gd::nn::Dense<float>({.in = 64, .out = 100, .activation = gd::nn::relu}, rng),
                           gd::nn::Dense<float>({.in = 100, .out = 10}, rng));
    net.to(g);
    gd::optim::SGD<float> opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
    gd::optim::LossScaler<float> scaler;
    std::vector<double> losses;
    for (int step = 0; step < 150; ++step) {
      gd::Var<float> loss;
      {
        gd::autocast mixed(p);
        loss = gd::losses::sparse_softmax_cross_entropy_with_logits(yd, net.forward(x));
      }
      if (p == gd::fp16)
        CHECK(scaler.minimize(opt, loss));
      else
        opt.minimize(loss);
      losses.push_back(loss.value().to(gd::cpu).item());
    }
    return losses;
  };
  const auto full = train(gd::fp32);
  CHECK(full.back() < 0.3 * full.front());  // it learns
  for (const gd::Precision p : {gd::bf16, gd::fp16}) {
    INFO("precision " << p);
    const auto mixed = train(p);
    for (size_t i = 0; i < full.size(); i += 10) CHECK(mixed[i] == Approx(full[i]).epsilon(0.05).margin(0.02));
  }
}

TEST_CASE("fit(.autocast): bf16 follows float's history; fp16 scales the loss and resumes its scale exactly", "[gpu]") {
  if (!gpu_available()) return;
  const gd::Device g = gd::cuda(0);
  const gd::train::Data<float, int64_t> train = gradus_test::sum_sign_data(512, 20, 50);
  const auto loss = [](const gd::Tensor<int64_t>& l, const gd::Var<float>& p) {
    return gd::losses::sparse_softmax_cross_entropy_with_logits(l, p);
  };
  const auto dir = std::filesystem::temp_directory_path() / "gradus_gpu_autocast_fit";
  std::filesystem::remove_all(dir);
  struct Run {
    gd::train::History history;
    std::vector<gd::Tensor<float>> weights;
  };
  // 8 steps an epoch; a growth interval of 5 makes the scale grow within the first epoch and
  // again in the second, so a resumed run must restore it (and its count of finite steps)
  const auto run = [&](gd::Precision p, int64_t epochs, const std::filesystem::path& run_dir) {
    gd::Rng rng(51);
    gd::nn::Sequential net(gd::nn::Dense<float>({.in = 20, .out = 32, .activation = gd::nn::relu}, rng),
                           gd::nn::Dense<float>({.in = 32, .out = 2}, rng));
    gd::optim::Adam<float> opt(net.parameters(), {.lr = 0.01});
    Run r;
    r.history = gd::train::fit(net, opt, loss, train,
                               {.epochs = epochs, .batch_size = 64, .seed = 5, .run_dir = run_dir, .device = g,
                                .autocast = p, .loss_scale = {.growth_interval = 5}});
    for (auto& w : net.parameters()) r.weights.push_back(w.value().to(gd::cpu));
    return r;
  };
  const Run full = run(gd::fp32, 3, dir / "fp32"), bf16 = run(gd::bf16, 3, dir / "bf16");
  CHECK(full.history.epochs.back().loss < 0.5 * full.history.epochs.front().loss);
  for (size_t e = 0; e < 3; ++e) CHECK(bf16.history.epochs[e].loss == Approx(full.history.epochs[e].loss).epsilon(0.05));
  const auto scale_of = [](const std::filesystem::path& run_dir) {
    const auto ckpt = gd::io::load_safetensors(*gd::io::latest_checkpoint(run_dir));
    return ckpt.get<float>("loss_scale/scale").item();
  };
  const Run fp16 = run(gd::fp16, 3, dir / "fp16");
  for (size_t e = 0; e < 3; ++e) CHECK(fp16.history.epochs[e].loss == Approx(full.history.epochs[e].loss).epsilon(0.05));
  CHECK(scale_of(dir / "fp16") == 65536.0f * 16);  // 24 finite steps: grown at steps 5, 10, 15 and 20
  run(gd::fp16, 1, dir / "resumed");
  CHECK(scale_of(dir / "resumed") == 65536.0f * 2);  // grown at step 5; 3 finite steps since
  const Run resumed = run(gd::fp16, 3, dir / "resumed");
  CHECK(scale_of(dir / "resumed") == 65536.0f * 16);
  for (size_t i = 0; i < fp16.weights.size(); ++i)
    for (int64_t j = 0; j < fp16.weights[i].size(); ++j) CHECK(resumed.weights[i].data()[j] == fp16.weights[i].data()[j]);
  std::filesystem::remove_all(dir);
}
