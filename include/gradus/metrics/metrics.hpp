// gradus/metrics/metrics.hpp — every streaming metric (TensorFlow 1.x tf.metrics semantics).
//
//   gd::metrics::Accuracy acc;  gd::metrics::AUC auc;
//   for (auto [x, y] : batches) { acc.update(y, gd::argmax(model(x), 1)); auc.update(y, p); }
//   acc.result();  auc.result();  acc.reset();
#pragma once
#include "gradus/metrics/metric.hpp"
#include "gradus/metrics/classification.hpp"
#include "gradus/metrics/confusion.hpp"
#include "gradus/metrics/mean.hpp"
#include "gradus/metrics/regression.hpp"
