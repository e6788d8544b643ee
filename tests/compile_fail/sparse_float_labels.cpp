// Float class ids given to the sparse cross-entropy must be refused with a sentence that names the fix.
// expect: LABELS_MUST_BE_TENSOR_INT64_T
// expect: gd::cast<int64_t>(labels)
// expect: Tensor<float>
// max-lines: 30
#include <gradus/gradus.hpp>
int main() {
  gradus::Tensor<float> labels = gradus::Tensor<float>::from({0, 2}, {2});
  gradus::Var<float> logits(gradus::Tensor<float>::zeros({2, 3}));
  auto loss = gradus::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
  (void)loss;
}
