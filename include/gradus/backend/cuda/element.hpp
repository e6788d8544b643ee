// gradus/backend/cuda/element.hpp — one element with the methods of an Eigen array, so the op
// structs of ops/elementwise_math.hpp run on a GPU unchanged: a generated kernel computes
// `ops::Tanh::forward(Element<float>{x[i]})` where the CPU computes it on a block of 512.
//
// This header is compiled both by NVRTC (inside every generated kernel) and by the host
// compiler (tests compare it with Eigen element by element), so it includes nothing.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GRADUS_ELEMENT_FN __host__ __device__ inline
#define GRADUS_ELEMENT_MATH(f) ::f
#else
#include <cmath>
#define GRADUS_ELEMENT_FN inline
#define GRADUS_ELEMENT_MATH(f) std::f
#endif

namespace gradus::backend::cuda {

template <class T>
struct Mask;

/// One element of type T (float or double) behaving as a one-element Eigen array.
template <class T>
struct Element {
  using Scalar = T;
  T v;

  GRADUS_ELEMENT_FN Element operator-() const { return {-v}; }
  GRADUS_ELEMENT_FN Element abs() const { return {GRADUS_ELEMENT_MATH(fabs)(v)}; }
  GRADUS_ELEMENT_FN Element sign() const { return {T(v > T(0)) - T(v < T(0))}; }
  GRADUS_ELEMENT_FN Element exp() const { return {GRADUS_ELEMENT_MATH(exp)(v)}; }
  GRADUS_ELEMENT_FN Element log() const { return {GRADUS_ELEMENT_MATH(log)(v)}; }
  GRADUS_ELEMENT_FN Element log1p() const { return {GRADUS_ELEMENT_MATH(log1p)(v)}; }
  GRADUS_ELEMENT_FN Element sqrt() const { return {GRADUS_ELEMENT_MATH(sqrt)(v)}; }
  GRADUS_ELEMENT_FN Element rsqrt() const { return {T(1) / GRADUS_ELEMENT_MATH(sqrt)(v)}; }
  GRADUS_ELEMENT_FN Element square() const { return {v * v}; }
  GRADUS_ELEMENT_FN Element cube() const { return {v * v * v}; }
  GRADUS_ELEMENT_FN Element sin() const { return {GRADUS_ELEMENT_MATH(sin)(v)}; }
  GRADUS_ELEMENT_FN Element cos() const { return {GRADUS_ELEMENT_MATH(cos)(v)}; }
  GRADUS_ELEMENT_FN Element tanh() const { return {GRADUS_ELEMENT_MATH(tanh)(v)}; }
  GRADUS_ELEMENT_FN Element erf() const { return {GRADUS_ELEMENT_MATH(erf)(v)}; }
  /// 1 / (1 + e^-x), without overflow for large |x| (as Eigen's logistic).
  GRADUS_ELEMENT_FN Element logistic() const {
    if (v >= T(0)) return {T(1) / (T(1) + GRADUS_ELEMENT_MATH(exp)(-v))};
    const T e = GRADUS_ELEMENT_MATH(exp)(v);
    return {e / (T(1) + e)};
  }
  GRADUS_ELEMENT_FN Element max(Element o) const { return {v < o.v ? o.v : v}; }
  GRADUS_ELEMENT_FN Element min(Element o) const { return {o.v < v ? o.v : v}; }
  GRADUS_ELEMENT_FN Element max(T o) const { return max(Element{o}); }
  GRADUS_ELEMENT_FN Element min(T o) const { return min(Element{o}); }
  GRADUS_ELEMENT_FN Element pow(Element e) const { return {GRADUS_ELEMENT_MATH(pow)(v, e.v)}; }
  GRADUS_ELEMENT_FN Element pow(T e) const { return pow(Element{e}); }
};

/// The result of comparing elements: Eigen's boolean array, for `select` and `cast`.
template <class T>
struct Mask {
  bool b;
  template <class A, class B>
  GRADUS_ELEMENT_FN Element<T> select(A then, B otherwise) const {
    return b ? Element<T>{value(then)} : Element<T>{value(otherwise)};
  }
  template <class U>
  GRADUS_ELEMENT_FN Element<U> cast() const {
    return {b ? U(1) : U(0)};
  }
  GRADUS_ELEMENT_FN Mask operator&&(Mask o) const { return {b && o.b}; }
  GRADUS_ELEMENT_FN Mask operator||(Mask o) const { return {b || o.b}; }

 private:
  GRADUS_ELEMENT_FN static T value(Element<T> e) { return e.v; }
  GRADUS_ELEMENT_FN static T value(T x) { return x; }
};

#define GRADUS_ELEMENT_ARITH(OP)                                                                          \
  template <class T>                                                                                    \
  GRADUS_ELEMENT_FN Element<T> operator OP(Element<T> a, Element<T> b) { return {a.v OP b.v}; }         \
  template <class T>                                                                                    \
  GRADUS_ELEMENT_FN Element<T> operator OP(Element<T> a, T b) { return {a.v OP b}; }                    \
  template <class T>                                                                                    \
  GRADUS_ELEMENT_FN Element<T> operator OP(T a, Element<T> b) { return {a OP b.v}; }
GRADUS_ELEMENT_ARITH(+)
GRADUS_ELEMENT_ARITH(-)
GRADUS_ELEMENT_ARITH(*)
GRADUS_ELEMENT_ARITH(/)
#undef GRADUS_ELEMENT_ARITH

#define GRADUS_ELEMENT_COMPARE(OP)                                                                       \
  template <class T>                                                                                   \
  GRADUS_ELEMENT_FN Mask<T> operator OP(Element<T> a, Element<T> b) { return {a.v OP b.v}; }           \
  template <class T>                                                                                   \
  GRADUS_ELEMENT_FN Mask<T> operator OP(Element<T> a, T b) { return {a.v OP b}; }                      \
  template <class T>                                                                                   \
  GRADUS_ELEMENT_FN Mask<T> operator OP(T a, Element<T> b) { return {a OP b.v}; }
GRADUS_ELEMENT_COMPARE(>)
GRADUS_ELEMENT_COMPARE(<)
GRADUS_ELEMENT_COMPARE(>=)
GRADUS_ELEMENT_COMPARE(<=)
GRADUS_ELEMENT_COMPARE(==)
GRADUS_ELEMENT_COMPARE(!=)
#undef GRADUS_ELEMENT_COMPARE

}  // namespace gradus::backend::cuda
