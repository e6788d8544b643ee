// Every harness of fuzz/ in one libFuzzer executable: the environment variable GRADUS_FUZZ_TARGET
// names the one to run (GRADUS_FUZZ_TARGET=npy build-fuzz/fuzz/fuzz_all <corpus>...). The harnesses
// share their readers and the tensor code they exercise, so one translation unit compiles in a
// fraction of the time of fifteen (scripts/fuzz all builds this one; scripts/fuzz <target> the
// harness's own executable). Each harness file is included inside a namespace of its own, after
// every header the harnesses include, so that their file-local names cannot clash.
#define GRADUS_FUZZ_ALL

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gradus/backend/cuda/kernel_cache.hpp>
#include <gradus/data/csv.hpp>
#include <gradus/data/idx.hpp>
#include <gradus/detail/json.hpp>
#include <gradus/gradus.hpp>
#include <gradus/image.hpp>
#include <gradus/io.hpp>
#include <gradus/summary.hpp>
#ifdef GRADUS_FUZZ_ONNX
#include <variant>

#include <gradus/onnx.hpp>
#endif

#include "fuzz_common.hpp"
#include "tiny_training.hpp"

// clang-format off
namespace h_checkpoint {
#include "fuzz_checkpoint.cpp"
}
namespace h_csv {
#include "fuzz_csv.cpp"
}
namespace h_events {
#include "fuzz_events.cpp"
}
namespace h_example {
#include "fuzz_example.cpp"
}
namespace h_idx {
#include "fuzz_idx.cpp"
}
namespace h_jpeg {
#include "fuzz_jpeg.cpp"
}
namespace h_json {
#include "fuzz_json.cpp"
}
namespace h_kernel_cache {
#include "fuzz_kernel_cache.cpp"
}
namespace h_npy {
#include "fuzz_npy.cpp"
}
namespace h_npz {
#include "fuzz_npz.cpp"
}
namespace h_png {
#include "fuzz_png.cpp"
}
namespace h_safetensors {
#include "fuzz_safetensors.cpp"
}
namespace h_saver_state {
#include "fuzz_saver_state.cpp"
}
namespace h_tfrecord {
#include "fuzz_tfrecord.cpp"
}
#ifdef GRADUS_FUZZ_ONNX  // where ONNX is found (fuzz/CMakeLists.txt)
namespace h_onnx {
#include "fuzz_onnx.cpp"
}
#endif
// clang-format on

namespace {

struct Harness {
  std::string_view name;
  int (*run)(const uint8_t*, size_t);
};

constexpr Harness harnesses[] = {
    {"checkpoint", h_checkpoint::fuzz_one_input},     {"csv", h_csv::fuzz_one_input},
    {"events", h_events::fuzz_one_input},             {"example", h_example::fuzz_one_input},
    {"idx", h_idx::fuzz_one_input},                   {"jpeg", h_jpeg::fuzz_one_input},
    {"json", h_json::fuzz_one_input},
    {"kernel_cache", h_kernel_cache::fuzz_one_input}, {"npy", h_npy::fuzz_one_input},
    {"npz", h_npz::fuzz_one_input},                   {"png", h_png::fuzz_one_input},
    {"safetensors", h_safetensors::fuzz_one_input},   {"saver_state", h_saver_state::fuzz_one_input},
    {"tfrecord", h_tfrecord::fuzz_one_input},
#ifdef GRADUS_FUZZ_ONNX
    {"onnx", h_onnx::fuzz_one_input},
#endif
};

int (*selected)(const uint8_t*, size_t) = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* name = std::getenv("GRADUS_FUZZ_TARGET");
  for (const Harness& h : harnesses)
    if (name && h.name == name) selected = h.run;
  if (!selected) {
    std::cerr << "fuzz_all: set GRADUS_FUZZ_TARGET to one of:";
    for (const Harness& h : harnesses) std::cerr << ' ' << h.name;
    std::cerr << (name ? " (got '" + std::string(name) + "')" : std::string(" (it is not set)")) << '\n';
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return selected(data, size); }
