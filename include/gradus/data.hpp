// gradus/data.hpp — gd::data: input pipelines (Dataset, the C++ form of tf.data) over
// Examples, their sources (tensor slices, ranges, generators, IDX, CSV, text lines, file
// globs, TFRecord files with tf.train.Example parsing) and transformations, the threading
// blocks under them (BoundedQueue, Coordinator), text helpers (Vocabulary, ptb_batches,
// pad_sequences) and Fashion-MNIST.
// Not included by gradus/gradus.hpp: it needs zlib and threads (link gradus::data).
#pragma once
#include "gradus/data/csv.hpp"
#include "gradus/data/dataset.hpp"
#include "gradus/data/example.hpp"
#include "gradus/data/fashion_mnist.hpp"
#include "gradus/data/idx.hpp"
#include "gradus/data/order.hpp"
#include "gradus/data/queue.hpp"
#include "gradus/data/text.hpp"
#include "gradus/data/tfrecord.hpp"
