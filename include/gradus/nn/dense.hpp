// gradus/nn/dense.hpp — Dense (fully connected), Flatten and Embedding.
#pragma once
#include <cstdint>

#include "gradus/core/compiled.hpp"
#include "gradus/init/initializers.hpp"
#include "gradus/nn/activations.hpp"
#include "gradus/nn/module.hpp"
#include "gradus/nn/regularizers.hpp"
#include "gradus/ops/linalg.hpp"
#include "gradus/ops/shape.hpp"

namespace gradus::nn {
namespace detail {

/// The kernel initializer a layer uses when none is given: He uniform for ReLU-like
/// activations, LeCun normal for SELU, Glorot uniform (Keras' default) otherwise.
inline init::Initializer default_kernel_initializer(const Activation& a) {
  if (a.relu_like()) return init::he_uniform{};
  if (a.kind == ActivationKind::selu) return init::lecun_normal{};
  return init::glorot_uniform{};
}

/// `given`, or `fallback` when it is empty.
inline const init::Initializer& or_default(const init::Initializer& given, const init::Initializer& fallback) {
  return given ? given : fallback;
}

}  // namespace detail

/// Options of `Dense`. Empty initializers mean the defaults: kernel by activation (see
/// `detail::default_kernel_initializer`), bias zeros.
struct DenseOptions {
  int64_t in = 0;   ///< input features (the last axis of the input); 0: taken from the first input
  int64_t out = 0;  ///< output features
  Activation activation = linear;
  bool use_bias = true;
  init::Initializer kernel_initializer{};
  init::Initializer bias_initializer{};
  Regularizer kernel_regularizer{};
  Regularizer bias_regularizer{};
};

/// activation(x · kernel + bias): x [..., in] -> [..., out]; kernel [in, out], bias [out]
/// (tf.keras.layers.Dense). The bias add and the activation run as one pass.
///   gd::nn::Dense<float> d({.in = 784, .out = 500, .activation = gd::nn::relu}, rng);
///   gd::Var<float> h = d(x);   // x [128, 784] -> h [128, 500]
/// Without `.in` the layer is lazy (Keras, LibTorch's LazyLinear): the kernel is registered at
/// once with shape [0, out] and drawn, from `rng` (which must live until then), at the first
/// forward with in = the input's last axis, giving the same values as `.in` set to it. Optimizers
/// built before then see the parameter (their state takes its shape at the first step). Restoring
/// a checkpoint (io::load, io::restore_module, fit and Session resuming) into a layer that has not
/// seen an input builds it from the checkpoint's kernel [in, out], drawing nothing.
template <Real T = float>
class Dense : public Module<T, Dense<T>> {
 public:
  Dense(const DenseOptions& o, Rng& rng)
      : in_(o.in), out_(o.out), use_bias_(o.use_bias), activation_(o.activation),
        kernel_init_(detail::or_default(o.kernel_initializer, detail::default_kernel_initializer(o.activation))),
        bias_init_(o.bias_initializer) {
    GRADUS_CHECK(value_error, o.in >= 0 && o.out > 0, "Dense: out must be positive and in positive (or 0, to take it "
                 "from the first input), got in ", o.in, ", out ", o.out);
    kernel_ = this->register_parameter("kernel", Tensor<T>::zeros({0, o.out}), o.kernel_regularizer);
    if (o.use_bias)
      bias_ = this->register_parameter("bias", Tensor<T>::zeros({o.out}), o.bias_regularizer);
    else
      bias_ = Var<T>::constant(Tensor<T>::zeros({o.out}));
    rng_ = &rng;
    if (o.in > 0) build(o.in);
  }

  /// x [..., in] -> [..., out], a Var.
  template <Expression X>
  Var<T> forward(const X& x) {
    return forward_var(detail::to_var(x));
  }
  /// forward on a Var: compiled once in libgradus with GRADUS_COMPILED.
  Var<T> forward_var(const Var<T>& xv);

  /// The kernel [in, out] (a handle: write into its value() to set weights).
  Var<T> kernel() const { return kernel_; }
  /// The bias [out] (a constant of zeros when use_bias is false).
  Var<T> bias() const { return bias_; }
  /// Input features; 0 while a lazy layer has seen no input.
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  const Activation& activation() const { return activation_; }
  /// False while a lazy layer waits for its first input.
  bool built() const { return built_; }

  /// A lazy layer not yet built: `saved` [in, out] for "kernel" gives in (see Module).
  int64_t lazy_input_size(std::string_view name, const Shape& saved) const override {
    const bool fits = !built_ && name == "kernel" && saved.rank() == 2 && saved[0] > 0 && saved[1] == out_;
    return fits ? saved[0] : 0;
  }
  void build_unfilled(int64_t in) override { set_kernel_rows(in, true); }
  void unbuild() override { set_kernel_rows(0, false); }

 private:
  /// Draws the kernel [in, out] and then the bias, as an eager layer does in its constructor.
  void build(int64_t in) {
    kernel_.value() = kernel_init_.template operator()<T>({in, out_}, *rng_);
    if (use_bias_ && bias_init_) bias_.value() = bias_init_.template operator()<T>({out_}, *rng_);
    in_ = in;
    built_ = true;
  }
  /// A zero kernel [in, out] on the kernel's device, for a build from a checkpoint (or its undoing).
  void set_kernel_rows(int64_t in, bool built) {
    kernel_.value() = Tensor<T>::zeros({in, out_}).to(kernel_.value().device());
    in_ = in;
    built_ = built;
  }

  int64_t in_, out_;
  bool use_bias_;
  Activation activation_;
  init::Initializer kernel_init_, bias_init_;
  Rng* rng_ = nullptr;  ///< draws the kernel when a lazy layer is built
  bool built_ = false;
  Var<T> kernel_, bias_;
};

/// [N, d1, ..., dk] -> [N, d1*...*dk] (tf.keras.layers.Flatten); zero-copy.
struct Flatten {
  template <Expression X>
  auto forward(const X& x) const { return gradus::flatten(x); }
  template <Expression X>
  auto operator()(const X& x) const { return forward(x); }
};

/// Options of `Embedding`. An empty initializer means uniform in [-0.05, 0.05] (Keras).
struct EmbeddingOptions {
  int64_t vocab = 0;  ///< number of ids: ids lie in [0, vocab)
  int64_t dim = 0;    ///< size of each embedding vector
  init::Initializer initializer{};
  Regularizer regularizer{};
};

/// Rows of a trainable table [vocab, dim] picked by integer ids (tf.keras.layers.Embedding):
/// ids of any shape S -> S + [dim]. The gradient scatter-adds into the rows used.
///   gd::nn::Embedding<float> emb({.vocab = 256, .dim = 32}, rng);
///   gd::Var<float> e = emb.forward(ids);   // ids Tensor<int64_t> [B, T] -> [B, T, 32]
template <Real T = float>
class Embedding : public Module<T, Embedding<T>> {
 public:
  Embedding(const EmbeddingOptions& o, Rng& rng) : vocab_(o.vocab) {
    GRADUS_CHECK(value_error, o.vocab > 0 && o.dim > 0, "Embedding: vocab and dim must be positive, got vocab ",
                 o.vocab, ", dim ", o.dim);
    const init::Initializer fallback = init::random_uniform{-0.05, 0.05};
    table_ = this->register_parameter(
        "embeddings", detail::or_default(o.initializer, fallback).template operator()<T>({o.vocab, o.dim}, rng),
        o.regularizer);
  }

  /// ids S -> S + [dim]; an id outside [0, vocab) throws value_error.
  Var<T> forward(const Tensor<int64_t>& ids) const {
    if (ids.in_host_memory())  // ids in a GPU's memory are checked there, by gather
      for (int64_t i = 0; i < ids.size(); ++i)
        GRADUS_CHECK(value_error, ids.data()[i] >= 0 && ids.data()[i] < vocab_, "Embedding: id ", ids.data()[i],
                     " at position ", i, " is outside the vocabulary [0, ", vocab_, ")");
    return gradus::gather(table_, ids, 0);
  }

  /// The table [vocab, dim].
  Var<T> embeddings() const { return table_; }

 private:
  int64_t vocab_;
  Var<T> table_;
};

// Out of the class, so that a program built with GRADUS_COMPILED compiles no copy of it.
template <Real T>
Var<T> Dense<T>::forward_var(const Var<T>& xv) {
  if (!built()) {
    GRADUS_CHECK(shape_error, xv.rank() >= 1 && xv.shape().back() > 0,
                 "Dense: cannot take in from an input of shape ", xv.shape());
    build(xv.shape().back());
  }
  detail::check_last_dim(xv.shape(), in_, "Dense", "in");
  Var<T> h = gradus::matmul(xv, kernel_);
  if (!use_bias_ && activation_.kind == ActivationKind::linear) return h;
  if (!use_bias_ && bias_.value().device() != h.value().device())  // the zeros are no parameter: to() left them
    bias_ = Var<T>::constant(Tensor<T>::empty({out_}, h.value().device()).fill_(T(0)));
  return detail::bias_activation(h, bias_, activation_);
}
}  // namespace gradus::nn

#if GRADUS_INSTANCES  // compiled once in libgradus with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::nn {
GRADUS_INSTANCE class Dense<float>;
GRADUS_INSTANCE_DOUBLE class Dense<double>;
}  // namespace gradus::nn
#endif
