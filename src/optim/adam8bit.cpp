#include "optim/adam8bit.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/dynamic_map.h"

namespace megaton::optim {

BlockwiseAdam8bit::BlockwiseAdam8bit(const std::vector<parallel::ParamPiece>& pieces, const parallel::ParamList& params,
                                     int64_t shard_numel, const torch::TensorOptions& options)
    : shard_numel_(shard_numel) {
  std::vector<int64_t> lens;
  std::vector<bool> decay;
  std::vector<parallel::ParamPiece> fp32_pieces;
  for (const auto& piece : pieces) {
    const auto& p = params.at(piece.param);
    MEGATON_ASSERT(piece.buffer_offset >= 0 && piece.buffer_offset + piece.numel <= shard_numel,
                   "shard piece outside the shard");
    if (p.fp32_optimizer_state || p.param.numel() < kMin8bitSize) {
      fp32_pieces.push_back(piece);
      continue;
    }
    // Blocks count from the parameter's first element; the piece may start or end inside one.
    for (int64_t at = piece.param_offset; at < piece.param_offset + piece.numel;) {
      const int64_t block_end = std::min((at / kBlock + 1) * kBlock, piece.param_offset + piece.numel);
      block_start_host_.push_back(piece.buffer_offset + (at - piece.param_offset));
      lens.push_back(block_end - at);
      decay.push_back(!p.no_weight_decay);
      at = block_end;
    }
    quantized_numel_ += piece.numel;
  }
  const auto dev = options.device();
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  const auto B = static_cast<int64_t>(block_start_host_.size());
  block_start_ = torch::tensor(block_start_host_, i64).to(dev);
  block_len_ = torch::tensor(lens, i64).to(dev);
  std::vector<uint8_t> decay_bytes(decay.begin(), decay.end());
  block_decay_ = torch::tensor(decay_bytes, torch::kUInt8).to(torch::kBool).to(dev);
  lanes_ = torch::arange(kBlock, i64.device(dev));
  for (int k = 0; k < 2; ++k) {
    map_[k] = dynamic_map_tensor(/*is_signed=*/k == 0, dev);
    // Zero moments: the code of 0 (bitsandbytes starts from all-zero codes and absmax 0, which read back as 0 too).
    const int64_t zero_code = k == 0 ? 127 : 0;
    MEGATON_ASSERT(dynamic_map(k == 0)[zero_code] == 0.0f, "the dynamic map's zero moved");
    codes_[k] = torch::full({B, kBlock}, zero_code, options.dtype(torch::kUInt8));
    absmax_[k] = torch::zeros({B}, options.dtype(torch::kFloat32));
  }
  auto keep_all = [](const parallel::ParamInfo&) { return true; };
  fp32_runs_ = merge_runs(fp32_pieces, params, keep_all);
  fp32_decay_runs_ = merge_runs(fp32_pieces, params, [](const parallel::ParamInfo& p) { return !p.no_weight_decay; });
  int64_t n32 = 0;
  for (const auto& r : fp32_runs_) n32 += r.numel;
  for (auto& t : fp32_) t = torch::zeros({n32}, options.dtype(torch::kFloat32));
}

int64_t BlockwiseAdam8bit::state_bytes() const {
  return 2 * (codes_[0].numel() + 4 * absmax_[0].numel() + 4 * fp32_[0].numel());
}

BlockwiseAdam8bit::Chunk BlockwiseAdam8bit::chunk(int64_t first) const {
  Chunk c;
  c.first = first;
  c.count = std::min(kChunkBlocks, num_blocks() - first);
  const torch::Tensor start = block_start_.narrow(0, first, c.count).unsqueeze(1);  // [b, 1]
  const torch::Tensor len = block_len_.narrow(0, first, c.count).unsqueeze(1);      // [b, 1]
  c.valid = lanes_.unsqueeze(0) < len;                                              // [b, kBlock]
  c.index = torch::where(c.valid, start + lanes_.unsqueeze(0), 0);                  // [b, kBlock]
  return c;
}

torch::Tensor BlockwiseAdam8bit::block_moments(int which, const Chunk& c) const {
  const torch::Tensor codes = codes_[which].narrow(0, c.first, c.count).reshape({-1}).to(torch::kInt64);
  return map_[which].index_select(0, codes).view_as(c.index) * absmax_[which].narrow(0, c.first, c.count).unsqueeze(1);
}

std::vector<torch::Tensor> BlockwiseAdam8bit::fp32_views(int which) const {
  std::vector<torch::Tensor> v;
  int64_t at = 0;
  for (const auto& r : fp32_runs_) {
    v.push_back(fp32_[which].narrow(0, at, r.numel));
    at += r.numel;
  }
  return v;
}

void BlockwiseAdam8bit::step_fp32(const torch::Tensor& master, const torch::Tensor& grad, const AdamScalars& s) {
  if (fp32_runs_.empty()) return;
  // bitsandbytes' 32-bit kernel in fp32 scalars, one rounding per operation (no fused multiply-adds), as step().
  const auto& h = s.hyper;
  const auto b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const float c2 = std::sqrt(static_cast<float>(h.bias_correction2));
  const float step_size = static_cast<float>(-h.lr) * c2 / static_cast<float>(h.bias_correction1);
  std::vector<torch::Tensor> m = fp32_views(0), v = fp32_views(1);
  const std::vector<torch::Tensor> g = run_views(grad, fp32_runs_), p = run_views(master, fp32_runs_);
  torch::_foreach_mul_(m, b1);
  torch::_foreach_add_(m, torch::_foreach_mul(g, 1.0f - b1));
  torch::_foreach_mul_(v, b2);
  torch::_foreach_add_(v, torch::_foreach_mul(torch::_foreach_mul(g, g), 1.0f - b2));
  std::vector<torch::Tensor> denom = torch::_foreach_sqrt(v);
  torch::_foreach_add_(denom, c2 * static_cast<float>(h.eps));
  torch::_foreach_add_(p, torch::_foreach_mul(torch::_foreach_div(m, denom), step_size));
  if (h.weight_decay > 0 && !fp32_decay_runs_.empty())
    torch::_foreach_mul_(run_views(master, fp32_decay_runs_),
                         1.0f - static_cast<float>(h.lr) * static_cast<float>(h.weight_decay));
}

void BlockwiseAdam8bit::step(const torch::Tensor& master, const torch::Tensor& grad, const AdamScalars& s) {
  MEGATON_ASSERT(!s.device_grad_scale.defined(), "the 8-bit Adam takes gradients already clipped");
  torch::NoGradGuard no_grad;
#ifdef MEGATON_HAVE_CUDA
  if (master.is_cuda())
    step_quantized_cuda(master, grad, s);
  else
#endif
    step_quantized_aten(master, grad, s);
  step_fp32(master, grad, s);
}

void BlockwiseAdam8bit::step_quantized_aten(const torch::Tensor& master, const torch::Tensor& grad,
                                            const AdamScalars& s) {
  const auto& h = s.hyper;
  const float c2 = std::sqrt(static_cast<float>(h.bias_correction2));
  const float step_size = static_cast<float>(-h.lr) * c2 / static_cast<float>(h.bias_correction1);
  const auto b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2);
  const float decay_factor = 1.0f - static_cast<float>(h.lr) * static_cast<float>(h.weight_decay);
  for (int64_t first = 0; first < num_blocks(); first += kChunkBlocks) {
    const Chunk c = chunk(first);
    const torch::Tensor flat_index = c.index.reshape({-1});
    const torch::Tensor g = grad.index_select(0, flat_index).view_as(c.index).masked_fill(~c.valid, 0.0f);
    torch::Tensor p = master.index_select(0, flat_index).view_as(c.index);  // [b, kBlock]
    torch::Tensor st[2] = {block_moments(0, c), block_moments(1, c)};
    // One rounding per operation (no fused multiply-adds), in fp32 scalars, as bitsandbytes' kernel computes.
    st[0] = (st[0] * b1 + g * (1.0f - b1)).masked_fill(~c.valid, 0.0f);
    st[1] = (st[1] * b2 + g * g * (1.0f - b2)).masked_fill(~c.valid, 0.0f);
    const torch::Tensor absmax1 = st[0].abs().amax(1), absmax2 = st[1].amax(1);  // [b]
    p = p + (st[0] / (st[1].sqrt() + c2 * static_cast<float>(h.eps))) * step_size;
    if (h.weight_decay > 0) p = torch::where(block_decay_.narrow(0, first, c.count).unsqueeze(1), p * decay_factor, p);
    master.index_copy_(0, c.index.masked_select(c.valid), p.masked_select(c.valid));
    absmax_[0].narrow(0, first, c.count).copy_(absmax1);
    absmax_[1].narrow(0, first, c.count).copy_(absmax2);
    codes_[0].narrow(0, first, c.count).copy_(quantize_codes(map_[0], st[0] / absmax1.unsqueeze(1), true));
    codes_[1].narrow(0, first, c.count).copy_(quantize_codes(map_[1], st[1] / absmax2.unsqueeze(1), false));
  }
}

torch::Tensor BlockwiseAdam8bit::dequantized(int which) const {
  torch::NoGradGuard no_grad;
  torch::Tensor out = torch::zeros({shard_numel_}, absmax_[0].options());  // [S]
  for (int64_t first = 0; first < num_blocks(); first += kChunkBlocks) {
    const Chunk c = chunk(first);
    out.index_copy_(0, c.index.masked_select(c.valid), block_moments(which, c).masked_select(c.valid));
  }
  const std::vector<torch::Tensor> src = fp32_views(which);
  std::vector<torch::Tensor> dst = run_views(out, fp32_runs_);
  for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(src[i]);
  return out;
}

void BlockwiseAdam8bit::load(const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq) {
  torch::NoGradGuard no_grad;
  const torch::Tensor* values[2] = {&exp_avg, &exp_avg_sq};
  for (int k = 0; k < 2; ++k) {
    const torch::Tensor& src = *values[k];
    for (int64_t first = 0; first < num_blocks(); first += kChunkBlocks) {
      const Chunk c = chunk(first);
      const torch::Tensor v = src.index_select(0, c.index.reshape({-1})).view_as(c.index).masked_fill(~c.valid, 0.0f);
      const torch::Tensor largest = v.abs().amax(1);  // [b]
      // Candidate absmax values: the largest magnitude (its code is 1.0); for exp_avg also the largest magnitude over
      // |map[0]| (the block's extreme was negative) and that value's fp32 neighbours.
      const auto candidates = [&]() -> std::vector<torch::Tensor> {
        if (k != 0) return {largest};
        const torch::Tensor a = largest / map_[0][0].abs();
        return {largest, a, torch::nextafter(a, torch::full_like(a, INFINITY)),
                torch::nextafter(a, torch::zeros_like(a))};
      }();
      // The first candidate is also the fallback: where none reproduces the values, they are quantized once.
      torch::Tensor chosen_abs, chosen_codes, done;
      for (const torch::Tensor& a : candidates) {
        const torch::Tensor codes = quantize_codes(map_[k], v / a.unsqueeze(1), k == 0);
        const torch::Tensor back = map_[k].index_select(0, codes.reshape({-1})).view_as(v) * a.unsqueeze(1);
        const torch::Tensor exact = ((back == v) | ~c.valid).all(1);  // [b]
        if (!done.defined()) {
          chosen_abs = a, chosen_codes = codes, done = exact;
          continue;
        }
        const torch::Tensor take = exact & ~done;
        chosen_abs = torch::where(take, a, chosen_abs);
        chosen_codes = torch::where(take.unsqueeze(1), codes, chosen_codes);
        done = done | take;
      }
      absmax_[k].narrow(0, first, c.count).copy_(chosen_abs);
      codes_[k].narrow(0, first, c.count).copy_(chosen_codes);
    }
    std::vector<torch::Tensor> dst = fp32_views(k);
    const std::vector<torch::Tensor> from = run_views(src, fp32_runs_);
    for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(from[i]);
  }
}

}  // namespace megaton::optim
