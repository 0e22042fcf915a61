// The element types Megaton's kernels read and write, named without torch or CUDA headers so that host code on both
// sides of the kernels/ boundary can pass them.
#pragma once

namespace megaton::kernels {

enum class FloatType { kFloat32, kBFloat16, kFloat16 };

}  // namespace megaton::kernels
