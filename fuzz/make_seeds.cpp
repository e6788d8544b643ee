// Writes the seed corpora of the fuzz harnesses, each made by the library's own writers:
//   make_seeds <fuzz/corpus>   ->  <dir>/<target>/<name>
// (IDX files, which gradus only reads, are assembled here byte by byte, raw and gzipped.)
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gradus/gradus.hpp>
#include <gradus/image.hpp>
#include <gradus/io.hpp>
#include <gradus/summary.hpp>

#include "tiny_training.hpp"

namespace gd = gradus;
namespace fs = std::filesystem;

namespace {

fs::path root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(root / target);
  std::ofstream(root / target / name, std::ios::binary) << bytes;
}

template <class T>
gd::Tensor<T> seq(const gd::Shape& s) {
  gd::Tensor<T> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t.data()[i] = T(i) - T(2);
  return t;
}

std::string idx(const std::vector<uint32_t>& dims) {
  std::string out = {0, 0, 8, char(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int k = 3; k >= 0; --k) out += char((d >> (8 * k)) & 0xFF);
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) out += char(i * 37);
  return out;
}

std::string gzip(const std::string& raw) {
  std::string out(compressBound(uLong(raw.size())) + 64, '\0');
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // +16: a gzip wrapper
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = uInt(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds <corpus directory>\n";
    return 2;
  }
  root = argv[1];
  const gd::io::TensorList tensors = {{"a", seq<float>({2, 3})},
                                      {"b", seq<double>({5})},
                                      {"c", seq<int64_t>({2, 2})},
                                      {"s", gd::Tensor<double>::scalar(3.5)},
                                      {"e", gd::Tensor<float>::zeros({0, 3})},
                                      {"r4", seq<float>({2, 1, 2, 2})}};
  for (const auto& [name, t] : tensors) seed("npy", name + ".npy", gd::io::encode_npy(t));
  seed("npz", "all.npz", gd::io::encode_npz(tensors));
  seed("npz", "one.npz", gd::io::encode_npz({tensors[0]}));
  seed("safetensors", "all.safetensors", gd::io::encode_safetensors(tensors, {{"global_step", "300"}}));
  seed("safetensors", "empty.safetensors", gd::io::encode_safetensors({}));
  {  // json: a safetensors header as written (the 8-byte length cut off), and every kind of value
    const std::string file = gd::io::encode_safetensors(tensors, {{"global_step", "300"}});
    seed("json", "header.json", file.substr(8));
    seed("json", "values.json",
         "[0, -0, 7, -12, 18446744073709551616, 2.5, -1e-3, 6.02E+23, true, false, null, \"\", \"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\"]");
    seed("json", "unicode.json", "{\"caf\xc3\xa9\": \"\\u00e9\\ud83d\\ude00 \xe2\x82\xac\", \"deep\": [[[{\"x\": [{}]}]]]}");
  }
  seed("saver_state", "three", gd::io::encode_checkpoint_state({"model.ckpt-3.safetensors",
                                                                {"model.ckpt-1.safetensors", "model.ckpt-2.safetensors",
                                                                 "model.ckpt-3.safetensors"}}));
  seed("saver_state", "one", gd::io::encode_checkpoint_state({"m-0.safetensors", {"m-0.safetensors"}}));

  gd::Rng rng(5);
  const gd::Tensor<float> rgb = gd::Tensor<float>::random_uniform({3, 4, 3}, rng);
  const gd::Tensor<float> gray = gd::Tensor<float>::random_uniform({2, 5, 1}, rng);
  const gd::Tensor<float> rgba = gd::Tensor<float>::random_uniform({4, 2, 4}, rng);
  seed("png", "rgb.png", gd::image::encode_png(rgb));
  seed("png", "gray.png", gd::image::encode_png(gray));
  seed("png", "rgba.png", gd::image::encode_png(rgba));
  seed("png", "rgb16.png", gd::image::encode_png(rgb, {.bits = 16}));
  // JPEG seeds start with the harness's option byte (0: the defaults)
  const gd::Tensor<float> photo = gd::Tensor<float>::random_uniform({16, 24, 3}, rng);
  seed("jpeg", "rgb.jpg", std::string(1, '\0') + gd::image::encode_jpeg(photo, {.quality = 75}));
  seed("jpeg", "gray.jpg", std::string(1, '\0') + gd::image::encode_jpeg(gray));
  seed("jpeg", "progressive.jpg", std::string(1, '\x05') + gd::image::encode_jpeg(photo, {.progressive = true}));
  seed("jpeg", "rgb444.jpg", std::string(1, '\x36') + gd::image::encode_jpeg(rgb, {.chroma_downsampling = false}));

  namespace sm = gd::summary;
  std::string events = gradus::io::encode_tfrecord(sm::encode_file_version_event(1.5));
  events += gradus::io::encode_tfrecord(sm::encode_scalar_event(2.5, 1, "loss", 0.25f));
  events += gradus::io::encode_tfrecord(sm::encode_summary_event(
      3.5, 2, {sm::encode_histogram_value("w", sm::make_histogram(rgb)),
               sm::encode_image_value("img", {.height = 2, .width = 5, .colorspace = 1,
                                              .encoded = gd::image::encode_png(gray)}),
               sm::encode_text_value("note", "hello")}));
  seed("events", "events.out.tfevents.seed", events);

  // tf.train.Example with the names fuzz_example's spec asks for, and a SequenceExample.
  gd::io::Example ex;
  ex.features["a"] = gd::io::FloatList{0.5f, -1.f};
  ex.features["b"] = gd::io::Int64List{7};
  ex.features["c"] = gd::io::BytesList{"cat", ""};
  ex.features["d"] = gd::io::Int64List{-1, 300, 2};
  ex.features["e"] = gd::io::BytesList{"p", "q"};
  ex.features["z"] = gd::io::Feature{};
  gd::io::SequenceExample se;
  se.context["a"] = gd::io::FloatList{1.f};
  se.feature_lists["a"] = {gd::io::FloatList{1.f, 2.f}, gd::io::FloatList{3.f, 4.f}};
  se.feature_lists["b"] = {gd::io::Int64List{1}, gd::io::Int64List{2, 3}};
  se.feature_lists["c"] = {gd::io::BytesList{"w"}, gd::io::BytesList{}};
  seed("example", "example", gd::io::encode_example(ex));
  seed("example", "sequence_example", gd::io::encode_sequence_example(se));

  // TFRecord streams: the first byte picks the compression (0 none, 1 gzip, 2 zlib).
  std::string stream;
  for (const std::string& r : {gd::io::encode_example(ex), std::string(), std::string("record"),
                               gd::io::encode_example(gd::io::Example{})})
    stream += gd::io::encode_tfrecord(r);
  std::string zlibbed(compressBound(uLong(stream.size())), '\0');
  uLongf zlen = uLongf(zlibbed.size());
  compress2(reinterpret_cast<Bytef*>(zlibbed.data()), &zlen, reinterpret_cast<const Bytef*>(stream.data()),
            uLong(stream.size()), 6);
  zlibbed.resize(zlen);
  seed("tfrecord", "plain", std::string(1, '\0') + stream);
  seed("tfrecord", "gzip", std::string(1, '\1') + gzip(stream));
  seed("tfrecord", "zlib", std::string(1, '\2') + zlibbed);

  // CSV: the first byte picks the delimiter (0 ',', 1 ';', 2 tab, 3 '|'), the rest is the file.
  seed("csv", "typed.csv", std::string(1, '\0') + "i,f,s\n1,2.5,x\n,,\"a,b\"\n-7,1e3,\"say \"\"hi\"\"\"\n");
  seed("csv", "multiline.csv", std::string(1, '\0') + "1,2,\"two\r\nlines\"\r\n\r\n3,4,z");
  seed("csv", "semicolon.csv", std::string(1, '\1') + "1;2;x\n4;5\n");
  seed("csv", "bad_quote.csv", std::string(1, '\0') + "1,2,a\"b\n\"open");

  seed("idx", "labels", idx({10}));
  seed("idx", "images", idx({2, 3, 3}));
  seed("idx", "images.gz", gzip(idx({2, 4, 4})));

  // A real fit checkpoint: train once, keep what the CheckpointSaver exported.
  const fs::path work = fs::temp_directory_path() / "gradus-make-seeds";
  fs::remove_all(work);
  gd::fuzz::tiny_training(work / "run", work / "export");
  const auto latest = gd::io::latest_checkpoint(work / "export");
  if (!latest) {
    std::cerr << "make_seeds: the training run wrote no checkpoint\n";
    return 1;
  }
  seed("checkpoint", "fit.safetensors", gd::io::read_file(*latest));
  fs::remove_all(work);
  std::cout << "make_seeds: wrote the corpora under " << root << "\n";
  return 0;
}
