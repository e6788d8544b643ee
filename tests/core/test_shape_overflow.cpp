// Shapes whose element count (or any stride) does not fit in int64 are rejected where they are
// made, with a shape_error that names the shape — whatever zeros they contain.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <gradus/gradus.hpp>
#include "../support/sanitizers.hpp"
#include <string>

namespace gd = gradus;
using Catch::Matchers::Contains;

namespace {
constexpr int64_t kHuge = (int64_t(1) << 62) + 1;  // 2^62 + 1
}

TEST_CASE("shape overflow: an element count that wraps is a shape_error naming the shape", "[shape]") {
  // The product of these wraps to 6 in int64 arithmetic.
  CHECK_THROWS_AS(gd::Tensor<float>::zeros({2, 3, kHuge, kHuge, kHuge, kHuge}), gd::shape_error);
  CHECK_THROWS_WITH(gd::Shape({2, 3, kHuge, kHuge, kHuge, kHuge}),
                    Contains("[2,3,4611686018427387905,4611686018427387905,") && Contains("int64"));
  CHECK_THROWS_AS(gd::Tensor<double>::zeros({int64_t(1) << 32, int64_t(1) << 32}), gd::shape_error);
}

TEST_CASE("shape overflow: a zero dimension does not hide the others", "[shape]") {
  CHECK_THROWS_AS(gd::Shape({0, int64_t(1) << 62, 4}), gd::shape_error);
  CHECK_THROWS_AS(gd::Shape({int64_t(1) << 62, 0, int64_t(1) << 62}), gd::shape_error);
  CHECK(gd::Shape::count(std::vector<int64_t>{0, int64_t(1) << 62, 4}) == -1);
  // Bounded dimensions with a zero are an ordinary empty shape.
  const gd::Shape ok{0, int64_t(1) << 40, int64_t(1) << 20};
  CHECK(ok.numel() == 0);
  CHECK(gd::row_major_strides(ok)[0] == int64_t(1) << 60);
  auto empty = gd::Tensor<float>::zeros({3, 0, 1000});
  CHECK(empty.size() == 0);
  CHECK(gd::eval(gd::sum(empty, 1)).size() == 3000);
}

TEST_CASE("shape overflow: growing or editing a shape is checked too", "[shape]") {
  gd::Shape s{int64_t(1) << 40};
  CHECK_THROWS_AS(s.push_back(int64_t(1) << 30), gd::shape_error);
  gd::Shape t{int64_t(1) << 40, 1};
  CHECK_THROWS_AS(t.insert(0, int64_t(1) << 30), gd::shape_error);
  gd::Shape u{2, 2};
  u[1] = int64_t(1) << 62;
  CHECK_THROWS_AS(u.numel(), gd::shape_error);
  CHECK_THROWS_AS(gd::row_major_strides(u), gd::shape_error);
}

TEST_CASE("shape overflow: a count that fits but whose bytes do not is a shape_error", "[shape]") {
  CHECK_THROWS_WITH(gd::Tensor<float>::zeros({int64_t(1) << 62}), Contains("bytes"));
}

TEST_CASE("tensor size: past gd::kMaxTensorBytes is a shape_error before any allocation", "[shape]") {
  // 2^40 floats (4 TiB) asked the system for them: std::bad_alloc, or an abort under AddressSanitizer
  CHECK_THROWS_WITH(gd::Tensor<float>::zeros({int64_t(1) << 40}),
                    Contains("[1099511627776]") && Contains("4398046511104 bytes") && Contains("kMaxTensorBytes"));
  CHECK_THROWS_WITH(gd::Tensor<double>({int64_t(1) << 61}), Contains("more than 2^63 bytes"));  // bytes that wrap
  CHECK_THROWS_AS(gd::Tensor<int64_t>::empty({gd::kMaxTensorBytes / 8 + 1}), gd::shape_error);
  CHECK(gd::Tensor<float>::zeros({1 << 20}).size() == 1 << 20);
}

#if !GRADUS_TEST_ASAN
// (AddressSanitizer reserves terabytes of address space: no address-space limit can be set under it)
TEST_CASE("tensor size: an allocation the system refuses is a value_error naming the shape", "[shape]") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const rlimit limit{size_t(1) << 30, size_t(1) << 30};  // 1 GiB of address space, then 4 GiB asked for
    if (::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(3);
    const auto before = gd::memory_stats();
    try {
      (void)gd::Tensor<float>({int64_t(1) << 30});
      ::_exit(2);
    } catch (const gd::value_error& e) {
      const std::string what = e.what();
      if (what.find("[1073741824]") == std::string::npos || what.find("out of memory") == std::string::npos) ::_exit(4);
      const auto after = gd::memory_stats();  // a failed allocation is not counted as in use
      ::_exit(after.bytes_in_use == before.bytes_in_use && after.system_allocations == before.system_allocations ? 0 : 5);
    } catch (...) {
      ::_exit(1);  // std::bad_alloc
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
#endif

TEST_CASE("shape overflow: reshape into a shape that cannot exist says so", "[shape]") {
  auto x = gd::Tensor<float>::zeros({2, 3});
  const auto message = [&](std::vector<int64_t> dims) {
    try {
      x.reshape(dims);
    } catch (const gd::shape_error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const std::string m = message({int64_t(1) << 62, 4});
  CHECK_THAT(m, Contains("cannot reshape [2,3] (6 elements) into [4611686018427387904,4]") &&
                    Contains("more than 9223372036854775807 elements"));
  CHECK_THAT(m, !Contains("(0 elements)"));
  CHECK_THAT(message({2, 3, kHuge, kHuge, kHuge, kHuge}), Contains("more than"));
  CHECK_THAT(message({0, kHuge, kHuge}), Contains("more than"));
  CHECK_THAT(message({-1, kHuge, kHuge}), Contains("more than"));
  gd::Var<float> v(x);
  CHECK_THROWS_AS(gd::reshape(v, {int64_t(1) << 62, 4}), gd::shape_error);
  CHECK(x.reshape({3, -1}).shape() == gd::Shape{3, 2});
}
