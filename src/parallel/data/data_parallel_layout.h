// Where every parameter lives in the flat, contiguous buffers shared by data-parallel gradient reduction and the
// optimizer (Megatron-Core's ParamAndGradBuffer layout). Parameters are laid out in *reverse* order of the ParamList,
// because backward produces gradients roughly last-to-first: a bucket's gradients then become ready together and its
// reduction can start while backward continues. Buckets are contiguous ranges of whole parameters of at least
// `bucket_numel` elements (the last one may be smaller); under ZeRO-1 each bucket is padded to a multiple of the
// data-parallel size so it can be reduce-scattered into equal shards, one per DP rank.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/param_info.h"

namespace megaton::parallel {

/// One parameter's place in the flat buffer.
struct ParamSlot {
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
  int bucket = 0;
};

/// A contiguous range of the flat buffer reduced as one unit.
struct Bucket {
  int64_t start = 0;
  int64_t numel = 0;           // padded: a multiple of the pad multiple
  std::vector<size_t> params;  // indices into the ParamList, in buffer order
  bool has_tied_embedding = false;
};

/// A contiguous piece of one parameter: elements [param_offset, param_offset + numel) of the flattened parameter sit at
/// `buffer_offset` of some flat buffer (the full buffer, or a ZeRO shard of it).
struct ParamPiece {
  size_t param = 0;
  int64_t param_offset = 0;
  int64_t buffer_offset = 0;
  int64_t numel = 0;
};

class BufferLayout {
 public:
  /// bucket_numel <= 0: one bucket holding every parameter. pad_multiple >= 1 (the DP size under ZeRO-1, else 1).
  BufferLayout(const ParamList& params, int64_t bucket_numel, int pad_multiple);

  int64_t numel() const { return numel_; }  // total, padding included
  int pad_multiple() const { return pad_multiple_; }
  const std::vector<ParamSlot>& slots() const { return slots_; }  // indexed like the ParamList
  const std::vector<Bucket>& buckets() const { return buckets_; }

  /// The shard of DP rank `rank` of `size`: bucket b contributes [start + rank*n/size, start + (rank+1)*n/size).
  /// Shard buffers concatenate those ranges bucket by bucket; shard_bucket_offset(b) is where bucket b's range begins.
  int64_t shard_numel(int size) const { return numel_ / size; }
  int64_t shard_bucket_offset(int b, int size) const { return buckets_[b].start / size; }
  /// Pieces of every parameter that fall into `rank`'s shard, with buffer_offset relative to the shard buffer.
  /// size == 1 gives every parameter whole, at its slot offset.
  std::vector<ParamPiece> shard_pieces(int rank, int size) const;

 private:
  int64_t numel_ = 0;
  int pad_multiple_ = 1;
  std::vector<ParamSlot> slots_;
  std::vector<Bucket> buckets_;
};

}  // namespace megaton::parallel
