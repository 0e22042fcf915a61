// Precompiled header of every layer (compiled once, for megaton_core, and reused): LibTorch dominates compile time.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
