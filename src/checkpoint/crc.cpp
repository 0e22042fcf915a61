#include "checkpoint/crc.h"

#include <ATen/Parallel.h>
#include <zlib.h>
#ifdef MEGATON_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include <limits>

#include "core/error.h"

namespace megaton::checkpoint {

namespace {

// zlib's CRC-32 of p[0, n) continued from c; ISA-L's crc32_gzip_refl computes the same CRC (same polynomial,
// reflection and conditioning) with carry-less multiplies where the build has it.
uint32_t crc32_serial(const Bytef* p, int64_t n, uLong c) {
#ifdef MEGATON_HAVE_ISAL
  return crc32_gzip_refl(static_cast<uint32_t>(c), p, static_cast<uint64_t>(n));
#else
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<int64_t>(n, std::numeric_limits<uInt>::max() / 2));
    c = crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
#endif
}

constexpr int64_t kChunk = int64_t{4} << 20;  // bytes per task of a parallel CRC

}  // namespace

uint32_t crc32_bytes(const void* data, int64_t n, uint32_t crc) {
  auto* p = static_cast<const Bytef*>(data);
  if (n < 4 * kChunk || at::get_num_threads() < 2) return crc32_serial(p, n, crc);
  // zlib's crc32 runs at about 1-2 GB/s per core, ISA-L's at 5-10: large buffers are cut into chunks checksummed on
  // the intra-op threads, then joined in order with crc32_combine (crc(A || B) from crc(A), crc(B) and |B|).
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<uLong> part(static_cast<size_t>(chunks));
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      part[static_cast<size_t>(i)] = crc32_serial(p + i * kChunk, std::min(kChunk, n - i * kChunk), 0);
  });
  uLong c = crc;
  for (int64_t i = 0; i < chunks; ++i)
    c = crc32_combine(c, part[static_cast<size_t>(i)], static_cast<z_off_t>(std::min(kChunk, n - i * kChunk)));
  return static_cast<uint32_t>(c);
}

uint32_t crc32_partial(const void* data, const std::vector<int64_t>& dataset_shape, const Box& box, int64_t elem_size) {
  const int nd = static_cast<int>(dataset_shape.size());
  int64_t total = elem_size;
  for (int64_t d : dataset_shape) total *= d;
  if (box.empty()) return 0;
  if (nd == 0) return crc32_bytes(data, elem_size);
  // k: the first dimension from which the box is contiguous in the dataset (all later dims are full).
  int k = nd - 1;
  while (k > 0 && box.count[k] == dataset_shape[k]) --k;
  // Elements per step of dim j in the dataset: stride[j].
  std::vector<int64_t> stride(nd, 1);
  for (int j = nd - 2; j >= 0; --j) stride[j] = stride[j + 1] * dataset_shape[j + 1];
  const int64_t run_bytes = box.count[k] * stride[k] * elem_size;
  // Iterate over all index tuples of dims [0, k) inside the box.
  std::vector<int64_t> idx(k, 0);
  auto* p = static_cast<const unsigned char*>(data);
  uint32_t partial = 0;
  while (true) {
    int64_t start = box.offset[k] * stride[k];
    for (int j = 0; j < k; ++j) start += (box.offset[j] + idx[j]) * stride[j];
    const int64_t start_bytes = start * elem_size;
    const uint32_t c = crc32_bytes(p, run_bytes);
    partial ^= static_cast<uint32_t>(crc32_combine64(c, 0, total - start_bytes - run_bytes));
    p += run_bytes;
    int j = k - 1;
    while (j >= 0 && ++idx[j] == box.count[j]) idx[j--] = 0;
    if (j < 0) break;
  }
  return partial;
}

}  // namespace megaton::checkpoint
