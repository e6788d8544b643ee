// src/onnx/run.cpp — the ONNX operators as gradus ops, and a Model's forward pass.
//
// Each entry of op_table() runs one node on its input slots: float values are Vars (so the graph
// is differentiable end to end), int64 values (shapes, axes, indices) are host tensors, computed
// with plain loops. An entry's `check` refuses, at load time, the attribute values it does not
// implement, so that a model that loads runs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "gradus/gradus.hpp"
#include "src/onnx/graph.hpp"

namespace gradus::onnx {
namespace detail {

using gradus::detail::str;

// --- Exec -----------------------------------------------------------------------------------

const Slot& Exec::slot(size_t k) const {
  if (!given(k)) fail(str("input ", k, " is missing"));
  const Slot& s = env[size_t(node.in[k])];
  if (std::holds_alternative<std::monostate>(s)) fail(str("input ", k, " has no value (no node computes it)"));
  return s;
}

Var<float> Exec::var(size_t k) const {
  const Slot& s = slot(k);
  if (const auto* v = std::get_if<Var<float>>(&s)) return *v;
  const Tensor<float> f = gradus::cast<float>(std::get<Tensor<int64_t>>(s));
  return Var<float>::constant(device == gradus::cpu ? f : f.to(device));
}

Tensor<int64_t> Exec::ints(size_t k) const {
  const Slot& s = slot(k);
  if (const auto* t = std::get_if<Tensor<int64_t>>(&s)) return *t;
  const Tensor<float> f = std::get<Var<float>>(s).value().to(gradus::cpu);
  auto out = Tensor<int64_t>::empty(f.shape());
  for (int64_t i = 0; i < f.size(); ++i) {
    const float v = f.data()[i];
    if (!std::isfinite(v) || std::fabs(v) > 9.2e18f) fail(str("input ", k, " holds ", v, ", not an integer"));
    out.data()[i] = int64_t(v);
  }
  return out;
}

std::vector<int64_t> Exec::int_list(size_t k) const {
  const Tensor<int64_t> t = ints(k);
  return std::vector<int64_t>(t.data(), t.data() + t.size());
}

double Exec::number(size_t k) const {
  const Slot& s = slot(k);
  if (const auto* t = std::get_if<Tensor<int64_t>>(&s)) {
    if (t->size() != 1) fail(str("input ", k, " must hold one value; it has shape ", t->shape()));
    return double(t->data()[0]);
  }
  const Tensor<float> f = std::get<Var<float>>(s).value().to(gradus::cpu);
  if (f.size() != 1) fail(str("input ", k, " must hold one value; it has shape ", f.shape()));
  return double(f.data()[0]);
}

void Exec::set(size_t k, Slot v) const {
  if (node.wanted(k)) env[size_t(node.out[k])] = std::move(v);
}

void Exec::fail(std::string_view why) const { node_error(node, why); }

namespace {

// --- helpers ---------------------------------------------------------------------------------

std::vector<int64_t> dims_of(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

int64_t axis_of(const Exec& e, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) e.fail(str("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

Var<float> constant(const Exec& e, Tensor<float> t) {
  return Var<float>::constant(e.device == gradus::cpu ? std::move(t) : t.to(e.device));
}

/// NumPy's broadcast of two shapes.
Shape broadcast(const Exec& e, const Shape& a, const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(size_t(r), 1);
  for (int i = 0; i < r; ++i) {
    const int64_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    const int64_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    if (da != db && da != 1 && db != 1) e.fail(str("shapes ", a, " and ", b, " do not broadcast"));
    out[size_t(i)] = da == 1 ? db : da;
  }
  return Shape(out);
}

/// Offsets into a tensor of shape `s` for each element of the broadcast shape `out`.
std::vector<int64_t> broadcast_offsets(const Shape& s, const Shape& out) {
  const int r = out.rank(), pad = r - s.rank();
  std::vector<int64_t> stride(size_t(r), 0);
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    stride[size_t(i + pad)] = s[i] == 1 ? 0 : acc;
    acc *= s[i];
  }
  const int64_t n = out.numel();
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  std::vector<int64_t> idx(size_t(r), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (int i = 0; i < r; ++i) off += idx[size_t(i)] * stride[size_t(i)];
    offsets[size_t(k)] = off;
    for (int i = r - 1; i >= 0; --i) {
      if (++idx[size_t(i)] < out[i]) break;
      idx[size_t(i)] = 0;
    }
  }
  return offsets;
}

/// `f` of the elements of `a` and `b` broadcast together, on the host, as int64 (shape arithmetic).
template <class A, class B, class F>
Tensor<int64_t> int_binary(const Exec& e, const Tensor<A>& a, const Tensor<B>& b, F f) {
  const Shape s = broadcast(e, a.shape(), b.shape());
  const auto oa = broadcast_offsets(a.shape(), s), ob = broadcast_offsets(b.shape(), s);
  auto out = Tensor<int64_t>::empty(s);
  for (size_t k = 0; k < oa.size(); ++k) out.data()[k] = f(a.data()[oa[k]], b.data()[ob[k]]);
  return out;
}

/// Any slot reshaped (a Var without copying; an int64 tensor as a copy).
Slot reshaped(const Exec& e, size_t k, const std::vector<int64_t>& dims) {
  if (e.is_int(k)) return e.ints(k).clone().reshape(dims);
  return Var<float>(gradus::reshape(e.var(k), dims));
}

Shape shape_of_input(const Exec& e, size_t k) {
  return e.is_int(k) ? e.ints(k).shape() : e.var(k).shape();
}

std::vector<int64_t> axes_input(const Exec& e, size_t input, int64_t from_opset) {
  if (e.opset >= from_opset) return e.given(input) ? e.int_list(input) : std::vector<int64_t>{};
  return e.node.ints("axes");
}

// --- elementwise -----------------------------------------------------------------------------

#define GRADUS_ONNX_UNARY(expr) [](const Exec& e) { const Var<float> x = e.var(0); e.set(0, Var<float>(expr)); }

template <int Kind>  // 0 Add, 1 Sub, 2 Mul, 3 Div
void arithmetic(const Exec& e) {
  if (e.is_int(0) && e.is_int(1)) {
    e.set(0, int_binary(e, e.ints(0), e.ints(1), [&](int64_t a, int64_t b) -> int64_t {
            if constexpr (Kind == 0) return a + b;
            if constexpr (Kind == 1) return a - b;
            if constexpr (Kind == 2) return a * b;
            if (b == 0) e.fail("integer division by zero");
            const int64_t q = a / b;  // ONNX rounds integer division toward negative infinity? no: C's truncation, as numpy's int division in its tests
            return q;
          }));
    return;
  }
  const Var<float> a = e.var(0), b = e.var(1);
  if constexpr (Kind == 0) e.set(0, Var<float>(a + b));
  if constexpr (Kind == 1) e.set(0, Var<float>(a - b));
  if constexpr (Kind == 2) e.set(0, Var<float>(a * b));
  if constexpr (Kind == 3) e.set(0, Var<float>(a / b));
}

template <int Kind>  // 0 Max, 1 Min, 2 Sum, 3 Mean
void variadic(const Exec& e) {
  bool ints = Kind < 2;
  for (size_t k = 0; k < e.node.in.size(); ++k) ints = ints && e.given(k) && e.is_int(k);
  if (ints && !e.node.in.empty()) {
    Tensor<int64_t> acc = e.ints(0).clone();
    for (size_t k = 1; k < e.node.in.size(); ++k)
      acc = int_binary(e, acc, e.ints(k), [](int64_t a, int64_t b) { return Kind == 0 ? std::max(a, b) : std::min(a, b); });
    e.set(0, acc);
    return;
  }
  size_t n = 0;
  Var<float> acc;
  for (size_t k = 0; k < e.node.in.size(); ++k) {
    if (!e.given(k)) continue;
    const Var<float> x = e.var(k);
    if (n++ == 0) {
      acc = x;
      continue;
    }
    if constexpr (Kind == 0) acc = gradus::maximum(acc, x);
    if constexpr (Kind == 1) acc = gradus::minimum(acc, x);
    if constexpr (Kind >= 2) acc = acc + x;
  }
  if (n == 0) e.fail("needs at least one input");
  if constexpr (Kind == 3) acc = acc * (1.0f / float(n));
  e.set(0, acc);
}

/// Pow: the result has the base's element type (an int64 base gives int64, truncated).
void pow(const Exec& e) {
  if (!e.is_int(0)) {
    e.set(0, Var<float>(gradus::pow(e.var(0), e.var(1))));
    return;
  }
  const Tensor<float> exponent = e.var(1).value().to(gradus::cpu);  // an int64 exponent as float values
  e.set(0, int_binary(e, e.ints(0), exponent, [](int64_t b, float p) { return int64_t(std::pow(double(b), double(p))); }));
}

void clip(const Exec& e) {
  const Var<float> x = e.var(0);
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (e.opset >= 11) {
    if (e.given(1)) lo = e.number(1);
    if (e.given(2)) hi = e.number(2);
  } else {
    lo = e.node.f("min", -std::numeric_limits<float>::max());
    hi = e.node.f("max", std::numeric_limits<float>::max());
  }
  e.set(0, Var<float>(gradus::clamp(x, lo, hi)));
}

void selu(const Exec& e) {
  const Var<float> x = e.var(0);
  const float alpha = e.node.f("alpha", 1.67326319217681884765625f), gamma = e.node.f("gamma", 1.05070102214813232421875f);
  e.set(0, Var<float>(gamma * gradus::where(x > 0.0f, x, alpha * (gradus::exp(x) - 1.0f))));
}

void prelu(const Exec& e) {
  const Var<float> x = e.var(0), slope = e.var(1);
  e.set(0, Var<float>(gradus::where(x < 0.0f, slope * x, x + 0.0f * slope)));
}

// --- comparisons and logic: bool tensors are float masks of 0 and 1 --------------------------

template <int Kind>  // 0 Greater, 1 Less, 2 GreaterOrEqual, 3 LessOrEqual, 4 Equal
void compare(const Exec& e) {
  if (e.is_int(0) && e.is_int(1)) {  // shape arithmetic: computed on the host, given as a mask
    const Tensor<int64_t> r = int_binary(e, e.ints(0), e.ints(1), [](int64_t a, int64_t b) -> int64_t {
      return Kind == 0 ? a > b : Kind == 1 ? a < b : Kind == 2 ? a >= b : Kind == 3 ? a <= b : a == b;
    });
    e.set(0, constant(e, gradus::cast<float>(r)));
    return;
  }
  const Var<float> a = e.var(0), b = e.var(1);
  if constexpr (Kind == 0) e.set(0, Var<float>(a > b));
  if constexpr (Kind == 1) e.set(0, Var<float>(a < b));
  if constexpr (Kind == 2) e.set(0, Var<float>(a >= b));
  if constexpr (Kind == 3) e.set(0, Var<float>(a <= b));
  if constexpr (Kind == 4) e.set(0, Var<float>(a == b));
}

template <int Kind>  // 0 And, 1 Or, 2 Xor (of 0/1 masks)
void logic(const Exec& e) {
  const Var<float> a = e.var(0), b = e.var(1);
  if constexpr (Kind == 0) e.set(0, Var<float>(a * b));
  if constexpr (Kind == 1) e.set(0, Var<float>(gradus::maximum(a, b)));
  if constexpr (Kind == 2) e.set(0, Var<float>(a != b));
}

void where(const Exec& e) {
  if (e.is_int(1) && e.is_int(2)) {  // int64 values: on the host
    const Tensor<float> mask = e.var(0).value().to(gradus::cpu);
    const Tensor<int64_t> a = e.ints(1), b = e.ints(2);
    const Shape s = broadcast(e, broadcast(e, mask.shape(), a.shape()), b.shape());
    const auto om = broadcast_offsets(mask.shape(), s), oa = broadcast_offsets(a.shape(), s), ob = broadcast_offsets(b.shape(), s);
    auto out = Tensor<int64_t>::empty(s);
    for (size_t k = 0; k < om.size(); ++k) out.data()[k] = mask.data()[om[k]] != 0.0f ? a.data()[oa[k]] : b.data()[ob[k]];
    e.set(0, out);
    return;
  }
  const Var<float> c = e.var(0), a = e.var(1), b = e.var(2);
  e.set(0, Var<float>(gradus::where(c, a, b)));
}

// --- matrix products -------------------------------------------------------------------------

void gemm(const Exec& e) {
  const Var<float> a = e.var(0), b = e.var(1);
  if (a.shape().rank() != 2 || b.shape().rank() != 2) e.fail(str("A and B must be matrices; they are ", a.shape(), " and ", b.shape()));
  const float alpha = e.node.f("alpha", 1.0f), beta = e.node.f("beta", 1.0f);
  Var<float> y = gradus::matmul(a, b, {.transpose_a = e.node.i("transA", 0) != 0, .transpose_b = e.node.i("transB", 0) != 0});
  if (alpha != 1.0f) y = y * alpha;
  if (e.given(2)) y = beta == 1.0f ? Var<float>(y + e.var(2)) : Var<float>(y + beta * e.var(2));
  e.set(0, y);
}

// --- windows: Conv, pooling ------------------------------------------------------------------

/// The spatial geometry of a window node over an NCHW (or NCL) input.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, begin, end;  // per spatial axis
  std::vector<int64_t> ceil_extra;                              // end padding added by ceil_mode
};

Window window_of(const Exec& e, const Shape& x, std::vector<int64_t> kernel) {
  const size_t n = size_t(x.rank() - 2);
  Window w;
  w.kernel = std::move(kernel);
  if (w.kernel.size() != n) e.fail(str("kernel_shape has ", w.kernel.size(), " values for ", n, " spatial axes"));
  w.strides = e.node.ints("strides", std::vector<int64_t>(n, 1));
  w.dilations = e.node.ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = e.node.ints("pads", std::vector<int64_t>(2 * n, 0));
  if (w.strides.size() != n || w.dilations.size() != n || pads.size() != 2 * n)
    e.fail("strides, dilations and pads must give one value per spatial axis (pads: two)");
  w.begin.assign(pads.begin(), pads.begin() + long(n));
  w.end.assign(pads.begin() + long(n), pads.end());
  w.ceil_extra.assign(n, 0);
  const std::string pad = e.node.s("auto_pad", "NOTSET");
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = x[int(i) + 2], s = w.strides[i], span = (w.kernel[i] - 1) * w.dilations[i] + 1;
    if (s < 1 || w.kernel[i] < 1 || w.dilations[i] < 1) e.fail("kernel_shape, strides and dilations must be positive");
    if (pad == "VALID") {
      w.begin[i] = w.end[i] = 0;
    } else if (pad == "SAME_UPPER" || pad == "SAME_LOWER") {
      const int64_t out = (in + s - 1) / s, total = std::max<int64_t>(0, (out - 1) * s + span - in);
      w.begin[i] = pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[i] = total - w.begin[i];
    }
    if (w.begin[i] < 0 || w.end[i] < 0) e.fail("negative pads are not supported");
    if (e.node.i("ceil_mode", 0) != 0) {
      const int64_t padded = in + w.begin[i] + w.end[i], room = padded - span;
      int64_t out = (room >= 0 ? (room + s - 1) / s : -(-room / s)) + 1;  // ceil(room / s) + 1
      if (out > 1 && (out - 1) * s >= in + w.begin[i]) --out;  // the last window starts inside the input or its begin pad
      if (out >= 1) w.ceil_extra[i] = std::max<int64_t>(0, (out - 1) * s + span - padded);
    }
  }
  return w;
}

/// NCHW or NCL -> NHWC (a length axis becomes a width with height 1).
Var<float> to_nhwc(const Exec& e, const Var<float>& x) {
  if (x.shape().rank() == 4) return gradus::transpose(x, {0, 2, 3, 1});
  if (x.shape().rank() == 3) {
    const Var<float> x4 = gradus::reshape(x, {x.shape()[0], x.shape()[1], 1, x.shape()[2]});
    return gradus::transpose(x4, {0, 2, 3, 1});
  }
  e.fail(str("takes NCHW or NCL input; it got shape ", x.shape()));
}
Var<float> from_nhwc(const Var<float>& y, int rank) {
  const Var<float> t = gradus::transpose(y, {0, 3, 1, 2});
  if (rank == 4) return t;
  return gradus::reshape(t, {t.shape()[0], t.shape()[1], t.shape()[3]});
}
/// A window's per-axis numbers as {height, width} (height 1 for a 1-D window).
std::array<int64_t, 2> hw(const std::vector<int64_t>& v, int64_t one = 1) {
  return v.size() == 2 ? std::array<int64_t, 2>{v[0], v[1]} : std::array<int64_t, 2>{one, v[0]};
}

Var<float> pad_nhwc(const Var<float>& x, const std::array<int64_t, 2>& begin, const std::array<int64_t, 2>& end, float value) {
  if (begin == std::array<int64_t, 2>{0, 0} && end == std::array<int64_t, 2>{0, 0}) return x;
  return gradus::pad(x, {{0, 0}, {begin[0], end[0]}, {begin[1], end[1]}, {0, 0}}, value);
}

void conv(const Exec& e) {
  const Var<float> x = e.var(0), w = e.var(1);
  const int rank = x.shape().rank();
  if (w.shape().rank() != rank) e.fail(str("input ", x.shape(), " and weight ", w.shape(), " differ in rank"));
  const std::vector<int64_t> kernel = e.node.ints("kernel_shape", std::vector<int64_t>(w.shape().begin() + 2, w.shape().end()));
  const Window win = window_of(e, x.shape(), kernel);
  const int64_t groups = e.node.i("group", 1), c = x.shape()[1], m = w.shape()[0];
  if (groups < 1 || c % groups || m % groups || w.shape()[1] * groups != c)
    e.fail(str("input ", x.shape(), ", weight ", w.shape(), " and group ", groups, " do not agree"));
  Var<float> xh = to_nhwc(e, x);
  xh = pad_nhwc(xh, hw(win.begin, 0), hw(win.end, 0), 0.0f);
  // weight [M, C/g, kH, kW] -> [kH, kW, C/g, M]
  Var<float> wh = rank == 4 ? Var<float>(gradus::transpose(w, {2, 3, 1, 0}))
                            : Var<float>(gradus::transpose(gradus::reshape(w, {m, w.shape()[1], 1, w.shape()[2]}), {2, 3, 1, 0}));
  const Conv2dArgs args{.strides = hw(win.strides), .padding = Padding::valid, .dilations = hw(win.dilations)};
  std::vector<Var<float>> parts;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t cg = c / groups, mg = m / groups;
    const Var<float> xg = groups == 1 ? xh : Var<float>(gradus::slice(xh, {0, 0, 0, g * cg}, {-1, -1, -1, cg}));
    const Var<float> wg = groups == 1 ? wh : Var<float>(gradus::slice(wh, {0, 0, 0, g * mg}, {-1, -1, -1, mg}));
    if (e.given(2)) {
      const Var<float> b = e.var(2);
      const Var<float> bg = groups == 1 ? b : Var<float>(gradus::slice(b, {g * mg}, {mg}));
      parts.push_back(gradus::conv2d(xg, wg, bg, args));
    } else {
      parts.push_back(gradus::conv2d(xg, wg, args));
    }
  }
  const Var<float> y = groups == 1 ? parts[0] : Var<float>(gradus::concat(parts, 3));
  e.set(0, from_nhwc(y, rank));
}

void max_pool(const Exec& e) {
  const Var<float> x = e.var(0);
  const Window win = window_of(e, x.shape(), e.node.ints("kernel_shape"));
  std::vector<int64_t> end = win.end;
  for (size_t i = 0; i < end.size(); ++i) end[i] += win.ceil_extra[i];
  const Var<float> xh = pad_nhwc(to_nhwc(e, x), hw(win.begin, 0), hw(end, 0), -std::numeric_limits<float>::infinity());
  const Var<float> y = gradus::max_pool2d(xh, {.ksize = hw(win.kernel), .strides = hw(win.strides), .padding = Padding::valid});
  e.set(0, from_nhwc(y, x.shape().rank()));
}

void average_pool(const Exec& e) {
  const Var<float> x = e.var(0);
  const Window win = window_of(e, x.shape(), e.node.ints("kernel_shape"));
  std::vector<int64_t> end = win.end;
  bool padded = false;
  for (size_t i = 0; i < end.size(); ++i) {
    end[i] += win.ceil_extra[i];
    padded = padded || win.begin[i] || end[i];
  }
  const Pool2dOptions opts{.ksize = hw(win.kernel), .strides = hw(win.strides), .padding = Padding::valid};
  const Var<float> xh = to_nhwc(e, x);
  Var<float> y = gradus::avg_pool2d(pad_nhwc(xh, hw(win.begin, 0), hw(end, 0), 0.0f), opts);
  if (padded) {  // divide by the count of the window's elements that count: the input's (and the explicit pads')
    Tensor<float> den;
    {
      no_grad off;
      const Shape s = xh.shape();
      auto ones = Tensor<float>::ones({1, s[1], s[2], 1});
      Tensor<float> mask = ones;
      if (e.node.i("count_include_pad", 0) != 0)
        mask = gradus::pad(mask, {{0, 0}, {hw(win.begin, 0)[0], hw(win.end, 0)[0]}, {hw(win.begin, 0)[1], hw(win.end, 0)[1]}, {0, 0}}, 1.0f);
      std::vector<int64_t> rest_begin(win.begin.size(), 0), rest_end = end;
      if (e.node.i("count_include_pad", 0) != 0) rest_end = win.ceil_extra;
      else rest_begin = win.begin;
      mask = pad_nhwc(Var<float>::constant(mask), hw(rest_begin, 0), hw(rest_end, 0), 0.0f).value();
      den = gradus::avg_pool2d(mask, opts);
    }
    y = y / constant(e, den);
  }
  e.set(0, from_nhwc(y, x.shape().rank()));
}

template <bool Max>
void global_pool(const Exec& e) {
  Var<float> y = e.var(0);
  for (int a = 2; a < y.shape().rank(); ++a) y = Max ? Var<float>(gradus::max(y, a, true)) : Var<float>(gradus::mean(y, a, true));
  e.set(0, y);
}

// --- normalization ---------------------------------------------------------------------------

/// A per-channel vector [C] shaped to broadcast over axis 1 of a rank-`rank` tensor.
Var<float> per_channel(const Var<float>& v, int rank) {
  std::vector<int64_t> dims(size_t(std::max(rank - 1, 1)), 1);
  dims[0] = v.shape().numel();
  return gradus::reshape(v, dims);
}

void batch_norm(const Exec& e) {
  const Var<float> x = e.var(0);
  const int r = x.shape().rank();
  if (r < 2) e.fail(str("takes [N, C, ...] input; it got shape ", x.shape()));
  const float eps = e.node.f("epsilon", 1e-5f);
  const Var<float> scale = per_channel(e.var(1), r), bias = per_channel(e.var(2), r), mean = per_channel(e.var(3), r),
                   var = per_channel(e.var(4), r);
  e.set(0, Var<float>((x - mean) * (scale * gradus::rsqrt(var + eps)) + bias));
}

/// Mean over the axes [from, rank), kept.
Var<float> mean_from(const Var<float>& x, int from) {
  Var<float> m = x;
  for (int a = from; a < x.shape().rank(); ++a) m = gradus::mean(m, a, true);
  return m;
}

void layer_norm(const Exec& e) {
  const Var<float> x = e.var(0);
  const int r = x.shape().rank();
  const int axis = int(axis_of(e, e.node.i("axis", -1), r));
  const float eps = e.node.f("epsilon", 1e-5f);
  const Var<float> mu = mean_from(x, axis);
  const Var<float> d = x - mu;
  const Var<float> inv = gradus::rsqrt(mean_from(Var<float>(d * d), axis) + eps);
  Var<float> y = d * inv * e.var(1);
  if (e.given(2)) y = y + e.var(2);
  e.set(0, y);
  e.set(1, mu);
  e.set(2, inv);
}

void instance_norm(const Exec& e) {
  const Var<float> x = e.var(0);
  const int r = x.shape().rank();
  if (r < 3) e.fail(str("takes [N, C, D1, ...] input; it got shape ", x.shape()));
  const float eps = e.node.f("epsilon", 1e-5f);
  const Var<float> d = x - mean_from(x, 2);
  e.set(0, Var<float>(d * gradus::rsqrt(mean_from(Var<float>(d * d), 2) + eps) * per_channel(e.var(1), r) +
                      per_channel(e.var(2), r)));
}

template <bool Log>
void softmax(const Exec& e) {
  const Var<float> x = e.var(0);
  const int r = x.shape().rank();
  if (e.opset >= 13) {
    const int64_t axis = axis_of(e, e.node.i("axis", -1), r);
    e.set(0, Log ? Var<float>(gradus::log_softmax(x, axis)) : Var<float>(gradus::softmax(x, axis)));
    return;
  }
  // before opset 13: the input is read as a matrix [d0 * ... * d(axis-1), d(axis) * ... ]
  const int64_t axis = axis_of(e, e.node.i("axis", 1), std::max(r, 1));
  int64_t rows = 1;
  for (int64_t a = 0; a < axis; ++a) rows *= x.shape()[int(a)];
  const Var<float> m = gradus::reshape(x, {rows, -1});
  const Var<float> y = Log ? Var<float>(gradus::log_softmax(m, 1)) : Var<float>(gradus::softmax(m, 1));
  e.set(0, Var<float>(gradus::reshape(y, dims_of(x.shape()))));
}

// --- shape -----------------------------------------------------------------------------------

void reshape(const Exec& e) {
  const Shape in = shape_of_input(e, 0);
  std::vector<int64_t> dims = e.opset >= 5 ? e.int_list(1) : e.node.ints("shape");
  const bool allow_zero = e.node.i("allowzero", 0) != 0;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] == 0 && !allow_zero) {
      if (int(i) >= in.rank()) e.fail(str("shape entry ", i, " is 0 (copy), past the input's rank ", in.rank()));
      dims[i] = in[int(i)];
    }
  e.set(0, reshaped(e, 0, dims));
}

void flatten(const Exec& e) {
  const Shape in = shape_of_input(e, 0);
  const int64_t axis = e.node.i("axis", 1);
  if (axis < -in.rank() || axis > in.rank()) e.fail(str("axis ", axis, " is out of range for rank ", in.rank()));
  const int64_t a = axis < 0 ? axis + in.rank() : axis;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < in.rank(); ++i) (i < a ? outer : inner) *= in[i];
  e.set(0, reshaped(e, 0, {outer, inner}));
}

void squeeze(const Exec& e) {
  const Shape in = shape_of_input(e, 0);
  std::vector<int64_t> axes = axes_input(e, 1, 13);
  std::vector<bool> drop(size_t(in.rank()), false);
  if (axes.empty())
    for (int i = 0; i < in.rank(); ++i) drop[size_t(i)] = in[i] == 1;
  for (int64_t a : axes) {
    const int64_t n = axis_of(e, a, in.rank());
    if (in[int(n)] != 1) e.fail(str("axis ", a, " of shape ", in, " is not 1"));
    drop[size_t(n)] = true;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i)
    if (!drop[size_t(i)]) dims.push_back(in[i]);
  e.set(0, reshaped(e, 0, dims));
}

void unsqueeze(const Exec& e) {
  const Shape in = shape_of_input(e, 0);
  const std::vector<int64_t> axes = axes_input(e, 1, 13);
  const int64_t r = in.rank() + int64_t(axes.size());
  std::vector<bool> added(size_t(r), false);
  for (int64_t a : axes) {
    const int64_t n = axis_of(e, a, r);
    if (added[size_t(n)]) e.fail(str("axis ", a, " appears twice"));
    added[size_t(n)] = true;
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0, k = 0; i < r; ++i) dims.push_back(added[size_t(i)] ? 1 : in[int(k++)]);
  e.set(0, reshaped(e, 0, dims));
}

void transpose(const Exec& e) {
  const Var<float> x = e.var(0);
  std::vector<int64_t> perm = e.node.ints("perm");
  if (perm.empty())
    for (int i = x.shape().rank() - 1; i >= 0; --i) perm.push_back(i);
  e.set(0, Var<float>(gradus::transpose(x, perm)));
}

/// Host gather of int64 `data` along `axis` (shape arithmetic: Shape -> Gather).
Tensor<int64_t> int_gather(const Exec& e, const Tensor<int64_t>& data, const Tensor<int64_t>& idx, int64_t axis) {
  const Shape s = data.shape();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = int(axis) + 1; i < s.rank(); ++i) inner *= s[i];
  std::vector<int64_t> dims(s.begin(), s.begin() + axis);
  for (int64_t d : idx.shape()) dims.push_back(d);
  for (int i = int(axis) + 1; i < s.rank(); ++i) dims.push_back(s[i]);
  auto out = Tensor<int64_t>::empty(Shape(dims));
  int64_t* o = out.data();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t k = 0; k < idx.size(); ++k) {
      int64_t j = idx.data()[k];
      if (j < 0) j += s[int(axis)];
      if (j < 0 || j >= s[int(axis)]) e.fail(str("index ", idx.data()[k], " is out of range for ", s[int(axis)]));
      std::copy_n(data.data() + (a * s[int(axis)] + j) * inner, inner, o);
      o += inner;
    }
  return out;
}

void gather(const Exec& e) {
  const Shape s = shape_of_input(e, 0);
  const int64_t axis = axis_of(e, e.node.i("axis", 0), s.rank());
  Tensor<int64_t> idx = e.ints(1).clone();
  for (int64_t k = 0; k < idx.size(); ++k)
    if (idx.data()[k] < 0) idx.data()[k] += s[int(axis)];  // ONNX counts negative indices from the end
  if (e.is_int(0)) {
    e.set(0, int_gather(e, e.ints(0), idx, axis));
    return;
  }
  const Var<float> x = e.var(0);
  e.set(0, Var<float>(gradus::gather(x, idx, axis)));
}

void concat(const Exec& e) {
  bool ints = true;
  for (size_t k = 0; k < e.node.in.size(); ++k) ints = ints && e.given(k) && e.is_int(k);
  const Shape s0 = shape_of_input(e, 0);
  const int64_t axis = axis_of(e, e.node.i("axis", 0), std::max(s0.rank(), 1));
  if (ints) {
    std::vector<Tensor<int64_t>> parts;
    for (size_t k = 0; k < e.node.in.size(); ++k) parts.push_back(e.ints(k));
    e.set(0, gradus::concat(parts, axis));
    return;
  }
  std::vector<Var<float>> parts;
  for (size_t k = 0; k < e.node.in.size(); ++k)
    if (e.given(k)) parts.push_back(e.var(k));
  e.set(0, parts.size() == 1 ? parts[0] : Var<float>(gradus::concat(parts, axis)));
}

void split(const Exec& e) {
  const Var<float> x = e.var(0);
  const int64_t axis = axis_of(e, e.node.i("axis", 0), x.shape().rank());
  const int64_t dim = x.shape()[int(axis)];
  std::vector<int64_t> sizes = e.opset >= 13 ? (e.given(1) ? e.int_list(1) : std::vector<int64_t>{}) : e.node.ints("split");
  const size_t n = e.node.out.size();
  if (sizes.empty()) {
    if (dim % int64_t(n)) e.fail(str("cannot split ", dim, " evenly into ", n, " outputs"));
    sizes.assign(n, dim / int64_t(n));
  }
  if (sizes.size() != n || std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
    e.fail(str("split sizes must be one per output and add up to ", dim));
  int64_t at = 0;
  for (size_t k = 0; k < n; ++k) {
    std::vector<int64_t> begin(size_t(x.shape().rank()), 0), size(size_t(x.shape().rank()), -1);
    begin[size_t(axis)] = at;
    size[size_t(axis)] = sizes[k];
    e.set(k, Var<float>(gradus::slice(x, begin, size)));
    at += sizes[k];
  }
}

void slice(const Exec& e) {
  const Shape s = shape_of_input(e, 0);
  const int r = s.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (e.opset >= 10) {
    starts = e.int_list(1);
    ends = e.int_list(2);
    if (e.given(3)) axes = e.int_list(3);
    if (e.given(4)) steps = e.int_list(4);
  } else {
    starts = e.node.ints("starts");
    ends = e.node.ints("ends");
    axes = e.node.ints("axes");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    e.fail("starts, ends, axes and steps must have the same length");
  std::vector<int64_t> begin(size_t(r), 0), size(size_t(r), -1);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> strided;  // axis, indices
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = axis_of(e, axes[i], r), dim = s[int(a)], step = steps[i];
    if (step == 0) e.fail("a step of 0");
    int64_t b = starts[i], en = ends[i];
    if (b < 0) b += dim;
    if (en < 0) en += dim;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
    }
    if (step == 1) {
      begin[size_t(a)] = b;
      size[size_t(a)] = std::max<int64_t>(0, en - b);
    } else {
      std::vector<int64_t> idx;
      for (int64_t j = b; step > 0 ? j < en : j > en; j += step) idx.push_back(j);
      strided.emplace_back(a, std::move(idx));
    }
  }
  if (e.is_int(0)) {
    if (r != 1) e.fail("slices int64 tensors of rank 1 only");
    Tensor<int64_t> t = e.ints(0);
    const int64_t n = size[0] < 0 ? s[0] - begin[0] : size[0];
    Tensor<int64_t> out = Tensor<int64_t>::from(std::vector<int64_t>(t.data() + begin[0], t.data() + begin[0] + n));
    for (auto& [a, idx] : strided) out = int_gather(e, t, Tensor<int64_t>::from(idx), 0);
    e.set(0, out);
    return;
  }
  Var<float> y = gradus::slice(e.var(0), begin, size);
  for (auto& [a, idx] : strided) {
    if (idx.empty()) e.fail("an empty strided slice");
    y = gradus::gather(y, Tensor<int64_t>::from(idx), a);
  }
  e.set(0, y);
}

void pad(const Exec& e) {
  const std::string mode = e.node.s("mode", "constant");
  const Var<float> x = e.var(0);
  const int r = x.shape().rank();
  std::vector<int64_t> pads = e.opset >= 11 ? e.int_list(1) : e.node.ints("pads");
  if (pads.size() != size_t(2 * r)) e.fail(str("pads has ", pads.size(), " values for rank ", r));
  const double value = e.opset >= 11 ? (e.given(2) ? e.number(2) : 0.0) : e.node.f("value", 0.0f);
  std::vector<std::pair<int64_t, int64_t>> p;
  for (int i = 0; i < r; ++i) {
    if (pads[size_t(i)] < 0 || pads[size_t(i + r)] < 0) e.fail("negative pads (cropping) are not supported");
    p.emplace_back(pads[size_t(i)], pads[size_t(i + r)]);
  }
  if (mode == "constant") {
    e.set(0, Var<float>(gradus::pad(x, p, float(value))));
    return;
  }
  // reflect and edge: each padded axis gathers its rows by index (mirrored or clamped), so the
  // gradient of a row read twice adds up
  Var<float> y = x;
  for (int a = 0; a < r; ++a) {
    const auto [before, after] = p[size_t(a)];
    if (before == 0 && after == 0) continue;
    const int64_t n = x.shape()[a];
    if (n == 0 || (mode == "reflect" && (n < 2 || before >= n || after >= n)))
      e.fail(str("cannot ", mode, "-pad an axis of ", n, " by ", before, " and ", after));
    std::vector<int64_t> idx;
    for (int64_t j = -before; j < n + after; ++j)
      idx.push_back(mode == "edge" ? std::clamp<int64_t>(j, 0, n - 1) : j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j);
    y = gradus::gather(y, Tensor<int64_t>::from(idx), a);
  }
  e.set(0, y);
}

void shape(const Exec& e) {
  const Shape s = shape_of_input(e, 0);
  const int r = s.rank();
  int64_t start = e.node.i("start", 0), end = e.node.i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  e.set(0, Tensor<int64_t>::from(std::vector<int64_t>(s.begin() + start, s.begin() + end)));
}

void constant_of_shape(const Exec& e) {
  const std::vector<int64_t> dims = e.int_list(0);
  const Attr* v = e.node.find("value");
  if (v && v->t && std::holds_alternative<Tensor<int64_t>>(*v->t)) {
    auto t = Tensor<int64_t>::empty(Shape(dims));
    std::fill_n(t.data(), t.size(), std::get<Tensor<int64_t>>(*v->t).data()[0]);
    e.set(0, t);
    return;
  }
  const float fill = v && v->t ? std::get<Tensor<float>>(*v->t).data()[0] : 0.0f;
  e.set(0, constant(e, Tensor<float>::full(Shape(dims), fill)));
}

void cast(const Exec& e) {
  const int64_t to = e.node.i("to", 0);
  if (to == 9) {  // BOOL: a 0/1 mask
    e.set(0, Var<float>(e.var(0) != 0.0f));
  } else if (to == 1) {
    e.set(0, e.var(0));
  } else {
    e.set(0, e.ints(0).clone());
  }
}

void expand(const Exec& e) {
  const Var<float> x = e.var(0);
  const Shape target = broadcast(e, x.shape(), Shape(e.int_list(1)));
  e.set(0, Var<float>(x + constant(e, Tensor<float>::zeros(target))));
}

void tile(const Exec& e) {
  Var<float> y = e.var(0);
  const std::vector<int64_t> reps = e.int_list(1);
  if (reps.size() != size_t(y.shape().rank())) e.fail("repeats must have one value per axis");
  for (size_t a = 0; a < reps.size(); ++a) {
    if (reps[a] < 1) e.fail("repeats must be positive");
    if (reps[a] > 1) y = gradus::concat(std::vector<Var<float>>(size_t(reps[a]), y), int64_t(a));
  }
  e.set(0, y);
}

void identity(const Exec& e) { e.set(0, e.slot(0)); }

void dropout(const Exec& e) {
  if (e.given(2) && e.number(2) != 0.0 && !(e.given(1) && e.number(1) == 0.0))
    e.fail("runs in inference mode only (training_mode is true, with a ratio above 0)");
  e.set(0, e.slot(0));
}

// --- reductions ------------------------------------------------------------------------------

enum class Reduce { sum, mean, max, min, prod, log_sum_exp, sum_square, l1, l2, log_sum };

template <Reduce R>
void reduce(const Exec& e) {
  const Var<float> x = e.var(0);
  const int r = x.shape().rank();
  std::vector<int64_t> axes = axes_input(e, 1, R == Reduce::sum ? 13 : 18);
  const bool keep = e.node.i("keepdims", 1) != 0;
  if (axes.empty() && e.node.i("noop_with_empty_axes", 0) != 0) {
    e.set(0, x);
    return;
  }
  std::vector<bool> reduced(size_t(r), axes.empty());
  for (int64_t a : axes) reduced[size_t(axis_of(e, a, r))] = true;
  Var<float> y = x;
  if constexpr (R == Reduce::sum_square || R == Reduce::l2) y = y * y;
  if constexpr (R == Reduce::l1) y = gradus::abs(y);
  for (int a = 0; a < r; ++a) {
    if (!reduced[size_t(a)]) continue;
    if constexpr (R == Reduce::mean) y = gradus::mean(y, a, true);
    else if constexpr (R == Reduce::max) y = gradus::max(y, a, true);
    else if constexpr (R == Reduce::min) y = gradus::min(y, a, true);
    else if constexpr (R == Reduce::prod) y = gradus::prod(y, a, true);
    else if constexpr (R == Reduce::log_sum_exp) y = gradus::logsumexp(y, a, true);
    else y = gradus::sum(y, a, true);
  }
  if constexpr (R == Reduce::l2) y = gradus::sqrt(y);
  if constexpr (R == Reduce::log_sum) y = gradus::log(y);
  if (!keep) {
    std::vector<int64_t> dims;
    for (int a = 0; a < r; ++a)
      if (!reduced[size_t(a)]) dims.push_back(x.shape()[a]);
    y = gradus::reshape(y, dims);
  }
  e.set(0, y);
}

/// ArgMax, ArgMin: on the host (their result is int64 there), the first index of the extremum,
/// or the last one with select_last_index.
template <bool Max>
void arg_extremum(const Exec& e) {
  const Tensor<float> x = e.var(0).value().to(gradus::cpu);
  const Shape s = x.shape();
  const int64_t axis = axis_of(e, e.node.i("axis", 0), s.rank()), n = s[int(axis)];
  if (n == 0) e.fail("takes an axis of at least one element");
  const bool last = e.node.i("select_last_index", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = int(axis) + 1; i < s.rank(); ++i) inner *= s[i];
  std::vector<int64_t> dims = dims_of(s);
  if (e.node.i("keepdims", 1) != 0)
    dims[size_t(axis)] = 1;
  else
    dims.erase(dims.begin() + axis);
  auto idx = Tensor<int64_t>::empty(Shape(dims));
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      const float* p = x.data() + a * n * inner + b;
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        const float v = p[j * inner], w = p[best * inner];
        if (Max ? (v > w || (last && v == w)) : (v < w || (last && v == w))) best = j;
      }
      idx.data()[a * inner + b] = best;
    }
  e.set(0, idx);
}

// --- recurrent: RNN, GRU, LSTM ------------------------------------------------------------------

/// One activation of a recurrent node, by its ONNX name.
struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
  bool has_alpha = false, has_beta = false;

  Var<float> operator()(const Var<float>& x) const {
    if (name == "Sigmoid") return gradus::sigmoid(x);
    if (name == "Tanh") return gradus::tanh(x);
    if (name == "Relu") return gradus::relu(x);
    if (name == "HardSigmoid")
      return gradus::clamp((has_alpha ? alpha : 0.2f) * x + (has_beta ? beta : 0.5f), 0.0, 1.0);
    if (name == "LeakyRelu") return gradus::where(x < 0.0f, (has_alpha ? alpha : 0.01f) * x, x);
    if (name == "Elu") return gradus::elu(x, has_alpha ? alpha : 1.0f);
    if (name == "Softsign") return gradus::softsign(x);
    if (name == "Softplus") return gradus::softplus(x);
    if (name == "Affine") return (has_alpha ? alpha : 1.0f) * x + (has_beta ? beta : 0.0f);
    if (name == "ScaledTanh") return (has_alpha ? alpha : 1.0f) * gradus::tanh((has_beta ? beta : 1.0f) * x);
    return gradus::where(x > (has_alpha ? alpha : 1.0f), x, 0.0f * x);  // ThresholdedRelu
  }
};

constexpr std::string_view kRecurrentActivations[] = {"Sigmoid", "Tanh", "Relu", "HardSigmoid", "LeakyRelu", "Elu",
                                                      "Softsign", "Softplus", "Affine", "ScaledTanh", "ThresholdedRelu"};

/// The activations of a recurrent node: per direction, `per` of them (RNN 1, GRU 2, LSTM 3).
std::vector<Activation> activations_of(const Node& n, size_t per, size_t directions) {
  static const char* const defaults[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  std::vector<Activation> out;
  const Attr* names = n.find("activations");
  const Attr* alphas = n.find("activation_alpha");
  const Attr* betas = n.find("activation_beta");
  for (size_t k = 0; k < per * directions; ++k) {
    Activation a;
    a.name = names && k < names->strings.size() ? names->strings[k] : defaults[per - 1][k % per];
    if (alphas && k < alphas->floats.size()) a.alpha = alphas->floats[k], a.has_alpha = true;
    if (betas && k < betas->floats.size()) a.beta = betas->floats[k], a.has_beta = true;
    out.push_back(std::move(a));
  }
  return out;
}

/// A [rows, cols] block of a [D, rows, cols] weight: direction d.
Var<float> direction_of(const Var<float>& w, int64_t d) {
  return gradus::reshape(gradus::slice(w, {d, 0, 0}, {1, -1, -1}), {w.shape()[1], w.shape()[2]});
}

template <int Gates>  // 1 RNN, 3 GRU, 4 LSTM
void recurrent(const Exec& e) {
  Var<float> x = e.var(0);
  if (x.shape().rank() != 3) e.fail(str("X must be [seq, batch, input]; it is ", x.shape()));
  const bool batch_first = e.node.i("layout", 0) != 0;
  if (batch_first) x = gradus::transpose(x, {1, 0, 2});
  const int64_t T = x.shape()[0], B = x.shape()[1], I = x.shape()[2];
  const Var<float> W = e.var(1), R = e.var(2);
  const std::string direction = e.node.s("direction", "forward");
  const int64_t D = direction == "bidirectional" ? 2 : 1;
  const int64_t H = e.node.i("hidden_size", R.shape().rank() == 3 ? R.shape()[2] : 0);
  if (W.shape() != Shape{D, Gates * H, I} || R.shape() != Shape{D, Gates * H, H})
    e.fail(str("W ", W.shape(), " and R ", R.shape(), " do not fit ", D, " direction(s), hidden size ", H, " and input ", I));
  const std::vector<Activation> acts = activations_of(e.node, Gates == 1 ? 1 : Gates == 3 ? 2 : 3, size_t(D));
  const bool clip = e.node.has("clip");
  const double limit = e.node.f("clip", 0.0f);
  auto clipped = [&](const Var<float>& v) { return clip ? Var<float>(gradus::clamp(v, -limit, limit)) : v; };
  const bool linear_before_reset = e.node.i("linear_before_reset", 0) != 0;

  // sequence_lens: rows past their length keep their state and output zeros
  std::vector<Var<float>> masks;  // per step, [B, 1]; empty when every row runs all T steps
  if (e.given(4)) {
    const std::vector<int64_t> lens = e.int_list(4);
    if (lens.size() != size_t(B)) e.fail(str("sequence_lens has ", lens.size(), " values for a batch of ", B));
    if (std::any_of(lens.begin(), lens.end(), [&](int64_t l) { return l != T; })) {
      if (direction != "forward") e.fail("sequence_lens shorter than the sequence run forward only");
      for (int64_t t = 0; t < T; ++t) {
        auto m = Tensor<float>::empty({B, 1});
        for (int64_t b = 0; b < B; ++b) m.data()[b] = t < lens[size_t(b)] ? 1.0f : 0.0f;
        masks.push_back(constant(e, m));
      }
    }
  }

  std::vector<Var<float>> ys, hs, cs;
  const Var<float> x2 = gradus::reshape(x, {T * B, I});
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const Var<float> Wd = direction_of(W, d), Rd = direction_of(R, d);
    Var<float> xw = gradus::matmul(x2, Wd, {.transpose_b = true});  // [T*B, G*H]
    Var<float> rb_h;  // GRU with linear_before_reset: the h gate's recurrent bias, inside r * (...)
    if (e.given(3)) {
      const Var<float> b = gradus::reshape(gradus::slice(e.var(3), {d, 0}, {1, -1}), {2 * Gates * H});
      const Var<float> wb = gradus::slice(b, {0}, {Gates * H});
      Var<float> rb = gradus::slice(b, {Gates * H}, {Gates * H});
      if (Gates == 3 && linear_before_reset) {
        rb_h = gradus::slice(rb, {2 * H}, {H});
        rb = gradus::concat(std::vector<Var<float>>{gradus::slice(rb, {0}, {2 * H}), constant(e, Tensor<float>::zeros({H}))}, 0);
      }
      xw = xw + (wb + rb);
    }
    xw = gradus::reshape(xw, {T, B, Gates * H});
    auto initial = [&](size_t k) {
      if (!e.given(k)) return constant(e, Tensor<float>::zeros({B, H}));
      return Var<float>(gradus::reshape(gradus::slice(e.var(k), {d, 0, 0}, {1, -1, -1}), {B, H}));
    };
    Var<float> h = initial(5), c;
    if constexpr (Gates == 4) c = initial(6);
    Var<float> p_i, p_o, p_f;
    if (Gates == 4 && e.given(7)) {
      const Var<float> p = gradus::reshape(gradus::slice(e.var(7), {d, 0}, {1, -1}), {3 * H});
      p_i = gradus::slice(p, {0}, {H});
      p_o = gradus::slice(p, {H}, {H});
      p_f = gradus::slice(p, {2 * H}, {H});
    }
    const Activation* f = &acts[size_t(d) * (Gates == 1 ? 1 : Gates == 3 ? 2 : 3)];
    std::vector<Var<float>> y(static_cast<size_t>(T));
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      const Var<float> xt = gradus::reshape(gradus::slice(xw, {t, 0, 0}, {1, -1, -1}), {B, Gates * H});
      auto gate = [&](const Var<float>& v, int64_t k) { return Var<float>(gradus::slice(v, {0, k * H}, {-1, H})); };
      Var<float> h_new, c_new;
      if constexpr (Gates == 1) {
        h_new = f[0](clipped(xt + gradus::matmul(h, Rd, {.transpose_b = true})));
      } else if constexpr (Gates == 3) {  // z, r, h
        const Var<float> Rzr = gradus::slice(Rd, {0, 0}, {2 * H, -1}), Rh = gradus::slice(Rd, {2 * H, 0}, {H, -1});
        const Var<float> hzr = gradus::matmul(h, Rzr, {.transpose_b = true});
        const Var<float> z = f[0](clipped(gate(xt, 0) + gate(hzr, 0)));
        const Var<float> r = f[0](clipped(gate(xt, 1) + gate(hzr, 1)));
        Var<float> hh;
        if (linear_before_reset) {
          Var<float> lin = gradus::matmul(h, Rh, {.transpose_b = true});
          if (rb_h.node()) lin = lin + rb_h;
          hh = f[1](clipped(gate(xt, 2) + r * lin));
        } else {
          hh = f[1](clipped(gate(xt, 2) + gradus::matmul(Var<float>(r * h), Rh, {.transpose_b = true})));
        }
        h_new = (1.0f - z) * hh + z * h;
      } else {  // i, o, f, c
        const Var<float> pre = xt + gradus::matmul(h, Rd, {.transpose_b = true});
        Var<float> gi = gate(pre, 0), gf = gate(pre, 2);
        if (p_i.node()) {
          gi = gi + p_i * c;
          gf = gf + p_f * c;
        }
        const Var<float> i = f[0](clipped(gi)), fg = f[0](clipped(gf)), ct = f[1](clipped(gate(pre, 3)));
        c_new = fg * c + i * ct;
        Var<float> go = gate(pre, 1);
        if (p_o.node()) go = go + p_o * c_new;
        h_new = f[0](clipped(go)) * f[2](c_new);
      }
      if (!masks.empty()) {
        const Var<float>& m = masks[size_t(t)];
        y[size_t(t)] = h_new * m;
        h = h_new * m + h * (1.0f - m);
        if constexpr (Gates == 4) c = c_new * m + c * (1.0f - m);
      } else {
        y[size_t(t)] = h_new;
        h = h_new;
        if constexpr (Gates == 4) c = c_new;
      }
    }
    ys.push_back(gradus::stack(y, 0));  // [T, B, H]
    hs.push_back(h);
    if constexpr (Gates == 4) cs.push_back(c);
  }
  Var<float> Y = gradus::stack(ys, 1);  // [T, D, B, H]
  Var<float> Yh = gradus::stack(hs, 0);  // [D, B, H]
  if (batch_first) {
    Y = gradus::transpose(Y, {2, 0, 1, 3});
    Yh = gradus::transpose(Yh, {1, 0, 2});
  }
  e.set(0, Y);
  e.set(1, Yh);
  if constexpr (Gates == 4) {
    Var<float> Yc = gradus::stack(cs, 0);
    if (batch_first) Yc = gradus::transpose(Yc, {1, 0, 2});
    e.set(2, Yc);
  }
}

std::string check_recurrent(const Node& n, int64_t) {
  const std::string direction = n.s("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return "direction '" + direction + "' is not one of forward, reverse, bidirectional";
  if (n.i("input_forget", 0) != 0) return "input_forget = 1 (coupled input and forget gates) is not supported";
  if (const Attr* a = n.find("activations"))
    for (const auto& name : a->strings)
      if (std::find(std::begin(kRecurrentActivations), std::end(kRecurrentActivations), name) == std::end(kRecurrentActivations))
        return "activation '" + name + "' is not supported";
  return "";
}

// --- load-time checks ------------------------------------------------------------------------

std::string check_conv(const Node& n, int64_t) {
  if (const Attr* k = n.find("kernel_shape"); k && k->ints.size() != 1 && k->ints.size() != 2)
    return "only 1-D and 2-D convolutions are imported";
  return "";
}
std::string check_max_pool(const Node& n, int64_t) {
  if (n.wanted(1)) return "the Indices output is not supported";
  for (int64_t d : n.ints("dilations"))
    if (d != 1) return "dilated pooling is not supported";
  const auto k = n.ints("kernel_shape");
  if (k.size() != 1 && k.size() != 2) return "only 1-D and 2-D pooling is imported";
  return "";
}
std::string check_average_pool(const Node& n, int64_t) {
  const auto k = n.ints("kernel_shape");
  if (k.size() != 1 && k.size() != 2) return "only 1-D and 2-D pooling is imported";
  return "";
}
std::string check_batch_norm(const Node& n, int64_t) {
  if (n.i("training_mode", 0) != 0 || n.wanted(1) || n.wanted(2) || n.wanted(3) || n.wanted(4))
    return "training mode (running statistics as outputs) is not imported; inference mode is";
  return "";
}
std::string check_dropout(const Node& n, int64_t) {
  if (n.wanted(1)) return "the mask output is not supported (Dropout is imported for inference)";
  return "";
}
std::string check_pad(const Node& n, int64_t) {
  const std::string mode = n.s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") return "mode '" + mode + "' is not supported";
  return "";
}
std::string check_cast(const Node& n, int64_t) {
  const int64_t to = n.i("to", 0);
  if (to != 1 && to != 7 && to != 9)
    return "Cast to element type " + std::to_string(to) + " is not supported (to FLOAT, INT64 and BOOL are)";
  return "";
}
std::string check_split(const Node& n, int64_t) {
  if (n.out.empty()) return "has no outputs";
  return "";
}

}  // namespace

const std::map<std::string, OpEntry, std::less<>>& op_table() {
  static const std::map<std::string, OpEntry, std::less<>> table{
      {"Abs", {GRADUS_ONNX_UNARY(gradus::abs(x)), nullptr}},
      {"Add", {arithmetic<0>, nullptr}},
      {"And", {logic<0>, nullptr}},
      {"ArgMax", {arg_extremum<true>, nullptr}},
      {"ArgMin", {arg_extremum<false>, nullptr}},
      {"AveragePool", {average_pool, check_average_pool}},
      {"BatchNormalization", {batch_norm, check_batch_norm}},
      {"Cast", {cast, check_cast}},
      {"Clip", {clip, nullptr}},
      {"Concat", {concat, nullptr}},
      {"ConstantOfShape", {constant_of_shape, nullptr}},
      {"Conv", {conv, check_conv}},
      {"Cos", {GRADUS_ONNX_UNARY(gradus::cos(x)), nullptr}},
      {"Cosh", {GRADUS_ONNX_UNARY((gradus::exp(x) + gradus::exp(-x)) * 0.5f), nullptr}},
      {"Div", {arithmetic<3>, nullptr}},
      {"Dropout", {dropout, check_dropout}},
      {"Elu", {[](const Exec& e) { e.set(0, Var<float>(gradus::elu(e.var(0), e.node.f("alpha", 1.0f)))); }, nullptr}},
      {"Exp", {GRADUS_ONNX_UNARY(gradus::exp(x)), nullptr}},
      {"Expand", {expand, nullptr}},
      {"Flatten", {flatten, nullptr}},
      {"Greater", {compare<0>, nullptr}},
      {"GreaterOrEqual", {compare<2>, nullptr}},
      {"Equal", {compare<4>, nullptr}},
      {"Gather", {gather, nullptr}},
      {"Gemm", {gemm, nullptr}},
      {"GlobalAveragePool", {global_pool<false>, nullptr}},
      {"GlobalMaxPool", {global_pool<true>, nullptr}},
      {"HardSigmoid", {[](const Exec& e) {
                         const Var<float> x = e.var(0);
                         e.set(0, Var<float>(gradus::clamp(e.node.f("alpha", 0.2f) * x + e.node.f("beta", 0.5f), 0.0, 1.0)));
                       }, nullptr}},
      {"HardSwish", {GRADUS_ONNX_UNARY(x * gradus::clamp(x * (1.0f / 6.0f) + 0.5f, 0.0, 1.0)), nullptr}},
      {"Identity", {identity, nullptr}},
      {"InstanceNormalization", {instance_norm, nullptr}},
      {"LayerNormalization", {layer_norm, nullptr}},
      {"LeakyRelu", {[](const Exec& e) {
                       const Var<float> x = e.var(0);
                       e.set(0, Var<float>(gradus::where(x < 0.0f, e.node.f("alpha", 0.01f) * x, x)));
                     }, nullptr}},
      {"GRU", {recurrent<3>, check_recurrent}},
      {"LSTM", {recurrent<4>, check_recurrent}},
      {"Less", {compare<1>, nullptr}},
      {"LessOrEqual", {compare<3>, nullptr}},
      {"Log", {GRADUS_ONNX_UNARY(gradus::log(x)), nullptr}},
      {"LogSoftmax", {softmax<true>, nullptr}},
      {"MatMul", {[](const Exec& e) { e.set(0, Var<float>(gradus::matmul(e.var(0), e.var(1)))); }, nullptr}},
      {"Max", {variadic<0>, nullptr}},
      {"MaxPool", {max_pool, check_max_pool}},
      {"Mean", {variadic<3>, nullptr}},
      {"Min", {variadic<1>, nullptr}},
      {"Mul", {arithmetic<2>, nullptr}},
      {"Neg", {[](const Exec& e) {
                 if (e.is_int(0)) {
                   Tensor<int64_t> t = e.ints(0).clone();
                   for (int64_t k = 0; k < t.size(); ++k) t.data()[k] = -t.data()[k];
                   e.set(0, t);
                 } else {
                   e.set(0, Var<float>(-e.var(0)));
                 }
               }, nullptr}},
      {"Not", {GRADUS_ONNX_UNARY(1.0f - x), nullptr}},
      {"Or", {logic<1>, nullptr}},
      {"Pad", {pad, check_pad}},
      {"Pow", {pow, nullptr}},
      {"PRelu", {prelu, nullptr}},
      {"Reciprocal", {GRADUS_ONNX_UNARY(1.0f / x), nullptr}},
      {"ReduceL1", {reduce<Reduce::l1>, nullptr}},
      {"ReduceL2", {reduce<Reduce::l2>, nullptr}},
      {"ReduceLogSum", {reduce<Reduce::log_sum>, nullptr}},
      {"ReduceLogSumExp", {reduce<Reduce::log_sum_exp>, nullptr}},
      {"ReduceMax", {reduce<Reduce::max>, nullptr}},
      {"ReduceMean", {reduce<Reduce::mean>, nullptr}},
      {"ReduceMin", {reduce<Reduce::min>, nullptr}},
      {"ReduceProd", {reduce<Reduce::prod>, nullptr}},
      {"ReduceSum", {reduce<Reduce::sum>, nullptr}},
      {"ReduceSumSquare", {reduce<Reduce::sum_square>, nullptr}},
      {"Relu", {GRADUS_ONNX_UNARY(gradus::relu(x)), nullptr}},
      {"Reshape", {reshape, nullptr}},
      {"RNN", {recurrent<1>, check_recurrent}},
      {"Selu", {selu, nullptr}},
      {"Shape", {shape, nullptr}},
      {"Sigmoid", {GRADUS_ONNX_UNARY(gradus::sigmoid(x)), nullptr}},
      {"Sign", {GRADUS_ONNX_UNARY(gradus::sign(x)), nullptr}},
      {"Sin", {GRADUS_ONNX_UNARY(gradus::sin(x)), nullptr}},
      {"Sinh", {GRADUS_ONNX_UNARY((gradus::exp(x) - gradus::exp(-x)) * 0.5f), nullptr}},
      {"Slice", {slice, nullptr}},
      {"Softmax", {softmax<false>, nullptr}},
      {"Softplus", {GRADUS_ONNX_UNARY(gradus::softplus(x)), nullptr}},
      {"Softsign", {GRADUS_ONNX_UNARY(gradus::softsign(x)), nullptr}},
      {"Split", {split, check_split}},
      {"Sqrt", {GRADUS_ONNX_UNARY(gradus::sqrt(x)), nullptr}},
      {"Squeeze", {squeeze, nullptr}},
      {"Sub", {arithmetic<1>, nullptr}},
      {"Sum", {variadic<2>, nullptr}},
      {"Tan", {GRADUS_ONNX_UNARY(gradus::sin(x) / gradus::cos(x)), nullptr}},
      {"Tanh", {GRADUS_ONNX_UNARY(gradus::tanh(x)), nullptr}},
      {"ThresholdedRelu", {[](const Exec& e) {
                             const Var<float> x = e.var(0);
                             e.set(0, Var<float>(gradus::where(x > e.node.f("alpha", 1.0f), x, 0.0f * x)));
                           }, nullptr}},
      {"Tile", {tile, nullptr}},
      {"Transpose", {transpose, nullptr}},
      {"Unsqueeze", {unsqueeze, nullptr}},
      {"Where", {where, nullptr}},
      {"Xor", {logic<2>, nullptr}},
  };
  return table;
}

}  // namespace detail

// --- Model: the forward pass -------------------------------------------------------------------

namespace {
std::vector<detail::Slot> run_graph(detail::Graph& g, const std::vector<detail::Slot>& inputs, Device device,
                                    const std::function<Tensor<float>(const detail::Graph::BufferRef&)>& buffer) {
  GRADUS_CHECK(value_error, inputs.size() == g.inputs.size(), "onnx::Model: the graph takes ", g.inputs.size(),
               " inputs; ", inputs.size(), " were given");
  std::vector<detail::Slot> env(g.slot_names.size());
  for (auto& [slot, value] : g.constants) {
    if (auto* v = std::get_if<Var<float>>(&value); v && v->value().device() != device)
      *v = Var<float>::constant(v->value().to(device));  // moved once, kept where the model runs
    env[size_t(slot)] = value;
  }
  for (const auto& [slot, var] : g.params) env[size_t(slot)] = var;
  for (const auto& b : g.buffers) env[size_t(b.slot)] = Var<float>::constant(buffer(b));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const bool is_int = std::holds_alternative<Tensor<int64_t>>(inputs[k]);
    GRADUS_CHECK(value_error, is_int == (g.input_types[k] == 7), "onnx::Model: input '", g.input_names[k], "' must be ",
                 g.input_types[k] == 7 ? "an int64 tensor" : "a float tensor");
    env[size_t(g.inputs[k])] = inputs[k];
  }
  for (const detail::Node& n : g.nodes) {
    const detail::Exec e{n, env, g.opset, device};
    try {
      n.run(e);
    } catch (const shape_error& err) {
      throw shape_error(gradus::detail::str("onnx: ", n.label, ": ", err.what()));
    } catch (const device_error& err) {
      throw device_error(gradus::detail::str("onnx: ", n.label, ": ", err.what()));
    }
  }
  std::vector<detail::Slot> out;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    GRADUS_CHECK(value_error, g.outputs[k] >= 0 && !std::holds_alternative<std::monostate>(env[size_t(g.outputs[k])]),
                 "onnx::Model: no node computes the graph output '", g.output_names[k], "'");
    out.push_back(env[size_t(g.outputs[k])]);
  }
  return out;
}
}  // namespace

std::vector<Var<float>> Model::forward(const std::vector<Var<float>>& inputs) {
  std::vector<detail::Slot> in(inputs.begin(), inputs.end());
  const Device device = inputs.empty() ? this->device() : inputs[0].value().device();
  for (size_t k = 0; k < in.size() && k < graph_->input_types.size(); ++k)
    if (graph_->input_types[k] == 7) {  // int64 ids given as float values
      in[k] = gradus::cast<int64_t>(inputs[k].value().to(gradus::cpu));
    }
  std::vector<Var<float>> out;
  for (auto& s : run_graph(*graph_, in, device, [this](const detail::Graph::BufferRef& b) {
         return b.owner ? static_cast<detail::Scope*>(b.owner)->get(b.name) : buffer(b.name);
       })) {
    if (auto* v = std::get_if<Var<float>>(&s)) {
      out.push_back(*v);
    } else {
      out.push_back(Var<float>::constant(gradus::cast<float>(std::get<Tensor<int64_t>>(s))));
    }
  }
  return out;
}

Var<float> Model::forward(const Var<float>& x) {
  GRADUS_CHECK(value_error, graph_->inputs.size() == 1 && graph_->outputs.size() == 1,
               "onnx::Model: forward(x) is for a graph of one input and one output; this one has ",
               graph_->inputs.size(), " and ", graph_->outputs.size(), ": call forward({...})");
  return forward(std::vector<Var<float>>{x})[0];
}

std::vector<Value> Model::run(const std::vector<Value>& inputs) {
  no_grad off;
  std::vector<detail::Slot> in;
  Device device = this->device();
  for (const Value& v : inputs) {
    if (const auto* f = std::get_if<Tensor<float>>(&v)) {
      in.push_back(Var<float>::constant(*f));
      device = f->device();
    } else {
      in.push_back(std::get<Tensor<int64_t>>(v));
    }
  }
  std::vector<Value> out;
  for (auto& s : run_graph(*graph_, in, device, [this](const detail::Graph::BufferRef& b) {
         return b.owner ? static_cast<detail::Scope*>(b.owner)->get(b.name) : buffer(b.name);
       })) {
    if (auto* v = std::get_if<Var<float>>(&s))
      out.push_back(v->value());
    else
      out.push_back(std::get<Tensor<int64_t>>(s));
  }
  return out;
}

}  // namespace gradus::onnx
