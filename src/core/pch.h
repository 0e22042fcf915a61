// Precompiled header for every translation unit of megaton_core and its users: LibTorch dominates compile time.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
