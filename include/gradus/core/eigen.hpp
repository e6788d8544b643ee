// gradus/core/eigen.hpp — Eigen's Core, included the way every gradus header includes it.
//
// GCC 12's AVX-512 intrinsics (avx512fintrin.h: `_mm512_undefined_ps` initialises a variable
// with itself) make -Wall print hundreds of "'__Y' may be used uninitialized" warnings wherever
// Eigen's vectorised code is instantiated with -march supporting AVX-512 (GCC bug 105593, fixed in
// GCC 12.3 and 13). Diagnostic pragmas apply by source location, so silencing those two warnings
// around the first inclusion of <immintrin.h> — which Eigen/Core performs — silences them for
// every later instantiation too, while the rest of the program keeps its warnings. A program
// that includes <immintrin.h> (or Eigen) itself before gradus gets the warnings back; include
// gradus first, or this header.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
