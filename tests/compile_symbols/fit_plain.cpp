// What a header-only program compiles when it trains with fit on the CPU without a run directory,
// a collective, a regularizer or a GPU: none of the code only those lead to, which each is reached
// through a pointer set where the program makes one (docs/architecture.md, "values that carry
// their code"). cmake/CheckSymbols.cmake compiles this file header-only and reads its symbols.
//
// the checkpoint reader and writer (RunDir, CollectiveBroadcast: train/session.hpp)
// absent: gradus::train::Session::restore_from(
// absent: gradus::train::Session::sync_state(
// absent: gradus::train::CheckpointSaver::save(
// absent: gradus::io::encode_safetensors(
// absent: gradus::io::decode_safetensors(
// the l1/l2 penalty and the sum that adds it to the loss (Regularizer: nn/regularizers.hpp)
// absent: gradus::nn::Regularizer::penalty<
// a kernel's first launch on a GPU (gd::cuda(i): backend/cuda/elementwise.hpp)
// absent: gradus::backend::cuda::load_elementwise(
// the GPU's copy stager, which gd::cuda(i) makes (backend/cuda/staging.hpp)
// absent: gradus::backend::cuda::CudaStager::
// the deferred weight-gradient products of a leaf in double (matmul's backward: autodiff/node.hpp)
// absent: gradus::detail::LeafNode<double>::flush_products(
// the AVX-512 copies of the fixed loops and the bfloat16 kernels, which a header-only program
// built without -mavx512f has only with GRADUS_AVX512_KERNELS=1 (backend/cpu/isa.hpp)
// absent: run_avx512<
// absent: gradus::backend::cpu::sgemm::Bf16Dot::
// absent: gradus::backend::cpu::sgemm::pack_b_amx(
// and what the program does use, so that the absences above say something
// present: gradus::train::Session::open()
// present: gradus::train::detail::TypedTrainee<float>::apply(
// present: gradus::detail::LeafNode<float>::flush_products(
// present: gradus::detail::LeafNode<double>
// present: run_avx2<
// present: gradus::backend::cpu::sgemm::Avx2::
// present: gradus::backend::cpu::sgemm::Avx512::
#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

namespace gd = gradus;
namespace nn = gradus::nn;

int main() {
  gd::Rng rng(1);
  nn::Sequential net(nn::Dense<float>({.in = 4, .out = 8, .activation = nn::relu}, rng),
                     nn::Dense<float>({.in = 8, .out = 3}, rng));
  gd::optim::Adam<float> opt(net.parameters(), {.lr = 1e-2});
  gd::train::Data<float, int64_t> train{gd::Tensor<float>::random_uniform({32, 4}, rng, -1, 1),
                                         gd::Tensor<int64_t>::zeros({32})};
  auto loss = [](const gd::Tensor<int64_t>& y, const gd::Var<float>& logits) {
    return gd::losses::sparse_softmax_cross_entropy_with_logits(y, logits);
  };
  const gd::train::History h = gd::train::fit(net, opt, loss, train, {.epochs = 1, .batch_size = 8});

  // a gradient in double, without a matrix product
  gd::Var<double> v(gd::Tensor<double>::from({1.0, 2.0}, {2}));
  gd::backward(gd::sum(v * v));
  return h.global_step == 4 && v.grad()(1) == 4.0 ? 0 : 1;
}
