// src/gradus_double.cpp — the double instantiations of libgradus (the GRADUS_INSTANCE_DOUBLE lines
// of gradus/core/compiled.hpp), compiled beside src/gradus.cpp, which holds the rest: the two
// halves build in parallel. Every header src/gradus.cpp includes is included here too.
#define GRADUS_BUILDING_LIBRARY
#define GRADUS_LIBRARY_DOUBLE
#define GRADUS_COMPILED
#include "gradus/data/csv.hpp"
#include "gradus/data/fashion_mnist.hpp"
#include "gradus/data/text.hpp"
#include "gradus/data/tfrecord.hpp"
#include "gradus/gradus.hpp"
#include "gradus/train.hpp"
#include "gradus/io.hpp"
#include "gradus/estimator.hpp"
