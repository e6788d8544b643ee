// gradus/core/compiled.hpp — which parts of gradus a translation unit defines: all of it
// (header-only), or only its templates, with the non-template code compiled once in libgradus.
//
// Header-only is what including the headers gives by default. A program built with
// GRADUS_COMPILED (CMake defines it for every target that links gradus::kernels) links libgradus,
// which holds gradus' non-template code — the training session, checkpoints, the CUDA runtime —
// and the CPU kernels (GRADUS_COMPILED implies GRADUS_COMPILED_KERNELS, backend/cpu/compiled.hpp):
// its translation units see those functions' declarations only, and compile no copy of them.
//
// How a header takes part: a non-template function whose definition libgradus holds is declared
// where it was, and defined with GRADUS_INLINE inside `#if GRADUS_DEFINE_COMPILED ... #endif`:
//   GRADUS_INLINE void Session::finish() { ... }        // inline when header-only; one strong
//                                                        // definition in libgradus (src/gradus.cpp)
// The two modes compile the same source, so they compute the same results.
#pragma once

#if defined(GRADUS_COMPILED) && !defined(GRADUS_COMPILED_KERNELS)
#define GRADUS_COMPILED_KERNELS
#endif

#if defined(GRADUS_BUILDING_LIBRARY) && defined(GRADUS_LIBRARY_DOUBLE)  // src/gradus_double.cpp: none
#define GRADUS_DEFINE_COMPILED 0
#define GRADUS_INLINE inline
#elif defined(GRADUS_BUILDING_LIBRARY)  // src/gradus.cpp: the definitions, once, not inline
#define GRADUS_DEFINE_COMPILED 1
#define GRADUS_INLINE
#elif defined(GRADUS_COMPILED)  // a program that links libgradus: declarations only
#define GRADUS_DEFINE_COMPILED 0
#define GRADUS_INLINE inline
#else  // header-only
#define GRADUS_DEFINE_COMPILED 1
#define GRADUS_INLINE inline
#endif

// A virtual function of a (non-template) class whose definition is a GRADUS_INLINE one is
// declared with GRADUS_INLINE_DECL in the class:
//   GRADUS_INLINE_DECL void after_step(Session& s, const StepResult& r) override;
// Header-only that is `inline`, so the class has no key function and a translation unit emits its
// vtable (and so every virtual function) only when it uses the class, as when the bodies were in
// the class; otherwise it is nothing: the library's definition is the key function, and the
// vtable is compiled once, in libgradus.
#if GRADUS_DEFINE_COMPILED && !defined(GRADUS_BUILDING_LIBRARY)
#define GRADUS_INLINE_DECL inline
#else
#define GRADUS_INLINE_DECL
#endif

// The class templates over the element type that libgradus instantiates for float and double
// (optimizers, the training session's model adapter, ...): each header ends with
//   #if GRADUS_INSTANCES
//   GRADUS_INSTANCE class Optimizer<float>;
//   GRADUS_INSTANCE_DOUBLE class Optimizer<double>;
//   #endif
// which declares the instantiations `extern template` in a program that links libgradus, so that
// none of their members is compiled there, and defines them in the library; header-only, it is
// not compiled at all. The library compiles them in two translation units that build in
// parallel: src/gradus.cpp defines the GRADUS_INSTANCE lines (float, and those of no element
// type), src/gradus_double.cpp the GRADUS_INSTANCE_DOUBLE ones; each sees the other's as
// `extern template`.
#if defined(GRADUS_BUILDING_LIBRARY) && defined(GRADUS_LIBRARY_DOUBLE)
#define GRADUS_INSTANCES 1
#define GRADUS_INSTANCE extern template
#define GRADUS_INSTANCE_DOUBLE template
#elif defined(GRADUS_BUILDING_LIBRARY)
#define GRADUS_INSTANCES 1
#define GRADUS_INSTANCE template
#define GRADUS_INSTANCE_DOUBLE extern template
#elif defined(GRADUS_COMPILED)
#define GRADUS_INSTANCES 1
#define GRADUS_INSTANCE extern template
#define GRADUS_INSTANCE_DOUBLE extern template
#else
#define GRADUS_INSTANCES 0
#define GRADUS_INSTANCE
#define GRADUS_INSTANCE_DOUBLE
#endif
