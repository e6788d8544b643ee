// The training run behind the checkpoint harness and its seed: a 2-4-2 MLP with Adam, an
// EarlyStopping hook (whose state is checkpointed), the model's Rng and a CheckpointSaver that
// exports into another directory, so one restore reaches every part of a fit checkpoint.
#pragma once
#include <filesystem>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

namespace gradus::fuzz {

struct TinyNet : nn::Module<float> {
  nn::Dense<float> d1, d2;
  explicit TinyNet(Rng& init) : d1({.in = 2, .out = 4, .activation = nn::relu}, init), d2({.in = 4, .out = 2}, init) {
    register_module("d1", d1);
    register_module("d2", d2);
  }
  Var<float> forward(const Tensor<float>& x) { return d2.forward(d1.forward(x)); }
};

/// Restores from `run_dir` when it has a checkpoint, trains to 2 epochs of 3 steps and saves the
/// final state into `export_dir` (max_to_keep 1). Throws what fit throws.
inline train::History tiny_training(const std::filesystem::path& run_dir, const std::filesystem::path& export_dir) {
  Rng init(1), noise(2), data_rng(3);
  TinyNet net(init);
  optim::Adam<float> opt(net.parameters(), {.lr = 0.01});
  const train::Data<float, float> data{Tensor<float>::random_normal({6, 2}, data_rng),
                                       Tensor<float>::random_normal({6, 2}, data_rng)};
  train::EarlyStopping early({.monitor = "loss", .patience = 5, .restore_best = true});
  train::CheckpointSaver saver({.every_secs = 0, .max_to_keep = 1, .dir = export_dir});
  const auto mse = [](const Tensor<float>& y, const Var<float>& pred) { return losses::mean_squared_error(y, pred); };
  return train::fit(net, opt, mse, data,
                    {.epochs = 2, .batch_size = 2, .seed = 4, .hooks = {&early, &saver}, .run_dir = run_dir, .rng = &noise});
}

}  // namespace gradus::fuzz
