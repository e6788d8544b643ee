// Tensors on a device other than the CPU, without a GPU: a fake device whose "memory" is host
// memory behind the same hooks the CUDA backend registers (core/device.hpp), so the plumbing —
// to(), device(), the data() guard, copies, the device check of expressions, the caching
// allocator's policy — is tested everywhere. The same paths on a real GPU: tests/gpu.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "gradus/backend/cuda/memory.hpp"
#include "gradus/gradus.hpp"
#include "gradus/nn.hpp"
#include "gradus/optim.hpp"

namespace gd = gradus;
using Catch::Matchers::Contains;

namespace {

/// Host memory standing in for a device's, counting what is asked of it; `budget` bytes at
/// most outstanding (an allocation beyond it fails as cuMemAlloc would when the GPU is full).
struct FakeMemory {
  int64_t* allocations;
  int64_t* outstanding;
  int64_t budget = int64_t(1) << 40;
  std::unordered_map<void*, size_t> sizes{};
  void* allocate(size_t bytes) {
    if (*outstanding + int64_t(bytes) > budget) return nullptr;
    ++*allocations;
    *outstanding += int64_t(bytes);
    void* p = std::malloc(bytes);
    sizes[p] = bytes;
    return p;
  }
  void free(void* p) {
    *outstanding -= int64_t(sizes.at(p));
    sizes.erase(p);
    std::free(p);
  }
};

int64_t g_allocations = 0, g_outstanding = 0;
gd::backend::cuda::BlockCache<FakeMemory>* g_cache = nullptr;
int g_copies = 0;

/// Installs the fake as the cuda backend for the life of the guard, then restores the hooks.
struct FakeDevice {
  gd::DeviceHooks saved;
  FakeDevice() {
    saved = gd::device_hooks(gd::DeviceType::cuda);
    g_allocations = g_outstanding = 0;
    g_copies = 0;
    g_cache = new gd::backend::cuda::BlockCache<FakeMemory>(FakeMemory{&g_allocations, &g_outstanding},
                                                            gd::Device{gd::DeviceType::cuda, 0});
    gd::DeviceHooks& h = gd::device_hooks(gd::DeviceType::cuda);
    h.allocate = [](gd::Device, size_t bytes) { return g_cache->allocate(bytes); };
    h.copy = [](void* dst, gd::Device, const void* src, gd::Device, size_t bytes) {
      ++g_copies;
      std::memcpy(dst, src, bytes);
    };
  }
  ~FakeDevice() {
    gd::device_hooks(gd::DeviceType::cuda) = saved;
    delete g_cache;  // tensors of the test are gone by now
    g_cache = nullptr;
  }
};

const gd::Device kFake{gd::DeviceType::cuda, 0};

}  // namespace

TEST_CASE("a tensor moves to a device and back with its values", "[device]") {
  FakeDevice fake;
  const gd::Tensor<float> a = gd::Tensor<float>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(a.device() == gd::cpu);
  const gd::Tensor<float> g = a.to(kFake);
  CHECK(g.device() == kFake);
  CHECK(g.shape() == a.shape());
  CHECK_FALSE(g.shares_storage(a));
  CHECK(a.to(gd::cpu).shares_storage(a));  // already there: the same storage
  CHECK(g.to(kFake).shares_storage(g));
  const gd::Tensor<float> back = g.to(gd::cpu);
  CHECK(back.device() == gd::cpu);
  CHECK(std::vector<float>(back.begin(), back.end()) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(g_copies == 2);

  const gd::Tensor<float> c = g.clone();  // stays on the device
  CHECK(c.device() == kFake);
  CHECK_FALSE(c.shares_storage(g));
  CHECK(c.to(gd::cpu)(1, 2) == 6.f);
  CHECK(g.reshape({3, 2}).device() == kFake);
  CHECK(gd::Tensor<float>::scalar(2.5f).to(kFake).item() == 2.5f);
}

TEST_CASE("host access to a tensor on a device throws device_error instead of reading device memory",
          "[device]") {
  FakeDevice fake;
  gd::Tensor<double> g = gd::Tensor<double>::zeros({4}).to(kFake);
  CHECK_THROWS_MATCHES(g.data(), gd::device_error, Catch::Matchers::Message(
                           "Tensor::data(): the elements are in the memory of cuda:0, not the host's; copy them "
                           "with .to(gd::cpu) first"));
  CHECK_THROWS_AS(g(1), gd::device_error);
  CHECK_THROWS_AS(g.fill_(1.0), gd::device_error);
  CHECK_THROWS_AS(g.begin(), gd::device_error);
  CHECK(g.device_data() != nullptr);  // the unchecked address, for kernels
  std::ostringstream os;
  os << g;
  CHECK(os.str() == "Tensor([0, 0, 0, 0], shape=[4]) on cuda:0");
}

TEST_CASE("copy_ copies across devices in both directions", "[device]") {
  FakeDevice fake;
  gd::Tensor<float> g = gd::Tensor<float>::empty({3}, kFake);
  g.copy_(gd::Tensor<float>::from({7, 8, 9}));
  gd::Tensor<float> h = gd::Tensor<float>::zeros({3});
  h.copy_(g);
  CHECK(std::vector<float>(h.begin(), h.end()) == std::vector<float>{7, 8, 9});
}

TEST_CASE("an expression over two devices throws device_error naming the op and both devices", "[device]") {
  FakeDevice fake;
  const gd::Tensor<float> a = gd::Tensor<float>::ones({2, 3});
  const gd::Tensor<float> g = a.to(kFake);
  CHECK_THROWS_MATCHES(gd::eval(a + g), gd::device_error,
                       Catch::Matchers::Message("add: operands on cpu and cuda:0; move them to one device with .to(device)"));
  CHECK_THROWS_MATCHES(gd::eval(gd::exp(g) * a), gd::device_error, Catch::Matchers::Message(
                           "mul: operands on cuda:0 and cpu; move them to one device with .to(device)"));
  gd::Tensor<float> out = gd::Tensor<float>::zeros({2, 3});
  CHECK_THROWS_MATCHES(out.assign(g * 2.f), gd::device_error,
                       Catch::Matchers::Message("assign: the tensor is on cpu, the expression's operands on cuda:0"));
  // numbers carry no device: an expression of one device and numbers runs there
  CHECK(gd::Tensor<float>(a * 2.f + 1.f).device() == gd::cpu);
}

TEST_CASE("without a registered backend, a device tensor is a clear device_error", "[device]") {
  const gd::DeviceHooks saved = gd::device_hooks(gd::DeviceType::cuda);
  gd::device_hooks(gd::DeviceType::cuda) = {};
  const auto msg = [] {
    try {
      (void)gd::Tensor<float>::ones({2}).to(kFake);
    } catch (const gd::device_error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  }();
  gd::device_hooks(gd::DeviceType::cuda) = saved;
  CHECK_THAT(msg, Contains("no backend for cuda:0 is loaded") && Contains("gd::cuda(i)"));
}

TEST_CASE("the device caching allocator reuses blocks: a steady state allocates nothing", "[device]") {
  FakeDevice fake;
  const gd::Tensor<float> host = gd::Tensor<float>::ones({1000});
  for (int step = 0; step < 5; ++step) {
    const gd::Tensor<float> a = host.to(kFake), b = a.clone(), c = gd::Tensor<float>::empty({999}, kFake);
  }
  // step 0 asks the device for three blocks of one class (999 and 1000 floats share it); every
  // later step is served by the cache
  CHECK(g_allocations == 3);
  const auto s = g_cache->stats();
  CHECK(s.device_allocations == 3);
  CHECK(s.cache_hits == 12);
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_cached == 3 * int64_t(gd::detail::CachingAllocator::class_bytes(
                                   gd::detail::CachingAllocator::size_class(4000))));
  CHECK(s.peak_bytes_in_use == s.bytes_cached);
}

TEST_CASE("the device caching allocator empties its cache and retries when the device is full", "[device]") {
  int64_t allocations = 0, outstanding = 0;
  // room for two 4 KiB blocks, or one and a 5 KiB one (the class of 5000 bytes)
  gd::backend::cuda::BlockCache<FakeMemory> cache(FakeMemory{&allocations, &outstanding, 4096 + 5120 + 100}, kFake);
  gd::detail::Block* a = cache.allocate(4096);
  cache.release(cache.allocate(4096));
  CHECK(cache.stats().bytes_cached == 4096);
  CHECK(outstanding == 8192);
  // a block of another class fits only once the cached one is given back to the device
  gd::detail::Block* c = cache.allocate(5000);
  CHECK(c->capacity >= 5000);
  CHECK(cache.stats().bytes_cached == 0);
  CHECK(allocations == 3);
  CHECK(outstanding == 4096 + int64_t(c->capacity));
  cache.release(a);
  cache.release(c);
  cache.empty();
  CHECK(outstanding == 0);
  // a request that can never fit names the device, the size and what live tensors hold
  int64_t none = 0, zero = 0;
  gd::backend::cuda::BlockCache<FakeMemory> tiny(FakeMemory{&none, &zero, 0}, kFake);
  CHECK_THROWS_MATCHES(tiny.allocate(100), gd::device_error,
                       Catch::Matchers::Message("out of memory on cuda:0: a tensor of 100 bytes does not fit (0 bytes "
                                                "held by live tensors)"));
}

TEST_CASE("module.to(device) moves every parameter and buffer, keeping the parameters' identity", "[device]") {
  FakeDevice fake;
  struct Net : gd::nn::Module<float> {
    gd::Rng rng{1};
    gd::nn::Dense<float> dense{gd::nn::DenseOptions{.in = 3, .out = 2}, rng};
    gd::nn::BatchNorm<float> bn{gd::nn::BatchNormOptions{.features = 2}};
    Net() {
      register_module("dense", dense);
      register_module("bn", bn);
    }
  } net;
  const auto before = net.named_parameters();
  const gd::Tensor<float> kernel = before.front().second.value().clone();
  CHECK(net.device() == gd::cpu);
  net.to(kFake);
  CHECK(net.device() == kFake);
  for (const auto& [name, v] : net.named_parameters()) {
    INFO(name);
    CHECK(v.value().device() == kFake);
  }
  for (const auto& [name, b] : net.named_buffers()) {
    INFO(name);
    CHECK(b.device() == kFake);
  }
  CHECK(net.bn.moving_mean().device() == kFake);  // the layer's own handles follow
  CHECK(net.bn.moving_variance().device() == kFake);
  // the same Vars (an optimizer made before the move still holds them), values unchanged
  const auto after = net.named_parameters();
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i].second.node() == before[i].second.node());
  net.to(gd::cpu);
  CHECK(net.device() == gd::cpu);
  const gd::Tensor<float> back = net.named_parameters().front().second.value();
  CHECK(std::vector<float>(back.begin(), back.end()) == std::vector<float>(kernel.begin(), kernel.end()));
  CHECK(net.bn.moving_variance()(1) == 1.f);
}
