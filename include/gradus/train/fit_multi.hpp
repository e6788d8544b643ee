// gradus/train/fit_multi.hpp — fit / evaluate for a model of several inputs and several outputs
// (Keras' multi-input, multi-output Model): in-memory examples as a tuple of input tensors and a
// tuple of label tensors, a forward that takes the inputs and returns a tuple of outputs, one loss
// per output, weighted: loss = Σ_k loss_weights[k] · loss_k(labels_k, output_k) + regularization.
// The loop, hooks, History, checkpoints and resume are fit's (train/fit.hpp), through the same
// Session.
//
//   struct Net : gd::nn::Module<float> {   // two inputs, two outputs
//     std::tuple<gd::Var<float>, gd::Var<float>> forward(const gd::Tensor<float>& image, const gd::Tensor<float>& meta);
//   };
//   gd::train::MultiData data{std::tuple{images, meta}, std::tuple{classes, boxes}};
//   auto xent = [](const gd::Tensor<int64_t>& y, const gd::Var<float>& logits) {
//     return gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits); };
//   auto mse = [](const gd::Tensor<float>& y, const gd::Var<float>& p) { return gd::losses::mean_squared_error(y, p); };
//   gd::train::fit(net, opt, std::tuple{xent, mse}, data, {.epochs = 5, .loss_weights = {1.0, 0.5}});
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "gradus/train/fit.hpp"

namespace gradus::train {

template <class Xs, class Ys>
struct MultiData;

/// Examples along axis 0 of every tensor: `x` the model's inputs [N, ...] in forward's order, `y`
/// the labels [N, ...] of each output, in the order of the outputs and of the losses.
///   gd::train::MultiData data{std::tuple{images, meta}, std::tuple{classes, boxes}};
template <Element... X, Element... Y>
struct MultiData<std::tuple<Tensor<X>...>, std::tuple<Tensor<Y>...>> {
  static_assert(sizeof...(X) >= 1 && sizeof...(Y) >= 1, "MULTI_DATA_NEEDS_AT_LEAST_ONE_INPUT_AND_ONE_LABEL_TENSOR");
  std::tuple<Tensor<X>...> x;
  std::tuple<Tensor<Y>...> y;
  /// Number of examples (the first input's first dimension).
  int64_t size() const {
    const auto& x0 = std::get<0>(x);
    return x0.defined() && x0.rank() > 0 ? x0.dim(0) : 0;
  }
};

template <class Xs, class Ys>
MultiData(Xs, Ys) -> MultiData<Xs, Ys>;

/// Options of fit on MultiData: FitOptions with loss weights and without metrics. Designated
/// initializers must follow this order:
///   {.epochs = 10, .batch_size = 64, .loss_weights = {1.0, 0.2}, .validation = &val, .run_dir = "runs/two"}
template <class Xs, class Ys>
struct MultiFitOptions {
  int64_t epochs = 1;           ///< epochs to run to, counting those of a restored run
  int64_t batch_size = 32;      ///< examples per step (> 0)
  bool shuffle = true;          ///< epoch_permutation(n, seed, e) order
  uint64_t seed = 0;            ///< the shuffle seed
  bool drop_remainder = false;  ///< skip the last partial batch of each epoch
  /// One weight per output (empty: every weight 1), as Keras' loss_weights.
  std::vector<double> loss_weights = {};
  /// Evaluated after every epoch when set: "val_loss" (weighted total) and "val_loss_<k>" per output.
  const MultiData<Xs, Ys>* validation = nullptr;
  int64_t validation_batch_size = 0;         ///< 0: batch_size
  int64_t validation_every_steps = 0;        ///< see FitOptions
  std::vector<Hook*> hooks = {};             ///< not owned; must outlive fit
  RunDir run_dir = {};                       ///< restore from / checkpoint into; empty: neither
  CheckpointSaverOptions checkpoint = {};    ///< of the CheckpointSaver fit adds (run_dir set, none in hooks)
  Rng* rng = nullptr;                        ///< saved and restored with checkpoints as "rng"
  bool verbose = false;                      ///< adds a ProgressBar on std::cout
  nn::Unregistered unregistered = nn::Unregistered::error;  ///< see FitOptions
  std::optional<Device> device = std::nullopt;              ///< see FitOptions
  Precision autocast = Precision::fp32;                     ///< see FitOptions
  optim::LossScaleOptions loss_scale = {};                  ///< see FitOptions
};

/// Options of evaluate on MultiData.
struct MultiEvaluateOptions {
  int64_t batch_size = 32;                 ///< examples per forward pass (> 0)
  std::vector<double> loss_weights = {};   ///< one per output (empty: every weight 1)
};

namespace detail {

/// `f` applied to every element of the tuple `t`, as a tuple.
template <class Tuple, class F>
auto map_tuple(const Tuple& t, F&& f) {
  return std::apply([&](const auto&... e) { return std::make_tuple(f(e)...); }, t);
}

template <class Xs, class Ys>
void check_multi_data(const MultiData<Xs, Ys>& d, const char* who, const char* what) {
  const int64_t n = d.size();
  GRADUS_CHECK(value_error, n > 0, who, ": ", what, ": input 0 must have shape [N, ...] with N > 0, got ",
               std::get<0>(d.x).defined() ? std::get<0>(d.x).shape() : Shape{});
  int k = 0;
  auto check = [&](const auto& t, const char* kind) {
    GRADUS_CHECK(value_error, t.defined() && t.rank() >= 1 && t.dim(0) == n, who, ": ", what, ": ", kind, " ", k,
                 " must have shape [N, ...] with N = ", n, " (input 0's first dimension), got ",
                 t.defined() ? t.shape() : Shape{});
    ++k;
  };
  std::apply([&](const auto&... t) { (check(t, "input"), ...); }, d.x);
  k = 0;
  std::apply([&](const auto&... t) { (check(t, "label tensor"), ...); }, d.y);
}

/// The loss weights for `outputs` outputs: `w`, or all 1 when empty; value_error otherwise.
inline std::vector<double> loss_weights(const std::vector<double>& w, size_t outputs, const char* who) {
  if (w.empty()) return std::vector<double>(outputs, 1.0);
  GRADUS_CHECK(value_error, w.size() == outputs, who, ": loss_weights must hold one weight per output (", outputs,
               "), got ", w.size());
  return w;
}

/// The model's outputs on the inputs `xs` as a tuple: model.forward(xs...) (or on constant Vars
/// of them, as forward_batch), a returned tuple kept, a single output wrapped.
template <class M, class... X>
auto forward_multi(M& model, const std::tuple<Tensor<X>...>& xs) {
  using T = typename M::value_type;
  auto out = std::apply(
      [&](const auto&... x) {
        if constexpr (requires { model.forward(x...); }) {
          return model.forward(x...);
        } else {
          static_assert(requires { model.forward(Var<T>::constant(x)...); },
                        "MODEL_FORWARD_TAKES_NEITHER_THE_INPUT_TENSORS_NOR_VARS_OF_ITS_ELEMENT_TYPE: fit on MultiData");
          return model.forward(Var<T>::constant(x)...);
        }
      },
      xs);
  if constexpr (requires { std::tuple_size<decltype(out)>::value; })
    return out;
  else
    return std::tuple{std::move(out)};
}

/// (Σ_k w_k · loss_k(y_k, output_k), the per-output losses) of one batch.
template <Real T, class Losses, class Outs, class Ys, size_t... K>
std::pair<Var<T>, std::vector<Var<T>>> weighted_losses(const Losses& losses, const Outs& outs, const Ys& ys,
                                                       const std::vector<double>& w, const char* who,
                                                       std::index_sequence<K...>) {
  std::vector<Var<T>> each{to_var(call_loss(std::get<K>(losses), std::get<K>(ys), to_var(std::get<K>(outs))))...};
  for (const Var<T>& l : each) scalar_loss(l, who);
  Var<T> total = Var<T>(each[0] * T(w[0]));
  for (size_t k = 1; k < each.size(); ++k) total = Var<T>(total + each[k] * T(w[k]));
  return {std::move(total), std::move(each)};
}

template <class M, class Losses, class Xs, class Ys>
constexpr void check_arity() {
  using Outs = decltype(forward_multi(std::declval<M&>(), std::declval<const Xs&>()));
  static_assert(std::tuple_size_v<Outs> == std::tuple_size_v<Ys> && std::tuple_size_v<Losses> == std::tuple_size_v<Ys>,
                "MULTI_FIT_NEEDS_ONE_LOSS_AND_ONE_LABEL_TENSOR_PER_OUTPUT_OF_THE_MODEL");
}

}  // namespace detail

/// The weighted loss and the loss of each output of `model` over `data`, in eval mode under
/// no_grad, in batches in order: loss = Σ_b n_b·(Σ_k w_k loss_k + regularization) / N, and
/// metrics ("loss_<k>", Σ_b n_b·loss_k / N) per output.
///   auto ev = gd::train::evaluate(net, std::tuple{xent, mse}, test, {.loss_weights = {1.0, 0.5}});
template <nn::ModuleType M, class... L, class Xs, class Ys>
Evaluation evaluate(M& model, const std::tuple<L...>& losses, const MultiData<Xs, Ys>& data,
                    const MultiEvaluateOptions& options = {}) {
  using T = typename M::value_type;
  detail::check_arity<M, std::tuple<L...>, Xs, Ys>();
  detail::check_multi_data(data, "evaluate", "data");
  detail::check_batch_size("evaluate", options.batch_size);
  constexpr size_t outputs = sizeof...(L);
  const std::vector<double> w = detail::loss_weights(options.loss_weights, outputs, "evaluate");
  no_grad guard;
  detail::TrainingMode<T> mode(model, false);
  const int64_t n = data.size();
  const Device dev = static_cast<const nn::Module<T>&>(model).device();
  const double reg = double(model.regularization_loss().item());
  detail::WeightedSum total;  // a GPU's losses are read once, at the end
  std::vector<detail::WeightedSum> each(outputs);
  for (int64_t first = 0; first < n; first += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - first);
    auto rows = [&](const auto& t) { return detail::slice_rows(t, first, b).to(dev); };
    const auto xs = detail::map_tuple(data.x, rows);
    const auto ys = detail::map_tuple(data.y, rows);
    const auto [sum, parts] = detail::weighted_losses<T>(losses, detail::forward_multi(model, xs), ys, w, "evaluate",
                                                         std::make_index_sequence<outputs>{});
    total.add(sum.value(), double(b), reg);
    for (size_t k = 0; k < outputs; ++k) each[k].add(parts[k].value(), double(b));
  }
  Evaluation out{total.total() / double(n), {}};
  for (size_t k = 0; k < outputs; ++k)
    out.metrics.emplace_back("loss_" + std::to_string(k), each[k].total() / double(n));
  return out;
}

namespace detail {

/// A fit over MultiData: batches gathered from the epoch's order, as Loop.
template <class M, class Losses, class Xs, class Ys>
class MultiLoop final : public ModelLoop<M, Losses> {
  using Base = ModelLoop<M, Losses>;
  using T = typename M::value_type;
  static constexpr size_t outputs = std::tuple_size_v<Losses>;

 public:
  MultiLoop(M& model, optim::Optimizer<T>& opt, const Losses& losses, const MultiData<Xs, Ys>& data,
            const MultiFitOptions<Xs, Ys>& o)
      : Base(model, opt, losses), data_(data), o_(o) {
    Base::check_in_memory(data, o, [](const MultiData<Xs, Ys>& d, const char* what) { check_multi_data(d, "fit", what); });
    weights_ = loss_weights(o.loss_weights, outputs, "fit");
    this->configure_batches(o, data.size());
    this->configure_fit(o);
  }

  History start() { return this->fit_loop(); }

 protected:
  bool train_step(const int64_t* index, int64_t n) override {
    return this->step([&] {
      const Device dev = static_cast<const nn::Module<T>&>(this->model_).device();
      auto rows = [&](const auto& t) { return gather_rows(t, index, n).to(dev); };
      const auto xs = map_tuple(data_.x, rows);
      const auto ys = map_tuple(data_.y, rows);
      auto [sum, parts] = weighted_losses<T>(this->loss_, forward_multi(this->model_, xs), ys, weights_, "fit",
                                             std::make_index_sequence<outputs>{});
      return std::pair{with_regularization(Var<T>(sum), this->model_), n};
    });
  }
  void validate(EpochLogs& logs) override {
    if (!o_.validation) return;
    const Evaluation ev =
        evaluate(this->model_, this->loss_, *o_.validation,
                 {.batch_size = o_.validation_batch_size > 0 ? o_.validation_batch_size : o_.batch_size,
                  .loss_weights = weights_});
    Base::log_validation(logs, ev);
  }

 private:
  const MultiData<Xs, Ys>& data_;
  const MultiFitOptions<Xs, Ys>& o_;
  std::vector<double> weights_;
};

}  // namespace detail

/// Trains a model of several inputs and outputs (see the top of this header) as fit on Data:
/// each step's loss is Σ_k loss_weights[k] · loss_k(labels_k, output_k) + regularization, each
/// loss taking (labels, predictions) as every gd::losses function. History, hooks, checkpoints
/// and resume as fit; with validation, "val_loss" and "val_loss_<k>" per output.
///   gd::train::fit(net, opt, std::tuple{xent, mse}, data, {.epochs = 5, .loss_weights = {1.0, 0.5}});
template <nn::ModuleType M, class... L, class Xs, class Ys>
History fit(M& model, optim::Optimizer<typename M::value_type>& optimizer, const std::tuple<L...>& losses,
            const MultiData<Xs, Ys>& data, const std::type_identity_t<MultiFitOptions<Xs, Ys>>& options = {}) {
  detail::check_arity<M, std::tuple<L...>, Xs, Ys>();
  detail::MultiLoop<M, std::tuple<L...>, Xs, Ys> loop(model, optimizer, losses, data, options);
  return loop.start();
}

}  // namespace gradus::train
