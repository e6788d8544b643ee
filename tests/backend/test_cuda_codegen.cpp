// CUDA source generated from expression types, checked without a GPU:
// - the one-element type the generated kernels compute with (backend/cuda/element.hpp) gives
//   what Eigen gives, op by op, forward and gradient, at sample points of each op's domain;
// - the forward and backward kernels of every elementwise op, and of fused chains with numbers,
//   parameters, comparisons, `where` and repeated leaves, compile with NVRTC for sm_80 and sm_90,
//   in float and double;
// - the generated source of two small expressions is exactly what is written below;
// - a kernel is compiled once: memory cache, disk cache, corrupt disk entries rejected.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <gradus/backend/cuda/codegen.hpp>
#include <gradus/backend/cuda/kernel_cache.hpp>
#include <gradus/backend/cuda/element.hpp>
#include <gradus/gradus.hpp>

namespace gd = gradus;
namespace cu = gradus::backend::cuda;

namespace {

using Arr = Eigen::Array<double, 1, 1>;

double eigen_value(const auto& e) { return Arr(e)(0); }
Arr arr(double x) { return Arr::Constant(x); }
cu::Element<double> el(double x) { return {x}; }

/// An op struct with parameters set away from their defaults, so both code paths see them.
template <class Op>
Op sample_op() {
  if constexpr (std::is_same_v<Op, gd::ops::LeakyRelu> || std::is_same_v<Op, gd::ops::Elu>) return Op(0.3);
  else if constexpr (std::is_same_v<Op, gd::ops::Clamp>) return Op(-0.5, 1.25);
  else if constexpr (std::is_same_v<Op, gd::ops::PowScalar>) return Op(2.5);
  else return Op{};
}

std::vector<double> points(gd::ops::Domain d) {
  std::vector<double> p;
  for (int i = 0; i <= 16; ++i) p.push_back(d.lo + (d.hi - d.lo) * (i + 0.37) / 17.0);
  return p;
}

template <class Tuple, class F>
void for_each_type(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) { (f(std::tuple_element_t<I, Tuple>{}), ...); }(
      std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

}  // namespace

TEST_CASE("the kernels' element type computes every op as Eigen does", "[cuda][codegen]") {
  for_each_type<gd::ops::all_unary_ops>([](auto tag) {
    using Op = decltype(tag);
    const Op op = sample_op<Op>();
    INFO("op " << Op::name);
    for (double x : points(Op::domain)) {
      INFO("x = " << x);
      const double y = eigen_value(op.forward(arr(x)));
      CHECK(op.forward(el(x)).v == Approx(y).epsilon(1e-14).margin(1e-300));
      const double g = 0.7;
      CHECK(op.backward(el(x), el(y), el(g)).v ==
            Approx(eigen_value(op.backward(arr(x), arr(y), arr(g)))).epsilon(1e-14).margin(1e-300));
    }
  });
  for_each_type<gd::ops::all_binary_ops>([](auto tag) {
    using Op = decltype(tag);
    const Op op{};
    INFO("op " << Op::name);
    for (double x : points(Op::domain))
      for (double y : {0.6, 1.3, x}) {  // x itself: ties for minimum, maximum and the comparisons
        INFO("x = " << x << ", y = " << y);
        const double z = eigen_value(op.forward(arr(x), arr(y)));
        CHECK(op.forward(el(x), el(y)).v == Approx(z).epsilon(1e-14));
        CHECK(op.dx(el(x), el(y), el(z), el(0.7)).v ==
              Approx(eigen_value(op.dx(arr(x), arr(y), arr(z), arr(0.7)))).epsilon(1e-14));
        CHECK(op.dy(el(x), el(y), el(z), el(0.7)).v ==
              Approx(eigen_value(op.dy(arr(x), arr(y), arr(z), arr(0.7)))).epsilon(1e-14));
      }
  });
}

namespace {

/// The forward and backward kernels of several expressions, each under its own entry name, as
/// one translation unit.
struct KernelBatch {
  std::string source;
  int kernels = 0;
  template <class E>
  void add(const std::string& label) {
    for (cu::Pass pass : {cu::Pass::forward, cu::Pass::sum, cu::Pass::backward, cu::Pass::dense_forward,
                          cu::Pass::dense_sum, cu::Pass::dense_backward}) {
      const std::string entry = label + "_" + cu::pass_name(pass);
      source += cu::elementwise_source<E>(pass, entry).source + "\n";
      ++kernels;
    }
  }
};

template <class T>
KernelBatch every_op_and_chains() {
  using V = gd::Var<T>;
  using X = gd::Tensor<T>;
  KernelBatch b;
  for_each_type<gd::ops::all_unary_ops>([&](auto tag) {
    using Op = decltype(tag);
    b.add<decltype(gd::make_unary(Op{}, std::declval<V>()))>(std::string("unary_") + std::string(Op::name));
  });
  for_each_type<gd::ops::all_binary_ops>([&](auto tag) {
    using Op = decltype(tag);
    b.add<decltype(gd::make_binary(Op{}, std::declval<V>(), std::declval<X>()))>(std::string("binary_") +
                                                                                  std::string(Op::name));
  });
  // fused chains: the benchmark loss, numbers, parameters, a mask, where, a leaf used twice
  b.add<decltype(gd::exp(std::declval<V>() * std::declval<V>() + std::declval<V>()) * std::declval<V>())>("chain_loss");
  b.add<decltype(gd::softplus(std::declval<V>() * T(2) - T(1)) / (std::declval<X>() + T(3)))>("chain_numbers");
  b.add<decltype(gd::clamp(gd::leaky_relu(std::declval<V>(), 0.1), -1, 1) * (std::declval<V>() > T(0)))>("chain_mask");
  b.add<decltype(gd::where(std::declval<X>(), gd::tanh(std::declval<V>()), gd::sigmoid(std::declval<V>())))>(
      "chain_where");
  b.add<decltype(gd::square(std::declval<V>() - std::declval<X>()))>("chain_mse");
  return b;
}

}  // namespace

TEST_CASE("NVRTC compiles the generated kernels of every op and of fused chains", "[cuda][codegen][nvrtc]") {
  if (!cu::nvrtc_available()) {
    WARN("NVRTC not found, skipped: " << cu::Nvrtc::get().problem);
    return;
  }
  const auto f = every_op_and_chains<float>();
  const auto d = every_op_and_chains<double>();
  const int expected = cu::kPasses * (int(std::tuple_size_v<gd::ops::all_unary_ops>) +
                            int(std::tuple_size_v<gd::ops::all_binary_ops>) + 5);
  CHECK(f.kernels == expected);
  // The four compilations (seconds each) run at once; the checks read their results in order.
  std::vector<std::future<std::string>> ptxs;
  for (const char* arch : {"compute_80", "compute_90"})
    for (const auto* batch : {&f, &d})
      ptxs.push_back(std::async(std::launch::async, [arch, batch, &f] {
        cu::KernelSource k;
        k.source = batch->source;
        k.name = batch == &f ? "every_op_float.cu" : "every_op_double.cu";
        return cu::compile_kernel(k, arch);
      }));
  auto next = ptxs.begin();
  for (const char* arch : {"compute_80", "compute_90"}) {
    for (const auto* batch : {&f, &d}) {
      INFO(arch << (batch == &f ? " float" : " double"));
      const std::string ptx = (next++)->get();
      size_t entries = 0;
      for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) ++entries;
      CHECK(int(entries) == batch->kernels);
      CHECK(ptx.find(".entry chain_loss_backward") != std::string::npos);
      CHECK(ptx.find(".entry chain_loss_sum") != std::string::npos);
      CHECK(ptx.find(".entry chain_loss_dense_backward") != std::string::npos);
      // no atomics: a broadcast operand's gradient is written per element and summed by sum_to,
      // so the order of every sum is fixed
      CHECK(ptx.find("atom.") == std::string::npos);
      CHECK(ptx.find("red.global") == std::string::npos);
    }
  }
}

TEST_CASE("NVRTC compiles the library kernels (fill, accumulation, reductions, dropout, softmax, one_hot, conv, pool, "
          "data movement, the LSTM gates)",
          "[cuda][codegen][nvrtc]") {
  if (!cu::nvrtc_available()) {
    WARN("NVRTC not found, skipped: " << cu::Nvrtc::get().problem);
    return;
  }
  for (const char* arch : {"compute_80", "compute_90"}) {
    INFO(arch);
    const std::string ptx = cu::compile_ptx(cu::library_source(), "gradus_library.cu", arch, cu::library_options());
    for (const char* entry : {"gradus_fill_f", "gradus_fill_d", "gradus_add_into_f", "gradus_add_into_d",
                              "gradus_finish_sum_f", "gradus_finish_sum_d", "gradus_dropout_mask_f",
                              "gradus_dropout_mask_d", "gradus_masked_multiply_f", "gradus_masked_multiply_d",
                              "gradus_softmax_f", "gradus_softmax_backward_d", "gradus_one_hot_f", "gradus_one_hot_d",
                              "gradus_bias_activation_f", "gradus_bias_activation_backward_d",
                              "gradus_im2col_f", "gradus_col2im_d", "gradus_add_rows_f", "gradus_pool_f",
                              "gradus_pool_backward_d", "gradus_fill_l", "gradus_reduce_extremum_f",
                              "gradus_reduce_extremum_backward_d", "gradus_reduce_arg_f", "gradus_reduce_prod_d",
                              "gradus_reduce_prod_backward_f", "gradus_reduce_logsumexp_f",
                              "gradus_reduce_logsumexp_backward_d", "gradus_copy_strided_f", "gradus_copy_strided_l",
                              "gradus_gather_rows_d", "gradus_gather_rows_l", "gradus_scatter_add_sorted_f",
                              "gradus_scatter_add_sorted_d", "gradus_rank_count_l", "gradus_rank_offsets_l",
                              "gradus_rank_move_l", "gradus_cast_to_l_f", "gradus_cast_to_d_l",
                              "gradus_lstm_gates_f", "gradus_lstm_gates_backward_d", "gradus_check_range_l",
                              "gradus_value_at_l", "gradus_sum_to_f", "gradus_sum_parts_d", "gradus_softmax_lines_f",
                              "gradus_softmax_lines_backward_d", "gradus_adam_update_f"})
      CHECK(ptx.find(std::string(".entry ") + entry) != std::string::npos);
    // the only atomic in the library: the integer minimum of the range check
    CHECK(ptx.find("atom.global.min.u64") != std::string::npos);
    CHECK(ptx.find("atom.global.add") == std::string::npos);
    CHECK(ptx.find("red.global") == std::string::npos);
  }
}

TEST_CASE("generated source of small expressions", "[cuda][codegen]") {
  using F = gd::Tensor<float>;
  const auto fwd = cu::elementwise_source<decltype(std::declval<F>() * std::declval<F>() + 2.f)>(cu::Pass::forward);
  CHECK(fwd.leaves == 2);
  CHECK(fwd.numbers == 1);
  CHECK(fwd.params == 0);
  CHECK(fwd.source ==
        "#include \"gradus/backend/cuda/nvrtc_prelude.hpp\"\n"
        "#include \"gradus/backend/cuda/element.hpp\"\n"
        "#include \"gradus/backend/cuda/kernel_args.hpp\"\n"
        "#include \"gradus/ops/elementwise_math.hpp\"\n"
        "\n"
        "extern \"C\" __global__ void gradus_elementwise_forward(const gradus::backend::cuda::ElementwiseArgs<float, 2, 1, 0> a) {\n"
        "  using V = gradus::backend::cuda::Element<float>;\n"
        "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < a.n; i += (long)gridDim.x * blockDim.x) {\n"
        "    const V v0{a.in[0][a.bc[0].at(i)]};\n"
        "    const V v1{a.in[1][a.bc[1].at(i)]};\n"
        "    const V v2 = gradus::ops::Mul{}.forward(v0, v1);\n"
        "    const V v3{a.s[0]};\n"
        "    const V v4 = gradus::ops::Add{}.forward(v2, v3);\n"
        "    a.out[i] = v4.v;\n"
        "  }\n"
        "}\n");

  using D = gd::Var<double>;
  const auto bwd = cu::elementwise_source<decltype(gd::elu(std::declval<D>(), 0.5) * std::declval<gd::Tensor<double>>())>(
      cu::Pass::backward);
  CHECK(bwd.leaves == 2);
  CHECK(bwd.params == 1);
  CHECK(bwd.source ==
        "#include \"gradus/backend/cuda/nvrtc_prelude.hpp\"\n"
        "#include \"gradus/backend/cuda/element.hpp\"\n"
        "#include \"gradus/backend/cuda/kernel_args.hpp\"\n"
        "#include \"gradus/ops/elementwise_math.hpp\"\n"
        "\n"
        "extern \"C\" __global__ void gradus_elementwise_backward(const gradus::backend::cuda::ElementwiseArgs<double, 2, 0, 1> a) {\n"
        "  using V = gradus::backend::cuda::Element<double>;\n"
        "  double acc = 0;\n"
        "  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < a.n; i += (long)gridDim.x * blockDim.x) {\n"
        "    const V v0{a.in[0][a.bc[0].at(i)]};\n"
        "    const V v1 = gradus::ops::Elu(a.p[0]).forward(v0);\n"
        "    const V v2{a.in[1][a.bc[1].at(i)]};\n"
        "    const V v3 = gradus::ops::Mul{}.forward(v1, v2);\n"
        "    if (a.vsum) acc += double(v3.v);\n"
        "    const V g3{a.g[a.gbc.at(i)] * a.scale};\n"
        "    const V g1 = gradus::ops::Mul{}.dx(v1, v2, v3, g3);\n"
        "    const V g0 = gradus::ops::Elu(a.p[0]).backward(v0, v1, g1);\n"
        "    if (a.grad[0]) {\n"
        "      if (a.add[0]) a.grad[0][i] += g0.v;\n"
        "      else a.grad[0][i] = g0.v;\n"
        "    }\n"
        "  }\n"
        "  if (a.vsum) gradus::backend::cuda::block_sum_store(acc, a.vsum + blockIdx.x);\n"
        "}\n");

  // the dense variant (no operand broadcasts): element i of every leaf and of the adjoint, no
  // broadcast map
  const auto dense =
      cu::elementwise_source<decltype(gd::elu(std::declval<D>(), 0.5) * std::declval<gd::Tensor<double>>())>(
          cu::Pass::dense_backward);
  CHECK(dense.entry == "gradus_elementwise_dense_backward");
  CHECK(dense.source.find("a.in[0][i]") != std::string::npos);
  CHECK(dense.source.find("a.in[1][i]") != std::string::npos);
  CHECK(dense.source.find("const V g3{a.g[i] * a.scale};") != std::string::npos);
  CHECK(dense.source.find(".at(") == std::string::npos);
  CHECK(dense.source.find("      if (a.add[0]) a.grad[0][i] += g0.v;\n      else a.grad[0][i] = g0.v;\n") !=
        std::string::npos);
  const auto dense_sum =
      cu::elementwise_source<decltype(std::declval<F>() * std::declval<F>() + 2.f)>(cu::Pass::dense_sum).source;
  CHECK(dense_sum.find("atomicAdd(a.out") == std::string::npos);
  CHECK(dense_sum.find("  gradus::backend::cuda::block_sum_store(acc, a.vsum + blockIdx.x);\n") != std::string::npos);
}

TEST_CASE("a launch takes the dense variant exactly when no operand broadcasts", "[cuda][codegen]") {
  using F = gd::Tensor<float>;
  using E = decltype(std::declval<F>() * std::declval<F>());
  const F a = F::ones({3, 4}), row = F::ones({1, 4}), same = F::ones({12}).reshape({3, 4});
  cu::args_of<E> both = cu::make_args(a * same, gd::Shape{3, 4});
  CHECK(cu::is_dense_launch(cu::Pass::forward, both));
  CHECK(cu::is_dense_launch(cu::Pass::sum, both));  // the whole sum
  cu::args_of<E> bcast = cu::make_args(a * row, gd::Shape{3, 4});
  CHECK(!cu::is_dense_launch(cu::Pass::forward, bcast));
  CHECK(!cu::is_dense_launch(cu::Pass::sum, bcast));
  // the map of an operand with the output's shape up to 1s is the identity
  const cu::Bcast id = cu::make_bcast(gd::Shape{1, 12}, gd::Shape{12});
  CHECK(id.rank == 1);
  CHECK(id.strides[0] == 1);
  CHECK(id.at(7) == 7);
  const cu::Bcast b = cu::make_bcast(gd::Shape{1, 4}, gd::Shape{3, 4});
  CHECK(b.at(5) == 1);  // row 1, column 1 of the output reads column 1
}

TEST_CASE("a Var used twice: the backward kernel stores its occurrences' adjoints in slot order", "[cuda][codegen]") {
  // The host marks the first occurrence of a Var (the lowest slot) "write" and the later ones
  // "add" to the same buffer; the reverse sweep meets them last-first, so the stores must wait
  // for the sweep's end. Storing during the sweep gave sum(v*v) the gradient v instead of 2v.
  using D = gd::Var<double>;
  const auto src = cu::elementwise_source<decltype(std::declval<D>() * std::declval<D>())>(cu::Pass::backward).source;
  const auto at = [&](const std::string& s) {
    const size_t p = src.find(s);
    INFO(s << "\n" << src);
    REQUIRE(p != std::string::npos);
    return p;
  };
  const size_t dy = at("const V g1 = gradus::ops::Mul{}.dy(v0, v1, v2, g2);");
  const size_t dx = at("const V g0 = gradus::ops::Mul{}.dx(v0, v1, v2, g2);");
  const size_t store0 = at("else a.grad[0][i] = g0.v;"), store1 = at("if (a.add[1]) a.grad[1][i] += g1.v;");
  CHECK(std::max(dx, dy) < store0);
  CHECK(store0 < store1);

  // An occurrence under a comparison gets no adjoint, yet stores its zero when it is the "write" one.
  const auto masked =
      cu::elementwise_source<decltype(gd::where(std::declval<D>() > 0.0, std::declval<D>(), 0.0))>(cu::Pass::backward)
          .source;
  INFO(masked);
  CHECK(masked.find("if (!a.add[0]) a.grad[0][i] = double(0);") != std::string::npos);
  CHECK(masked.find("else a.grad[1][i] = g") != std::string::npos);
}

TEST_CASE("generated kernels find the op headers or say where they looked", "[cuda][codegen]") {
  const std::string root = cu::include_root();
  CHECK_FALSE(root.empty());
  ::setenv("GRADUS_INCLUDE_DIR", "/nonexistent/gradus-include", 1);
  try {
    cu::include_root();
    FAIL("include_root accepted a directory without the headers");
  } catch (const gd::device_error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/gradus-include") != std::string::npos);
  }
  ::unsetenv("GRADUS_INCLUDE_DIR");
}

TEST_CASE("generated kernels are compiled once: memory, then disk, corrupt entries rejected", "[cuda][codegen][nvrtc]") {
  if (!cu::nvrtc_available()) {
    WARN("NVRTC not found, skipped: " << cu::Nvrtc::get().problem);
    return;
  }
  char dir_template[] = "/tmp/gradus-kernel-cache-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  using E = decltype(gd::exp(std::declval<gd::Var<float>>()) * std::declval<gd::Tensor<float>>());
  cu::KernelCache cache(dir);
  const std::string& first = cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache);
  CHECK(first.find(".entry gradus_elementwise_backward") != std::string::npos);
  CHECK(cache.compiles() == 1);
  CHECK(&cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache) == &first);  // the same entry
  CHECK(cache.compiles() == 1);
  const std::string ptx = first;

  cache.clear_memory();  // as a new process would start
  CHECK(cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache) == ptx);
  CHECK(cache.compiles() == 1);
  CHECK(cache.disk_hits() == 1);

  const std::string file = cache.path(cu::kernel_key<E>(cu::Pass::backward, "compute_80"));
  const auto damage = [&](auto&& edit) {
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    edit(bytes);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    cache.clear_memory();
  };
  damage([](std::string& b) { b[b.size() / 2] ^= 0x20; });  // one flipped bit in the PTX
  CHECK(cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache) == ptx);
  CHECK(cache.compiles() == 2);  // rejected, compiled again and rewritten
  damage([](std::string& b) { b.resize(b.size() - 10); });  // truncated
  CHECK(cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache) == ptx);
  CHECK(cache.compiles() == 3);
  damage([](std::string& b) { b.replace(0, 10, "garbage..."); });  // not an entry at all
  CHECK(cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache) == ptx);
  CHECK(cache.compiles() == 4);
  cache.clear_memory();
  CHECK(cu::kernel_ptx<E>(cu::Pass::backward, "compute_80", cache) == ptx);  // the rewritten entry is good
  CHECK(cache.disk_hits() == 2);

  // another pass or architecture is another kernel
  CHECK(cu::kernel_ptx<E>(cu::Pass::forward, "compute_80", cache).find(".entry gradus_elementwise_forward") !=
        std::string::npos);
  CHECK(cu::kernel_ptx<E>(cu::Pass::backward, "compute_90", cache).find(".target sm_90") != std::string::npos);
  CHECK(cache.compiles() == 6);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a kernel's cache key changes with its source and every gradus header it includes", "[cuda][codegen]") {
  char dir_template[] = "/tmp/gradus-sources-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  std::filesystem::create_directories(dir + "/gradus/sub");
  const auto write = [&](const std::string& path, const std::string& text) { std::ofstream(dir + "/" + path) << text; };
  write("gradus/a.hpp", "#include \"gradus/sub/b.hpp\"\nint a;\n");
  write("gradus/sub/b.hpp", "#include \"gradus/a.hpp\"\nint b;\n");  // a cycle is read once
  const std::string source = "#include \"gradus/a.hpp\"\n__global__ void k() {}\n";
  const uint64_t h = cu::sources_hash(source, dir);
  CHECK(cu::sources_hash(source, dir) == h);
  write("gradus/sub/b.hpp", "#include \"gradus/a.hpp\"\nint b2;\n");  // a header two levels down changes
  const uint64_t h2 = cu::sources_hash(source, dir);
  CHECK(h2 != h);
  CHECK(cu::sources_hash(source + " ", dir) != h2);  // the source itself changes
  std::filesystem::remove_all(dir);
  // the keys of generated kernels carry it: another expression type, another source
  using E = decltype(gd::exp(std::declval<gd::Tensor<float>>()));
  const auto src_part = [](const std::string& key) {
    REQUIRE(key.find("/src-") != std::string::npos);
    return key.substr(key.find("/src-"));
  };
  CHECK(src_part(cu::kernel_key<E>(cu::Pass::forward, "compute_80")) !=
        src_part(cu::kernel_key<E>(cu::Pass::backward, "compute_80")));
  CHECK(src_part(cu::kernel_key<E>(cu::Pass::forward, "compute_80")) ==
        src_part(cu::kernel_key<E>(cu::Pass::forward, "compute_90")));
}

TEST_CASE("a kernel's arguments are filled in the order the generator numbers them", "[cuda][codegen]") {
  // leaves left to right, numbers left to right, op parameters children first: what the
  // generated source reads as a.in[k], a.s[k] and a.p[k]
  const gd::Tensor<float> a = gd::Tensor<float>::ones({2, 3}), b = gd::Tensor<float>::ones({3});
  const auto e = gd::leaky_relu(a * 2.f, 0.1) + gd::clamp(b, -1.0, 1.0) * 3.f;
  using E = std::remove_cvref_t<decltype(e)>;
  const auto src = cu::elementwise_source<E>(cu::Pass::forward);
  cu::args_of<E> args;
  static_assert(std::is_same_v<decltype(args), cu::ElementwiseArgs<float, 2, 2, 3>>);
  CHECK(src.leaves == 2);
  CHECK(src.numbers == 2);
  CHECK(src.params == 3);
  int leaf = 0, number = 0, param = 0;
  cu::fill_args(e, args, e.shape(), leaf, number, param);
  CHECK((leaf == 2 && number == 2 && param == 3));
  CHECK(args.in[0] == a.device_data());
  CHECK(args.in[1] == b.device_data());
  CHECK((args.s[0] == 2.f && args.s[1] == 3.f));
  CHECK((args.p[0] == 0.1 && args.p[1] == -1.0 && args.p[2] == 1.0));
  CHECK(src.source.find("gradus::ops::LeakyRelu(a.p[0])") != std::string::npos);
  CHECK(src.source.find("gradus::ops::Clamp(a.p[1], a.p[2])") != std::string::npos);
  // the broadcast maps: a is read in order, b ([3] in [2,3]) repeats every 3 elements
  for (long i = 0; i < 6; ++i) {
    CHECK(args.bc[0].at(i) == i);
    CHECK(args.bc[1].at(i) == i % 3);
  }
  // a column [2,1] in [2,3]: each row's one element
  const cu::Bcast col = cu::make_bcast(gd::Shape{2, 1}, gd::Shape{2, 3});
  for (long i = 0; i < 6; ++i) CHECK(col.at(i) == i / 3);
  // a scalar tensor in [4,5]: always element 0
  const cu::Bcast one = cu::make_bcast(gd::Shape{}, gd::Shape{4, 5});
  for (long i = 0; i < 20; ++i) CHECK(one.at(i) == 0);
}
