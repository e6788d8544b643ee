// fit's validation every N steps (FitOptions::validation_every_steps, the train_and_evaluate
// pattern): the History's evaluations against evaluate() run on the same weights, EarlyStopping
// on them, the hooks' lines and summaries, and a resumed run's evaluations bit-identical to an
// uninterrupted run's.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/train.hpp>

#include "../support/classification_net.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;
using EvalData = gd::train::Data<double, int64_t>;

namespace {

/// evaluate() on the validation data after each step: the values an evaluation at that step must give.
struct Reference : gd::train::Hook {
  gradus_test::DenseBatchNormNet* net;
  const EvalData* val;
  std::vector<std::pair<int64_t, double>> val_losses;
  void after_step(gd::train::Session&, const gd::train::StepResult& r) override {
    val_losses.emplace_back(r.global_step, gd::train::evaluate(*net, gradus_test::xent, *val, {.batch_size = 8}).loss);
  }
};

}  // namespace

TEST_CASE("fit: validation every N steps, into History::evaluations", "[train][evaluations]") {
  const EvalData train = gradus_test::make_data(32, 4, 3, 21), val = gradus_test::make_data(12, 4, 3, 22);  // 4 steps per epoch
  gd::Rng init(1), dropout(2);
  gradus_test::DenseBatchNormNet net(4, 8, 3, 0.25, init, dropout);
  gd::optim::Adam<double> opt(net.parameters(), {.lr = 0.01});
  Reference ref;
  ref.net = &net;
  ref.val = &val;
  std::ostringstream out;
  gd::train::Logging log({.every_steps = 0}, out);
  const gd::train::History h = gd::train::fit(net, opt, gradus_test::xent, train,
                                              {.epochs = 2, .batch_size = 8, .validation = &val,
                                               .validation_every_steps = 3, .hooks = {&ref, &log}, .rng = &dropout});
  REQUIRE(h.evaluations.size() == 2);  // steps 3 and 6
  CHECK(h.evaluations[0].global_step == 3);
  CHECK(h.evaluations[0].epoch == 0);
  CHECK(h.evaluations[1].global_step == 6);
  CHECK(h.evaluations[1].epoch == 1);
  // the same value as evaluate() on the weights after that step (evaluation runs before after_step)
  for (const auto& e : h.evaluations)
    for (const auto& [step, loss] : ref.val_losses)
      if (step == e.global_step) CHECK(*e.val_loss == loss);
  CHECK(h.epochs.size() == 2);  // the epochs are validated as before
  CHECK(out.str().find("evaluation  step 3  epoch 1/2  val_loss ") != std::string::npos);

  // bad options
  CHECK_THROWS_WITH(gd::train::fit(net, opt, gradus_test::xent, train, {.validation_every_steps = 2}),
                    Catch::Contains("no validation data"));
  CHECK_THROWS_WITH(gd::train::fit(net, opt, gradus_test::xent, train, {.validation = &val, .validation_every_steps = -1}),
                    Catch::Contains("validation_every_steps must be >= 0"));
}

TEST_CASE("EarlyStopping on evaluations stops mid-epoch; a resumed run's evaluations match", "[train][evaluations][resume]") {
  const EvalData train = gradus_test::make_data(40, 4, 3, 23), val = gradus_test::make_data(12, 4, 3, 24);  // 5 steps per epoch
  struct Run {
    gd::Rng init, dropout;
    gradus_test::DenseBatchNormNet net;
    gd::optim::Adam<double> opt;
    // min_delta so large that nothing after the first evaluation counts as better
    gd::train::EarlyStopping early{{.min_delta = 1e9, .patience = 2, .on_evaluations = true}};
    explicit Run(uint64_t seed)
        : init(seed), dropout(seed + 1), net(4, 8, 3, 0.25, init, dropout), opt(net.parameters(), {.lr = 0.01}) {}
    gd::train::FitOptions<double, int64_t> options(const EvalData& v, fs::path dir, std::vector<gd::train::Hook*> extra) {
      std::vector<gd::train::Hook*> hooks{&early};
      hooks.insert(hooks.end(), extra.begin(), extra.end());
      return {.epochs = 4, .batch_size = 8, .seed = 5, .validation = &v, .validation_every_steps = 3, .hooks = hooks,
              .run_dir = dir, .rng = &dropout};
    }
  };
  Run a(1);
  const gd::train::History ha = gd::train::fit(a.net, a.opt, gradus_test::xent, train, a.options(val, {}, {}));
  // evaluations at 3 (best), 6 (wait 1), 9 (wait 2: stop after step 9, mid-epoch 2)
  CHECK(ha.global_step == 9);
  REQUIRE(ha.evaluations.size() == 3);
  CHECK(ha.stop_reason == gd::detail::str("EarlyStopping: val_loss did not improve for 2 evaluations (best ",
                                          *ha.evaluations[0].val_loss, " at step 3)"));
  CHECK(a.early.best_epoch() == 3);

  const fs::path dir = "evaluations_resume_run";
  fs::remove_all(dir);
  {
    Run b1(1);
    gd::train::StopAtStep stop({.last_step = 7});
    gd::train::fit(b1.net, b1.opt, gradus_test::xent, train, b1.options(val, dir, {&stop}));
  }
  Run b2(99);
  const gd::train::History hb = gd::train::fit(b2.net, b2.opt, gradus_test::xent, train, b2.options(val, dir, {}));
  CHECK(hb == ha);  // evaluations (epochs, steps, values) included
}
