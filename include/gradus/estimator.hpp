// gradus/estimator.hpp — feature columns and canned models (tf.feature_column, tf.estimator):
// columns that turn the raw fields of CSV rows or parsed tf.train.Examples into a model's dense
// input (gd::feature_column), and DNNClassifier, DNNRegressor and LinearClassifier that train with
// fit on a Dataset (gd::estimator). Not included by gradus/gradus.hpp: it needs gradus::data and
// gradus::io.
#pragma once
#include "gradus/estimator/canned.hpp"
#include "gradus/estimator/dense_features.hpp"
#include "gradus/estimator/feature_columns.hpp"
