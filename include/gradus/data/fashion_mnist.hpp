// gradus/data/fashion_mnist.hpp — Fashion-MNIST as installed by Debian's dataset-fashion-mnist.
// Needs zlib: link gradus::data.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "gradus/core/compiled.hpp"
#include "gradus/core/error.hpp"
#include "gradus/core/tensor.hpp"
#include "gradus/data/idx.hpp"

namespace gradus::detail {

void fashion_mnist_check_pair(const Tensor<float>& images, const Tensor<int64_t>& labels,
                              const std::string& images_path, const std::string& labels_path);

}  // namespace gradus::detail

namespace gradus::datasets {

/// The four Fashion-MNIST tensors: images [N, 28, 28] float in [0, 1], labels [N] int64 in 0..9;
/// N = 60000 for train and 10000 for test.
struct FashionMnist {
  Tensor<float> train_images;
  Tensor<int64_t> train_labels;
  Tensor<float> test_images;
  Tensor<int64_t> test_labels;
};

/// The names of the ten classes, indexed by label: 0 "T-shirt/top" ... 9 "Ankle boot".
constexpr std::array<std::string_view, 10> fashion_mnist_class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

/// Loads Fashion-MNIST from `dir` (the gzipped IDX files train-images-idx3-ubyte.gz,
/// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz).
/// Throws io_error when a file is missing (naming the Debian package), corrupt, or
/// inconsistent (image and label counts differ, images not 28x28, a label >= 10).
///   auto [x_train, y_train, x_test, y_test] = gd::datasets::fashion_mnist();
FashionMnist fashion_mnist(const std::string& dir = "/usr/share/datasets/fashion-mnist");

}  // namespace gradus::datasets

#if GRADUS_DEFINE_COMPILED  // libgradus holds these with GRADUS_COMPILED (core/compiled.hpp)
namespace gradus::detail {
GRADUS_INLINE void fashion_mnist_check_pair(const Tensor<float>& images, const Tensor<int64_t>& labels,
                                            const std::string& images_path, const std::string& labels_path) {
  GRADUS_CHECK(io_error, images.dim(1) == 28 && images.dim(2) == 28, "fashion_mnist: '", images_path,
               "' holds images of shape ", images.shape(), "; expected [N,28,28]");
  GRADUS_CHECK(io_error, images.dim(0) == labels.dim(0), "fashion_mnist: '", images_path, "' holds ", images.dim(0),
               " images but '", labels_path, "' holds ", labels.dim(0), " labels");
  for (int64_t i = 0; i < labels.size(); ++i)
    GRADUS_CHECK(io_error, labels.data()[i] < 10, "fashion_mnist: '", labels_path, "': label ", labels.data()[i],
                 " at index ", i, " is not a class in 0..9");
}
}  // namespace gradus::detail
namespace gradus::datasets {
GRADUS_INLINE FashionMnist fashion_mnist(const std::string& dir) {
  namespace fs = std::filesystem;
  const char* hint = "; install it with `apt-get install dataset-fashion-mnist` or pass the directory that holds it";
  std::error_code ec;
  GRADUS_CHECK(io_error, fs::is_directory(dir, ec), "fashion_mnist: no dataset directory '", dir, "'", hint);
  auto file = [&](const char* name) {
    std::string p = (fs::path(dir) / name).string();
    GRADUS_CHECK(io_error, fs::exists(p, ec), "fashion_mnist: missing file '", p, "'", hint);
    return p;
  };
  const std::string train_x = file("train-images-idx3-ubyte.gz"), train_y = file("train-labels-idx1-ubyte.gz");
  const std::string test_x = file("t10k-images-idx3-ubyte.gz"), test_y = file("t10k-labels-idx1-ubyte.gz");

  FashionMnist d{data::read_idx_images(train_x), data::read_idx_labels(train_y), data::read_idx_images(test_x),
                 data::read_idx_labels(test_y)};
  detail::fashion_mnist_check_pair(d.train_images, d.train_labels, train_x, train_y);
  detail::fashion_mnist_check_pair(d.test_images, d.test_labels, test_x, test_y);
  return d;
}
}  // namespace gradus::datasets
#endif  // GRADUS_DEFINE_COMPILED
