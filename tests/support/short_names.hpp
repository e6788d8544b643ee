// The short names the tests give the namespaces they use: gd, nn, io and fs.
#pragma once
#include <filesystem>

namespace gradus::io {}
namespace gradus::nn {}

namespace gd = gradus;
namespace io = gradus::io;
namespace nn = gradus::nn;
namespace fs = std::filesystem;
