// gradus/io.hpp — gd::io: checkpoints (safetensors files, a Saver directory with max_to_keep and
// latest_checkpoint, module / optimizer / Rng state), NumPy .npy / .npz files, TFRecord files
// (plain, GZIP, ZLIB), tf.train.Example / SequenceExample with typed parsing into tensors, and
// decode_raw.
// Not included by gradus/gradus.hpp: it needs zlib and nlohmann-json (link gradus::io).
#pragma once
#include "gradus/io/checkpoint.hpp"
#include "gradus/io/example.hpp"
#include "gradus/io/file.hpp"
#include "gradus/io/npy.hpp"
#include "gradus/io/raw.hpp"
#include "gradus/io/remap.hpp"
#include "gradus/io/safetensors.hpp"
#include "gradus/io/saver.hpp"
#include "gradus/io/tensor_list.hpp"
#include "gradus/io/tfrecord.hpp"
