// benchmarks/input_pipeline.cpp — what an input pipeline costs.
//
// (a) pipeline/cnn_100_steps/{in_memory,tfrecord}: 100 SGD steps of the LeNet CNN of steps.hpp
//     (batch 128, at 2 OpenMP threads), fed from batches already in memory, or from a prefetching
//     gd::data pipeline over 4 TFRecord shards of tf.train.Example records (PNG-encoded 28x28
//     Fashion-MNIST images, int64 labels): list_files → interleave(tfrecord) → parallel_map on 2
//     threads (parse_example, decode_png, pad to 32x32, random 28x28 crop, random flip) →
//     shuffle(2048) → batch(128) → repeat → prefetch(2). The pipeline is opened once, before the
//     timing, so the time is the steady state of an epoch (the shuffle buffer is full): the goal
//     is within 5% of in_memory on 2 cores, where the pipeline's threads share the cores with
//     the step's.
// (b) jpeg_crop_resize/{gradus,libjpeg}: per 224x224 RGB JPEG (quality 90), decode, a random
//     168x168 crop and a bilinear resize back to 224x224 as floats in [0, 1], on one thread:
//     gd::image::decode_jpeg + random_crop + resize, against a hand-written loop (libjpeg-turbo
//     called directly into a byte buffer, the crop as an offset, bilinear interpolation with
//     half-pixel centres by hand from precomputed taps). The goal is >= 0.8x its throughput.
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gradus/data.hpp>
#include <gradus/image.hpp>
#include <gradus/io.hpp>

#include "steps.hpp"

#include <jpeglib.h>  // after <cstdio>: it needs size_t and FILE

namespace {

namespace gd = gradus;
namespace fs = std::filesystem;
constexpr int64_t kSteps = 100;
constexpr int kShards = 4;

/// 4 shards holding the first kSteps * 128 training examples, written once per process.
const std::vector<std::string>& shard_files() {
  static const std::vector<std::string> files = [] {
    const fs::path dir = fs::temp_directory_path() / ("gradus_bench_pipeline_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto data = gd::datasets::fashion_mnist();
    std::vector<gd::io::TFRecordWriter> w;
    for (int k = 0; k < kShards; ++k) w.emplace_back((dir / ("train-" + std::to_string(k))).string());
    for (int64_t i = 0; i < kSteps * steps::kBatch; ++i) {
      const steps::Tensor picture = gd::slice(data.train_images, {i, 0, 0}, {1, 28, 28});
      gd::io::Example ex;
      ex.features["image"] = gd::io::BytesList{gd::image::encode_png(picture.reshape({28, 28, 1}))};
      ex.features["label"] = gd::io::Int64List{data.train_labels.data()[i]};
      w[size_t(i % kShards)].write(gd::io::encode_example(ex));
    }
    for (auto& x : w) x.close();
    std::atexit([] { fs::remove_all(fs::temp_directory_path() / ("gradus_bench_pipeline_" + std::to_string(::getpid()))); });
    return gd::data::list_files((dir / "train-*").string());
  }();
  return files;
}

gd::data::Dataset tfrecord_pipeline() {
  const auto parse = gd::data::parse_example({
      {"image", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::bytes}},
      {"label", gd::io::FixedLen{.shape = {}, .dtype = gd::io::FeatureDtype::int64}}});
  auto augment = [parse](gd::data::Example e) {
    gd::Rng rng(uint64_t(e.tensor<int64_t>(1).item()));
    const gd::data::Example p = parse(std::move(e));
    const steps::Tensor image = gd::image::decode_png(p.string("image"));
    const steps::Tensor padded = gd::eval(gd::image::pad_to_bounding_box(image, 2, 2, 32, 32));
    const steps::Tensor cropped = gd::eval(gd::image::random_crop(padded, {28, 28}, rng));
    const steps::Tensor flipped = gd::eval(gd::image::random_flip_left_right(cropped, rng));
    return gd::data::Example::tuple(flipped, p.tensor<int64_t>("label"));
  };
  const auto records = gd::data::Dataset::from_strings(shard_files()).interleave(
      [](const gd::data::Example& f) { return gd::data::tfrecord({f.string(0)}); }, kShards);
  const auto salts = gd::data::Dataset::range(0, int64_t(1) << 62).shuffle(1024, 11);
  return gd::data::Dataset::zip({records, salts})
      .parallel_map(augment, 2)
      .shuffle(2048, 7)
      .batch(steps::kBatch, true)
      .repeat()
      .prefetch(2);
}

void BM_cnn_in_memory(benchmark::State& state) {
  omp_set_num_threads(2);
  const steps::Batches& b = steps::image_batches();
  steps::GradusCnn m;
  size_t i = 0;
  for (auto _ : state)
    for (int64_t s = 0; s < kSteps; ++s) {
      benchmark::DoNotOptimize(m.step(b.x[i], b.y[i]));
      i = (i + 1) % b.x.size();
    }
  state.SetItemsProcessed(int64_t(state.iterations()) * kSteps * steps::kBatch);
}

void BM_cnn_tfrecord(benchmark::State& state) {
  omp_set_num_threads(2);
  gd::data::Dataset ds = tfrecord_pipeline();
  gd::data::Iterator it = ds.iterator();
  for (int k = 0; k < 3; ++k) it.next();  // warm: the shuffle buffer is full, the prefetch queue too
  steps::GradusCnn m;
  for (auto _ : state)
    for (int64_t s = 0; s < kSteps; ++s) {
      const gd::data::Example batch = *it.next();
      const auto [x, y] = batch.as<float, int64_t>();
      benchmark::DoNotOptimize(m.step(x.reshape({steps::kBatch, 784}), y));
    }
  state.SetItemsProcessed(int64_t(state.iterations()) * kSteps * steps::kBatch);
}

// --- (b) JPEG decode + random crop + resize ------------------------------------------------------

constexpr int64_t kSide = 224, kCrop = 168, kImages = 16;

/// kImages 224x224 RGB JPEGs of smooth shapes and noise (quality 90).
const std::vector<std::string>& jpegs() {
  static const std::vector<std::string> out = [] {
    std::vector<std::string> v;
    gd::Rng rng(5);
    for (int64_t k = 0; k < kImages; ++k) {
      steps::Tensor img({kSide, kSide, 3});
      const double a = rng.uniform() * 0.1, b = rng.uniform() * 0.1;
      for (int64_t y = 0; y < kSide; ++y)
        for (int64_t x = 0; x < kSide; ++x)
          for (int64_t c = 0; c < 3; ++c)
            img(y, x, c) = float(0.5 + 0.35 * std::sin(a * double(x) + b * double(y) + double(c)) + 0.1 * rng.uniform());
      v.push_back(gd::image::encode_jpeg(img, {.quality = 90}));
    }
    return v;
  }();
  return out;
}

void BM_jpeg_gradus(benchmark::State& state) {
  omp_set_num_threads(1);
  const auto& files = jpegs();
  gd::Rng rng(3);
  size_t i = 0;
  for (auto _ : state) {
    const steps::Tensor img = gd::image::decode_jpeg(files[i]);
    const steps::Tensor out = gd::eval(gd::image::resize(gd::image::random_crop(img, {kCrop, kCrop}, rng), {kSide, kSide}));
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % files.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}

/// Bilinear taps with half-pixel centres (TF 2's resize): out o reads in i0, i1 with weight 1 - f, f.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> f;
  Taps(int64_t in, int64_t out) {
    const double scale = double(in) / double(out);
    for (int64_t o = 0; o < out; ++o) {
      const double s = std::max(0.0, (double(o) + 0.5) * scale - 0.5);
      const int64_t a = std::min<int64_t>(int64_t(s), in - 1);
      i0.push_back(a);
      i1.push_back(std::min<int64_t>(a + 1, in - 1));
      f.push_back(float(s - double(a)));
    }
  }
};

void BM_jpeg_libjpeg(benchmark::State& state) {
  const auto& files = jpegs();
  gd::Rng rng(3);
  const Taps taps(kCrop, kSide);
  std::vector<unsigned char> pixels;
  std::vector<float> out(size_t(kSide * kSide * 3));
  size_t i = 0;
  for (auto _ : state) {
    jpeg_decompress_struct cinfo;
    jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(files[i].data()), static_cast<unsigned long>(files[i].size()));
    jpeg_read_header(&cinfo, TRUE);
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    const int64_t h = cinfo.output_height, w = cinfo.output_width;
    pixels.resize(size_t(h * w * 3));
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = pixels.data() + int64_t(cinfo.output_scanline) * w * 3;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    // The crop, drawn as random_crop draws it, is an offset into the decoded bytes.
    const int64_t oy = int64_t(rng.below(uint64_t(h - kCrop + 1)));
    const int64_t ox = int64_t(rng.below(uint64_t(w - kCrop + 1)));
    const unsigned char* base = pixels.data() + (oy * w + ox) * 3;
    for (int64_t y = 0; y < kSide; ++y) {
      const unsigned char* r0 = base + taps.i0[size_t(y)] * w * 3;
      const unsigned char* r1 = base + taps.i1[size_t(y)] * w * 3;
      const float fy = taps.f[size_t(y)];
      float* o = out.data() + y * kSide * 3;
      for (int64_t x = 0; x < kSide; ++x) {
        const int64_t a = taps.i0[size_t(x)] * 3, b = taps.i1[size_t(x)] * 3;
        const float fx = taps.f[size_t(x)];
        for (int c = 0; c < 3; ++c) {
          const float top = float(r0[a + c]) + fx * float(int(r0[b + c]) - int(r0[a + c]));
          const float bot = float(r1[a + c]) + fx * float(int(r1[b + c]) - int(r1[a + c]));
          o[x * 3 + c] = (top + fy * (bot - top)) * (1.f / 255.f);
        }
      }
    }
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % files.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}

}  // namespace

BENCHMARK(BM_cnn_in_memory)->Name("pipeline/cnn_100_steps/in_memory")->Iterations(1)->Repetitions(3)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_cnn_tfrecord)->Name("pipeline/cnn_100_steps/tfrecord")->Iterations(1)->Repetitions(3)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_jpeg_gradus)->Name("jpeg_crop_resize/gradus")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_jpeg_libjpeg)->Name("jpeg_crop_resize/libjpeg")->UseRealTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
