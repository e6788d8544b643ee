#include <catch2/catch.hpp>
#include <gradus/gradus.hpp>
#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace gd = gradus;

TEST_CASE("tensor: factories, shape and element access", "[tensor]") {
  auto z = gd::Tensor<float>::zeros({2, 3});
  CHECK(z.shape() == gd::Shape{2, 3});
  CHECK(z.rank() == 2);
  CHECK(z.size() == 6);
  CHECK(z(1, 2) == 0.f);
  z(1, 2) = 5.f;
  CHECK(z.data()[5] == 5.f);
  CHECK(z(-1, -1) == 5.f);  // negative indices count from the end
  CHECK(gd::Tensor<double>::ones({4})(3) == 1.0);
  CHECK(gd::Tensor<int64_t>::full({2, 2}, 7)(1, 0) == 7);
  auto f = gd::Tensor<double>::from({1, 2, 3, 4, 5, 6}, {3, 2});
  CHECK(f(2, 1) == 6.0);
  CHECK(gd::Tensor<float>::scalar(2.5f).item() == 2.5f);
  CHECK(gd::Tensor<float>::scalar(2.5f).rank() == 0);
  CHECK(gd::Tensor<int64_t>::arange(5)(4) == 4);
  CHECK(reinterpret_cast<uintptr_t>(f.data()) % 64 == 0);
}

TEST_CASE("tensor: handles share storage, clone copies", "[tensor]") {
  auto a = gd::Tensor<float>::zeros({3});
  auto b = a;
  b(0) = 1.f;
  CHECK(a(0) == 1.f);
  CHECK(a.shares_storage(b));
  auto c = a.clone();
  c(0) = 2.f;
  CHECK(a(0) == 1.f);
  CHECK_FALSE(a.shares_storage(c));
  auto r = a.reshape({1, -1});
  CHECK(r.shape() == gd::Shape{1, 3});
  CHECK(r.shares_storage(a));
}

TEST_CASE("tensor: bad input throws errors naming the problem", "[tensor][errors]") {
  auto t = gd::Tensor<float>::zeros({2, 3});
  CHECK_THROWS_AS(t(2, 0), gd::value_error);
  CHECK_THROWS_WITH(t(0), Catch::Contains("1 indices for a tensor of rank 2"));
  CHECK_THROWS_WITH(t.item(), Catch::Contains("one element") && Catch::Contains("[2,3]"));
  CHECK_THROWS_AS(gd::Tensor<float>::from({1, 2, 3}, {2, 2}), gd::shape_error);
  CHECK_THROWS_WITH(t.reshape({4, -1}), Catch::Contains("cannot reshape [2,3]"));
  CHECK_THROWS_WITH(t.reshape({-1, -1}), Catch::Contains("more than one -1"));
  CHECK_THROWS_AS(gd::Tensor<float>::zeros({-1}), gd::value_error);
  CHECK_THROWS_AS(gd::Shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), gd::value_error);
  try {
    t.item();
  } catch (const gd::error&) {  // every gradus exception derives from gd::error
    SUCCEED();
  }
}

TEST_CASE("tensor: printing", "[tensor]") {
  std::ostringstream os;
  os << gd::Tensor<float>::from({1, 2, 3, 4}, {2, 2});
  CHECK(os.str() == "Tensor([[1, 2],\n        [3, 4]], shape=[2,2])");
  std::ostringstream big;
  big << gd::Tensor<float>::zeros({2000});
  CHECK(big.str().find("...") != std::string::npos);
}

TEST_CASE("tensor: random factories draw from an explicit Rng, reproducibly", "[tensor][rng]") {
  gd::Rng r1(42), r2(42);
  auto a = gd::Tensor<double>::random_normal({20000}, r1, 1.0, 2.0);
  auto b = gd::Tensor<double>::random_normal({20000}, r2, 1.0, 2.0);
  CHECK(gd::eval(gd::sum(a != b)).item() == 0.0);
  const double mean = gd::eval(gd::mean(a)).item();
  const double sd = std::sqrt(gd::eval(gd::mean(gd::square(a - mean))).item());
  CHECK(mean == Approx(1.0).margin(4 * 2.0 / std::sqrt(20000.0)));
  CHECK(sd == Approx(2.0).epsilon(0.03));
  auto u = gd::Tensor<float>::random_uniform({20000}, r1, -1, 3);
  CHECK(gd::eval(gd::min(u)).item() >= -1.f);
  CHECK(gd::eval(gd::max(u)).item() < 3.f);
  CHECK(gd::eval(gd::mean(u)).item() == Approx(1.0).margin(0.05));
  const auto state = r1.state();
  const double x = r1.uniform();
  r1.set_state(state);
  CHECK(r1.uniform() == x);
}

TEST_CASE("allocator: released buffers are reused, not returned to the system", "[tensor][memory]") {
  { auto warm = gd::Tensor<float>::zeros({1 << 20}); }
  const auto before = gd::memory_stats();
  for (int i = 0; i < 10; ++i) {
    auto t = gd::Tensor<float>::zeros({1 << 20});
    t(0) = float(i);
  }
  const auto after = gd::memory_stats();
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(after.cache_hits - before.cache_hits == 10);
  // size classes: at most 25 % slack above 4 KiB
  for (size_t bytes : {size_t(5000), size_t(1) << 20, (size_t(1) << 20) + 1, size_t(3) << 25}) {
    const int c = gd::detail::CachingAllocator::size_class(bytes);
    const size_t cap = gd::detail::CachingAllocator::class_bytes(c);
    CHECK(cap >= bytes);
    CHECK(double(cap) <= 1.25 * double(bytes) + 64);
  }
}

TEST_CASE("guard_main: an escaping gd::error becomes one line and status 1", "[error]") {
  std::ostringstream err;
  CHECK(gd::guard_main([] { return 3; }, err) == 3);
  CHECK(gd::guard_main([] {}, err) == 0);
  CHECK(err.str().empty());
  CHECK(gd::guard_main([]() -> int { (void)gd::Tensor<float>::zeros({2, 3}).reshape({4}); return 0; }, err) == 1);
  const std::string line = err.str();
  CHECK(line.rfind("error: reshape", 0) == 0);
  CHECK(line.back() == '\n');
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  // other exceptions are not a gradus mistake: they pass through
  CHECK_THROWS_AS(gd::guard_main([] { throw std::logic_error("x"); }, err), std::logic_error);
}
