// gradus/core/tensor.hpp — the dense, contiguous, row-major N-d array.
#pragma once
#include <algorithm>
#include <array>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <new>
#include <ostream>
#include <span>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/core/allocator.hpp"
#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/bfloat16.hpp"
#include "gradus/core/rng.hpp"
#include "gradus/core/shape.hpp"

namespace gradus {

/// Element types a tensor may hold: float and double (differentiable), int64_t (indices, labels,
/// integer samples), uint8_t (bytes: raw data and 8-bit images, as io::decode_raw and the image
/// codecs give them) and gd::bfloat16 (16-bit floats: weights and activations kept in half the
/// memory). uint8_t and bfloat16 tensors are stored, copied between devices, printed and
/// converted with gd::cast (to bfloat16: rounded to nearest, ties to even; back: exactly).
template <class T>
concept Element = std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, int64_t> ||
                  std::same_as<T, uint8_t> || std::same_as<T, bfloat16>;

/// Element types that can be differentiated.
template <class T>
concept Real = std::same_as<T, float> || std::same_as<T, double>;

template <class E>
struct is_expression;  // defined in expr/expr.hpp

template <Element T>
class Tensor;

namespace detail {
template <class E>
concept expression_like = is_expression<std::remove_cvref_t<E>>::value;
}  // namespace detail

/// A dense row-major N-d array: a cheap handle to shared, 64-byte-aligned storage.
/// Copying a Tensor shares its storage; `clone()` copies the elements.
///   gd::Tensor<float> a = gd::Tensor<float>::zeros({2, 3});
///   a(1, 2) = 5.f;  gd::Tensor<float> b = a * 2.f + 1.f;   // evaluates the expression
namespace detail {
[[noreturn, gnu::cold]] void host_access_error(Device d);
const DeviceHooks& hooks_for(Device d, const char* what);
Block* device_allocate(Device d, size_t bytes);
/// Copies bytes between two buffers, at least one of them in a device's memory.
void device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void device_fill(void* dst, Device device, const void* value, size_t element_size, size_t count);
/// The shape `dims` names for a tensor of `numel` elements of shape `from` (Tensor::reshape).
Shape resolve_reshape(std::span<const int64_t> dims, int64_t numel, const Shape& from);
/// The bytes a tensor of `shape` needs, at least 1; shape_error past kMaxTensorBytes.
size_t checked_bytes(const Shape& shape, size_t element_size);
}  // namespace detail

/// The largest tensor gradus allocates, in bytes (2^39, 512 GiB): a larger shape is a
/// shape_error naming it, before any allocation (and an allocation below it that the system
/// refuses is a value_error naming the shape, not std::bad_alloc).
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 39;

template <Element T>
class Tensor {
 public:
  using value_type = T;

  /// An undefined tensor (no storage); `defined()` is false.
  Tensor() = default;
  /// An uninitialised tensor of `shape` (use `zeros`/`full` when the values matter).
  explicit Tensor(const Shape& shape) : shape_(shape) { allocate(); }

  Tensor(const Tensor& o) : block_(o.block_), data_(o.data_), shape_(o.shape_) { detail::retain(block_); }
  Tensor(Tensor&& o) noexcept : block_(std::exchange(o.block_, nullptr)), data_(std::exchange(o.data_, nullptr)), shape_(o.shape_) {}
  Tensor& operator=(const Tensor& o) {
    detail::retain(o.block_);
    detail::release(block_);
    block_ = o.block_;
    data_ = o.data_;
    shape_ = o.shape_;
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      detail::release(block_);
      block_ = std::exchange(o.block_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      shape_ = o.shape_;
    }
    return *this;
  }
  ~Tensor() { detail::release(block_); }

  /// Evaluates any expression of the same element type into a new tensor.
  template <class E>
    requires(detail::expression_like<E> && !std::same_as<std::remove_cvref_t<E>, Tensor<T>>)
  Tensor(const E& e) {
    // Found by argument-dependent lookup where the expression's type is complete: the layers
    // that define expressions and their evaluators provide it (autodiff/materialize.hpp).
    evaluate_expression(*this, e, /*assign=*/false);
  }

  static Tensor empty(const Shape& shape) { return Tensor(shape); }
  static Tensor zeros(const Shape& shape) { return full(shape, T(0)); }
  static Tensor ones(const Shape& shape) { return full(shape, T(1)); }
  static Tensor full(const Shape& shape, T value);
  /// Copies `values` into a tensor of `shape`; the sizes must agree.
  static Tensor from(const std::vector<T>& values, const Shape& shape);
  /// A rank-1 tensor of the values.
  static Tensor from(const std::vector<T>& values) { return from(values, Shape{int64_t(values.size())}); }
  /// A rank-0 tensor holding `value`.
  static Tensor scalar(T value) { return full(Shape{}, value); }
  /// 0, 1, ..., n-1.
  static Tensor arange(int64_t n);
  /// Normal(mean, stddev) samples drawn from `rng`.
  static Tensor random_normal(const Shape& shape, Rng& rng, double mean = 0, double stddev = 1)
    requires Real<T>;
  /// Uniform samples in [lo, hi) drawn from `rng`.
  static Tensor random_uniform(const Shape& shape, Rng& rng, double lo = 0, double hi = 1)
    requires Real<T>;
  /// Wraps memory owned elsewhere without copying; `data` must outlive every handle unless
  /// `release(keepalive)` frees it when the last handle goes.
  static Tensor wrap(T* data, const Shape& shape, void* keepalive = nullptr, void (*release)(void*) = nullptr) {
    Tensor t;
    t.block_ = detail::wrap_external(data, size_t(shape.numel()) * sizeof(T), keepalive, release);
    t.data_ = data;
    t.shape_ = shape;
    return t;
  }

  bool defined() const { return block_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t size() const { return shape_.numel(); }
  int64_t dim(int64_t axis) const { return shape_[normalize_axis(axis, rank(), "dim")]; }
  /// The elements, in host memory. A tensor on a GPU has none there: its data() throws
  /// gd::device_error (use `to(gd::cpu)`, or `device_data()` in device code).
  T* data() {
    if (on_device()) [[unlikely]]
      detail::host_access_error(device());
    return data_;
  }
  const T* data() const {
    if (on_device()) [[unlikely]]
      detail::host_access_error(device());
    return data_;
  }
  /// The address of the elements in their device's memory, unchecked (a device pointer for a
  /// tensor on a GPU): for backends and kernels.
  T* device_data() const { return data_; }
  /// Where the elements live: gd::cpu, or a GPU such as cuda:0.
  Device device() const { return block_ ? block_->device : cpu; }
  /// True when the elements are in host memory (data() reads them): what code that hands
  /// pointers to a host library (MPI, a file, a pipeline) asks.
  bool in_host_memory() const { return !on_device(); }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  /// True when both handles share storage.
  bool shares_storage(const Tensor& o) const { return block_ && block_ == o.block_; }
  /// Number of handles sharing this storage.
  int use_count() const { return block_ ? block_->refs.load() : 0; }

  /// Element access with bounds checks: `t(i, j)` on a rank-2 tensor.
  template <std::integral... I>
  T& operator()(I... idx) {
    return data()[offset(idx...)];
  }
  template <std::integral... I>
  const T& operator()(I... idx) const {
    return data()[offset(idx...)];
  }
  /// The value of a one-element tensor.
  T item() const;

  /// A deep copy with its own storage, on the same device.
  Tensor clone() const;

  /// This tensor on `device`: itself (shared storage) when it is there already, else a copy.
  ///   gd::Tensor<float> g = x.to(gd::cuda(0));   ...   gd::Tensor<float> back = g.to(gd::cpu);
  Tensor to(Device d) const;
  /// An uninitialised tensor of `shape` in the memory of `device`.
  static Tensor empty(const Shape& shape, Device device);
  /// A view with another shape over the same storage; one dimension may be -1.
  Tensor reshape(std::span<const int64_t> dims) const {
    Tensor t = *this;
    t.shape_ = detail::resolve_reshape(dims, size(), shape_);
    return t;
  }
  Tensor reshape(const std::vector<int64_t>& dims) const { return reshape(std::span<const int64_t>(dims)); }
  Tensor reshape(std::initializer_list<int64_t> dims) const { return reshape(std::span<const int64_t>(dims.begin(), dims.size())); }
  Tensor reshape(const Shape& s) const { return reshape(std::span<const int64_t>(s.begin(), size_t(s.rank()))); }

  /// Sets every element to `v`, in place (on the tensor's device).
  Tensor& fill_(T v) {
    if (on_device())
      detail::device_fill(data_, device(), &v, sizeof(T), size_t(size()));
    else
      std::fill_n(data_, size(), v);
    return *this;
  }
  /// Copies `src` into this tensor's storage (shapes must have equal sizes), across devices
  /// when the two are on different ones.
  Tensor& copy_(const Tensor& src);
  /// Evaluates `e` into this tensor's existing storage (the shapes must match).
  template <class E>
    requires detail::expression_like<E>
  Tensor& assign(const E& e) {
    evaluate_expression(*this, e, /*assign=*/true);
    return *this;
  }

  static Shape resolve_reshape(std::span<const int64_t> dims, int64_t numel, const Shape& from) {
    return detail::resolve_reshape(dims, numel, from);
  }

 private:
  bool on_device() const { return block_ && block_->device.type != DeviceType::cpu; }
  size_t checked_bytes() const { return detail::checked_bytes(shape_, sizeof(T)); }
  void allocate() {
    const size_t bytes = checked_bytes();
    try {
      block_ = detail::CachingAllocator::instance().allocate(bytes);
    } catch (const std::bad_alloc&) {
      ::gradus::detail::throw_error<value_error>({"Tensor: cannot allocate ", bytes, " bytes for shape ", shape_,
                                                  ": out of memory"});
    }
    data_ = reinterpret_cast<T*>(block_->data());
  }
  template <class... I>
  int64_t offset(I... idx) const {
    GRADUS_CHECK(value_error, int(sizeof...(I)) == rank(), "Tensor(): ", sizeof...(I), " indices for a tensor of rank ",
                 rank(), " ", shape_);
    const int64_t ix[] = {int64_t(idx)..., 0};
    int64_t off = 0;
    for (int d = 0; d < rank(); ++d) {
      const int64_t i = ix[d] < 0 ? ix[d] + shape_[d] : ix[d];
      GRADUS_CHECK(value_error, i >= 0 && i < shape_[d], "Tensor(): index ", ix[d], " out of range for axis ", d,
                   " of shape ", shape_);
      off = off * shape_[d] + i;
    }
    return off;
  }

  detail::Block* block_ = nullptr;
  T* data_ = nullptr;
  Shape shape_;
};

// Members that are not worth inlining, out of the class: a program built with GRADUS_COMPILED
// compiles no copy of them for float, double and int64_t (libgradus instantiates the class).
template <Element T>
Tensor<T> Tensor<T>::full(const Shape& shape, T value) {
  Tensor t(shape);
  std::fill_n(t.data(), t.size(), value);
  return t;
}
template <Element T>
Tensor<T> Tensor<T>::from(const std::vector<T>& values, const Shape& shape) {
  GRADUS_CHECK(shape_error, int64_t(values.size()) == shape.numel(), "Tensor::from: ", values.size(),
               " values do not fill shape ", shape, " (", shape.numel(), " elements)");
  Tensor t(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}
template <Element T>
Tensor<T> Tensor<T>::arange(int64_t n) {
  Tensor t(Shape{n});
  for (int64_t i = 0; i < n; ++i) t.data_[i] = T(i);
  return t;
}
template <Element T>
Tensor<T> Tensor<T>::random_normal(const Shape& shape, Rng& rng, double mean, double stddev)
  requires Real<T>
{
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data_[i] = T(rng.normal(mean, stddev));
  return t;
}
template <Element T>
Tensor<T> Tensor<T>::random_uniform(const Shape& shape, Rng& rng, double lo, double hi)
  requires Real<T>
{
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data_[i] = T(rng.uniform(lo, hi));
  return t;
}
template <Element T>
T Tensor<T>::item() const {
  GRADUS_CHECK(value_error, defined() && size() == 1, "item: expected a tensor with one element, got shape ", shape_);
  if (on_device()) return to(cpu).data_[0];
  return data_[0];
}
template <Element T>
Tensor<T> Tensor<T>::clone() const {
  Tensor t = empty(shape_, device());
  if (!size()) return t;
  if (on_device())
    detail::device_copy(t.data_, device(), data_, device(), size_t(size()) * sizeof(T));
  else
    std::memcpy(t.data_, data_, size_t(size()) * sizeof(T));
  return t;
}
template <Element T>
Tensor<T> Tensor<T>::to(Device d) const {
  GRADUS_CHECK(value_error, defined(), "Tensor::to(", d, "): the tensor is undefined");
  if (d == device()) return *this;
  Tensor t = empty(shape_, d);
  if (size()) detail::device_copy(t.data_, d, data_, device(), size_t(size()) * sizeof(T));
  return t;
}
template <Element T>
Tensor<T> Tensor<T>::empty(const Shape& shape, Device device) {
  if (device.is_cpu()) return Tensor(shape);
  Tensor t;
  t.shape_ = shape;
  t.block_ = detail::device_allocate(device, t.checked_bytes());
  t.data_ = reinterpret_cast<T*>(t.block_->data());
  return t;
}
template <Element T>
Tensor<T>& Tensor<T>::copy_(const Tensor& src) {
  GRADUS_CHECK(shape_error, src.size() == size(), "copy_: sizes differ: ", shape_, " vs ", src.shape());
  if (!size() || src.data_ == data_) return *this;
  if (on_device() || src.on_device())
    detail::device_copy(data_, device(), src.data_, src.device(), size_t(size()) * sizeof(T));
  else
    std::memmove(data_, src.data_, size_t(size()) * sizeof(T));
  return *this;
}

namespace detail {
template <class T>
void print_rec(std::ostream& os, const T* p, const Shape& s, int d, int indent) {
  const int64_t n = s[d];
  const int64_t stride = [&] {
    int64_t st = 1;
    for (int i = d + 1; i < s.rank(); ++i) st *= s[i];
    return st;
  }();
  const bool summarise = s.numel() > 1000 && n > 6;
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (summarise && i == 3) {
      os << (d + 1 == s.rank() ? "..., " : "...,\n" + std::string(size_t(indent + 1), ' '));
      i = n - 3;
    }
    if (d + 1 == s.rank())
      os << +p[i];  // a uint8_t as its number, not a character
    else
      print_rec(os, p + i * stride, s, d + 1, indent + 1);
    if (i + 1 < n) os << (d + 1 == s.rank() ? ", " : ",\n" + std::string(size_t(indent + 1), ' '));
  }
  os << ']';
}
}  // namespace detail

/// Prints NumPy-style: nested brackets, large tensors summarised, then the shape.
template <class T>
std::ostream& operator<<(std::ostream& os, const Tensor<T>& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  if (!t.device().is_cpu()) {
    Tensor<T> host = t.to(cpu);
    os << host;
    return os << " on " << t.device();
  }
  os << "Tensor(";
  if (t.rank() == 0)
    os << +t.data()[0];
  else if (t.size() == 0)
    os << "[]";
  else
    detail::print_rec(os, t.data(), t.shape(), 0, 7);
  return os << ", shape=" << t.shape() << ')';
}

}  // namespace gradus

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE void host_access_error(Device d) {
  throw_error<device_error>({"Tensor::data(): the elements are in the memory of ", d,
                             ", not the host's; copy them with .to(gd::cpu) first"});
}
GRADUS_INLINE const DeviceHooks& hooks_for(Device d, const char* what) {
  const DeviceHooks& h = device_hooks(d.type);
  GRADUS_CHECK(device_error, h.allocate && h.copy, what, "(", d, "): no backend for ", d,
               " is loaded (include gradus/backend/cuda/device.hpp and make the device with gd::cuda(i))");
  return h;
}
GRADUS_INLINE Block* device_allocate(Device d, size_t bytes) { return hooks_for(d, "Tensor::empty").allocate(d, bytes); }
GRADUS_INLINE void device_copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  const Device owner = dst_device.is_cpu() ? src_device : dst_device;
  hooks_for(owner, "Tensor::to").copy(dst, dst_device, src, src_device, bytes);
}
GRADUS_INLINE void device_fill(void* dst, Device device, const void* value, size_t element_size, size_t count) {
  const DeviceHooks& h = hooks_for(device, "Tensor::fill_");
  GRADUS_CHECK(device_error, h.fill, "Tensor::fill_(", device, "): the backend of ", device, " cannot fill its memory");
  if (count) h.fill(dst, device, value, element_size, count);
}
GRADUS_INLINE size_t checked_bytes(const Shape& shape, size_t element_size) {
  const int64_t n = shape.numel();
  GRADUS_CHECK(shape_error, n <= kMaxTensorBytes / int64_t(element_size), "Tensor: shape ", shape, " needs ",
               n <= int64_t(PTRDIFF_MAX / element_size) ? gradus::detail::str(n * int64_t(element_size), " bytes")
                                                        : std::string("more than 2^63 bytes"),
               ", more than gd::kMaxTensorBytes (2^39)");
  return std::max<size_t>(size_t(n) * element_size, 1);
}
GRADUS_INLINE Shape resolve_reshape(std::span<const int64_t> dims, int64_t numel, const Shape& from) {
  GRADUS_CHECK(value_error, dims.size() <= size_t(kMaxRank), "reshape: rank ", dims.size(), " exceeds ", kMaxRank);
  std::array<int64_t, kMaxRank> d{};
  int infer = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      GRADUS_CHECK(value_error, infer < 0, "reshape: more than one -1 in the new shape of ", from);
      infer = int(i);
      d[i] = 1;
    } else {
      GRADUS_CHECK(value_error, dims[i] >= 0, "reshape: negative dimension ", dims[i]);
      d[i] = dims[i];
    }
  }
  const std::span<const int64_t> target(d.data(), dims.size());
  const int64_t known = Shape::count(target);
  if (known < 0) {
    std::ostringstream os;
    for (size_t i = 0; i < dims.size(); ++i) os << (i ? "," : "") << dims[i];
    detail::throw_error<shape_error>({"reshape: cannot reshape ", from, " (", numel, " elements) into [", os.str(),
                                      "] (more than ", INT64_MAX, " elements)"});
  }
  if (infer >= 0) {
    GRADUS_CHECK(shape_error, known != 0 && numel % known == 0, "reshape: cannot reshape ", from, " (", numel,
                 " elements) with a -1 into ", known, "-element blocks");
    d[size_t(infer)] = numel / known;
  }
  const Shape s(target);
  GRADUS_CHECK(shape_error, s.numel() == numel, "reshape: cannot reshape ", from, " (", numel, " elements) into ", s,
               " (", s.numel(), " elements)");
  return s;
}
}  // namespace gradus::detail
#endif  // GRADUS_DEFINE_COMPILED

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus {
GRADUS_INSTANCE class Tensor<float>;
GRADUS_INSTANCE class Tensor<int64_t>;
GRADUS_INSTANCE_DOUBLE class Tensor<double>;
}  // namespace gradus
#endif
