// gradus/onnx.hpp — ONNX models (gd::onnx): load a .onnx file as a differentiable module.
// Link gradus::onnx, which CMake offers where Debian's ONNX (libonnx-dev) is installed.
#pragma once
#include "gradus/onnx/model.hpp"
#include "gradus/onnx/export.hpp"
