// Checksums of stored tensors: the standard CRC-32 (zlib's crc32) of the tensor's little-endian bytes in row-major
// order of the global, canonical layout, so `inspect` verifies a dataset with one sequential pass.
//
// In a parallel save or load no rank holds the whole tensor. CRC-32 is linear: for consecutive runs R1..Rk,
//   crc(R1 || ... || Rk) = XOR_i  shift(crc(Ri), bytes after Ri)        (shift = zlib's crc32_combine(c, 0, n))
// so each rank computes the XOR of its own runs' shifted CRCs (crc_partial) and the ranks' partials are XOR-ed
// together: the result does not depend on how the tensor was split, which is what lets a checkpoint saved at one
// layout be verified at another.
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/placement.h"

namespace megaton::checkpoint {

/// CRC-32 of `n` bytes.
uint32_t crc32_bytes(const void* data, int64_t n, uint32_t crc = 0);

/// The partial checksum of the hyperslab `box` of a dataset of `dataset_shape` with `elem_size`-byte elements, whose
/// bytes are `data` (box-shaped, contiguous, row-major). XOR of the partials of a tiling of the dataset = its CRC-32.
uint32_t crc32_partial(const void* data, const std::vector<int64_t>& dataset_shape, const Box& box, int64_t elem_size);

}  // namespace megaton::checkpoint
