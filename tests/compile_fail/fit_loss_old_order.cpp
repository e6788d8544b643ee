// fit's loss takes (labels, predictions), as every gd::losses function: a loss written for the
// order before, (predictions, labels), must be refused with a sentence that says so.
// expect: FIT_LOSS_TAKES_LABELS_THEN_PREDICTIONS
// expect: swap the parameters of your loss
// max-lines: 40
#include <gradus/gradus.hpp>
#include <gradus/train.hpp>
int main() {
  gradus::Rng rng(1);
  gradus::nn::Dense<float> net({.in = 2, .out = 3}, rng);
  gradus::optim::SGD<float> opt(net.parameters(), {.lr = 0.1f});
  gradus::train::Data<float, int64_t> data{gradus::Tensor<float>::zeros({4, 2}), gradus::Tensor<int64_t>::zeros({4})};
  auto old_order = [](const gradus::Var<float>& logits, const gradus::Tensor<int64_t>& labels) {
    return gradus::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
  };
  gradus::train::fit(net, opt, old_order, data);
}
