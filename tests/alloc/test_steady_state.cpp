// A repeated training step performs no heap allocation once warm: every operator new in this
// executable is counted (tensor buffers come from operator new too, via the caching allocator).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <gradus/gradus.hpp>
#include <new>

namespace {
std::atomic<long> g_news{0};
void* counted(std::size_t n, std::size_t align) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
void* counted_nothrow(std::size_t n, std::size_t align) noexcept {
  try {
    return counted(n, align);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
}  // namespace

// Every replaceable form is replaced — plain, array, aligned, nothrow, sized — so that no
// allocation reaches the library's operator new while its release comes here, or the reverse
// (a mismatch that AddressSanitizer reports).
void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_nothrow(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_nothrow(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_nothrow(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_nothrow(n, std::size_t(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace gd = gradus;

TEST_CASE("steady state: a softmax-regression training step allocates nothing once warm", "[memory]") {
  gd::Rng rng(1);
  const int64_t n = 100, d = 784, k = 10;
  gd::Var<float> W(gd::Tensor<float>::zeros({d, k}));
  gd::Var<float> b(gd::Tensor<float>::zeros({k}));
  auto x = gd::Tensor<float>::random_uniform({n, d}, rng, 0, 0.05);
  auto y = gd::Tensor<float>::zeros({n, k});
  for (int64_t i = 0; i < n; ++i) y(i, int64_t(x(i, 0) * 200) % k) = 1.f;
  float first = 0, last = 0;
  auto step = [&] {
    gd::Var<float> logits = gd::matmul(x, W) + b;
    gd::Var<float> loss = gd::mean(-gd::sum(y * gd::log_softmax(logits), 1));
    gd::backward(loss);
    W.value().assign(W.value() - 0.3f * W.grad());
    b.value().assign(b.value() - 0.3f * b.grad());
    W.zero_grad();
    b.zero_grad();
    return loss.item();
  };
  for (int i = 0; i < 3; ++i) first = i == 0 ? step() : (step(), first);
  const long before = g_news.load();
  for (int i = 0; i < 20; ++i) last = step();
  const long during = g_news.load() - before;
  CHECK(during == 0);
  CHECK(last < first);  // it is really training
}

TEST_CASE("steady state: a fused loss with gradients allocates nothing once warm", "[memory]") {
  gd::Rng rng(2);
  const gd::Shape s{1 << 16};
  gd::Var<float> a(gd::Tensor<float>::random_normal(s, rng)), b(gd::Tensor<float>::random_normal(s, rng));
  gd::Var<float> c(gd::Tensor<float>::random_normal({1}, rng)), d(gd::Tensor<float>::random_normal(s, rng));
  auto step = [&] {
    gd::backward(gd::sum(gd::exp(a * b * 0.1f + c) * d));
    for (auto* v : {&a, &b, &c, &d}) v->zero_grad();
  };
  step();
  step();
  const long before = g_news.load();
  for (int i = 0; i < 10; ++i) step();
  CHECK(g_news.load() - before == 0);
}

TEST_CASE("steady state: the nothrow and aligned forms are counted and freed here too", "[memory]") {
  const long before = g_news.load();
  int* a = new (std::nothrow) int(7);
  int* b = new (std::nothrow) int[3];
  struct alignas(128) Wide {
    char c[128];
  };
  Wide* w = new (std::nothrow) Wide;
  Wide* v = new Wide[2];
  CHECK(g_news.load() - before == 4);
  CHECK(reinterpret_cast<std::uintptr_t>(w) % 128 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(v) % 128 == 0);
  delete a;
  delete[] b;
  delete w;
  delete[] v;
}
