// gradus/backend/cuda/nvrtc_prelude.hpp — the few standard-library names ops/elementwise_math.hpp
// uses, for NVRTC, which compiles generated kernels without a C++ standard library. Included
// first by every generated kernel; empty for any other compiler.
#pragma once
#if defined(__CUDACC_RTC__)
namespace std {
template <class T> struct remove_cvref { using type = T; };
template <class T> struct remove_cvref<const T> { using type = T; };
template <class T> struct remove_cvref<T&> { using type = T; };
template <class T> struct remove_cvref<const T&> { using type = T; };
template <class T> using remove_cvref_t = typename remove_cvref<T>::type;

/// Enough of string_view for the ops' `name` constants.
struct string_view {
  const char* p;
  unsigned long n;
  constexpr string_view(const char* s) : p(s), n(0) {
    while (s[n]) ++n;
  }
  constexpr const char* data() const { return p; }
  constexpr unsigned long size() const { return n; }
};

/// Enough of array for the ops' `kinks` constants.
template <class T, unsigned long N>
struct array {
  T v[N];
  __host__ __device__ constexpr const T& operator[](unsigned long i) const { return v[i]; }
};

namespace numbers {
inline constexpr double sqrt2 = 1.41421356237309504880168872420969808;
inline constexpr double inv_sqrtpi = 0.564189583547756286948079451560772586;
}  // namespace numbers
}  // namespace std
#endif
