// benchmarks/compile_time/eigen_mlp.cpp — the yardstick of scripts/compile-time: a program of the
// same length as the gradus ones it measures, written with Eigen alone. A 784-128-10 ReLU MLP,
// softmax cross-entropy, forward and backward by hand, plain SGD on random data shaped like
// Fashion-MNIST, weights saved as raw floats. Not built by CMake: scripts/compile-time compiles it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include <Eigen/Core>

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::RowVectorXf;

struct Dense {
  Matrix w;
  Vector b;
  Matrix x, gw;
  Vector gb;
  Dense(int in, int out, std::mt19937& gen) : w(in, out), b(Vector::Zero(out)) {
    std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / float(in)));
    for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = normal(gen);
  }
  Matrix forward(const Matrix& in) {
    x = in;
    return (x * w).rowwise() + b;
  }
  Matrix backward(const Matrix& g) {
    gw = x.transpose() * g;
    gb = g.colwise().sum();
    return g * w.transpose();
  }
  void step(float lr) {
    w -= lr * gw;
    b -= lr * gb;
  }
};

int main() {
  std::mt19937 gen(42);
  const int n = 1024, batch = 128;
  Matrix images = Matrix::Random(n, 784).array().abs();
  std::vector<int> labels(n);
  for (int& y : labels) y = int(gen() % 10);

  Dense hidden(784, 128, gen), output(128, 10, gen);
  for (int epoch = 0; epoch < 2; ++epoch) {
    double total = 0;
    for (int first = 0; first + batch <= n; first += batch) {
      const Matrix x = images.middleRows(first, batch);
      const Matrix h = hidden.forward(x).cwiseMax(0.0f);
      Matrix logits = output.forward(h);
      // softmax cross-entropy and its gradient
      const Eigen::VectorXf max = logits.rowwise().maxCoeff();
      Matrix p = (logits.colwise() - max).array().exp();
      const Eigen::VectorXf sums = p.rowwise().sum();
      for (int i = 0; i < batch; ++i) {
        p.row(i) /= sums(i);
        total -= std::log(p(i, labels[first + i]));
        p(i, labels[first + i]) -= 1.0f;
      }
      p /= float(batch);
      const Matrix gh = output.backward(p).cwiseProduct((h.array() > 0.0f).cast<float>().matrix());
      hidden.backward(gh);
      hidden.step(0.1f);
      output.step(0.1f);
    }
    std::printf("epoch %d: mean loss %.4f\n", epoch + 1, total / double(n));
  }
  std::ofstream out("eigen_mlp.weights", std::ios::binary);
  for (const Dense* d : {&hidden, &output}) {
    out.write(reinterpret_cast<const char*>(d->w.data()), std::streamsize(d->w.size() * sizeof(float)));
    out.write(reinterpret_cast<const char*>(d->b.data()), std::streamsize(d->b.size() * sizeof(float)));
  }
  return out ? 0 : 1;
}
