// src/gradus.cpp — the non-template part of libgradus (gradus/core/compiled.hpp): every header that
// holds such code, included once with GRADUS_BUILDING_LIBRARY, which makes each of its
// GRADUS_INLINE definitions the program's one definition and each GRADUS_INSTANCE line an explicit
// instantiation (the GRADUS_INSTANCE_DOUBLE ones are src/gradus_double.cpp's). With
// GRADUS_COMPILED as well, this file sees the CPU kernels as declarations (src/kernels.cpp
// defines them). scripts/check-headers checks that every header with such code is reached from
// here.
#define GRADUS_BUILDING_LIBRARY
#define GRADUS_COMPILED
#include "gradus/data/csv.hpp"
#include "gradus/data/fashion_mnist.hpp"
#include "gradus/data/text.hpp"
#include "gradus/data/tfrecord.hpp"
#include "gradus/gradus.hpp"
#include "gradus/train.hpp"
#include "gradus/io.hpp"
#include "gradus/estimator.hpp"
