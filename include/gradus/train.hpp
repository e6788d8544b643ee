// gradus/train.hpp — the training area (gd::train): fit / evaluate / predict over in-memory data
// or a gd::data::Dataset of batches, a MonitoredSession-style loop that restores from and
// checkpoints into a run directory, and hooks. Needs the gradus::io target (libpng, zlib,
// nlohmann-json); not included by gradus.hpp.
//
//   #include <gradus/gradus.hpp>
//   #include <gradus/train.hpp>
//   namespace gd = gradus;
//
//   gd::Rng rng(42);
//   gd::nn::Sequential net(gd::nn::Dense<double>({.in = 784, .out = 256, .activation = gd::nn::relu}, rng),
//                          gd::nn::Dropout<double>({.rate = 0.2}, rng),
//                          gd::nn::Dense<double>({.in = 256, .out = 10}, rng));
//   gd::optim::Adam opt(net.parameters(), {.lr = 1e-3});
//   gd::train::Data<double, int64_t> train{x_train, y_train}, test{x_test, y_test};   // [N, 784], [N]
//   auto loss = [](const auto& labels, const auto& logits) {     // labels first, as gd::losses
//     return gd::losses::sparse_softmax_cross_entropy_with_logits(labels, logits);
//   };
//   gd::metrics::SparseCategoricalAccuracy accuracy;
//   accuracy.set_name("accuracy");                 // History key "val_accuracy"
//   gd::train::EarlyStopping early({.monitor = "val_accuracy", .patience = 2, .restore_best = true});
//   gd::train::Logging log({.every_steps = 200});
//   gd::train::LrScheduler sched(gd::optim::cosine_decay(1e-3, 20 * 469));
//   gd::summary::FileWriter writer("runs/mlp/train");
//   gd::train::SummarySaver summaries(writer, {.every_steps = 100});
//   gd::train::History history = gd::train::fit(net, opt, loss, train, {
//       .epochs = 20, .batch_size = 128, .seed = 7,
//       .validation = &test, .metrics = {&accuracy},
//       .hooks = {&early, &log, &sched, &summaries},
//       .run_dir = "runs/mlp",                 // resumes from runs/mlp if a checkpoint is there
//       .checkpoint = {.every_steps = 1000},   // and writes one every 1000 steps and at the end
//       .rng = &rng});                         // Dropout's generator travels with the checkpoints
//   gd::train::Evaluation ev = gd::train::evaluate(net, loss, test, {.metrics = {&accuracy}});
//   gd::Tensor<double> logits = gd::train::predict(net, x_test);
//   std::printf("test loss %.4f accuracy %.4f after %lld steps\n", ev.loss, ev.get("accuracy"),
//               (long long)history.global_step);
//
// A step of one's own (seq2seq, truncated BPTT) gets the same hooks and checkpoints from a Session:
//   gd::train::StopAtStep stop({.last_step = 10000});
//   gd::train::Session session(net, opt, {.run_dir = "runs/lm", .hooks = {&stop, &log}, .rng = &rng});
//   while (!session.should_stop())
//     session.run([&] { auto [x, y] = next_batch(); return my_loss(net, x, y); });   // scalar Var
//   session.close();
//
// Lighter: <gradus/train/fit.hpp> alone has fit, evaluate and predict on in-memory Data, the
// Session, checkpoints and the hooks of train/hooks.hpp (about half the compile time of this
// header); <gradus/train/summary_saver.hpp> adds SummarySaver.
//
// A model of several inputs and outputs (Keras' multi-output Model, one weighted loss per output)
// trains on gd::train::MultiData: #include <gradus/train/fit_multi.hpp> (not included here).
#pragma once
#include "gradus/io.hpp"
#include "gradus/summary.hpp"
#include "gradus/train/data.hpp"
#include "gradus/train/session.hpp"
#include "gradus/train/hooks.hpp"
#include "gradus/train/moving_average.hpp"
#include "gradus/train/checkpoint_saver.hpp"
#include "gradus/train/summary_saver.hpp"
#include "gradus/train/projector_hook.hpp"
#include "gradus/train/profiler_hook.hpp"
#include "gradus/train/session_run.hpp"
#include "gradus/train/fit.hpp"
#include "gradus/train/fit_dataset.hpp"
