#include "ops/fp8/fp8_scaling.h"

#include <cmath>

#include "core/error.h"

namespace megaton::ops::fp8 {

void Fp8Options::validate() const {
  MEGATON_CHECK(format.empty() || format == "e4m3" || format == "hybrid", UsageError, "--fp8-format: '", format,
                "' is not one of e4m3, hybrid");
  MEGATON_CHECK(
      recipe == "delayed" || recipe == "tensorwise", UsageError, "--fp8-recipe: '", recipe,
      "' is not one of delayed, tensorwise (mxfp8 needs Blackwell; blockwise and custom are not implemented)");
  MEGATON_CHECK(amax_compute_algo == "most_recent" || amax_compute_algo == "max", UsageError,
                "--fp8-amax-compute-algo: '", amax_compute_algo, "' is not one of most_recent, max");
  MEGATON_CHECK(amax_history_len >= 1, UsageError, "--fp8-amax-history-len must be at least 1, got ", amax_history_len);
  MEGATON_CHECK(margin >= 0, UsageError, "--fp8-margin must be >= 0, got ", margin);
}

namespace {

// The largest value a scaled tensor may reach: the format's maximum / 2^margin.
float scaled_max_of(Format f, int margin) {
  return format_max(f) * std::exp2(-static_cast<float>(margin));
}

// scaled_max / amax where amax is finite and > 0, else fallback; elementwise, fp32.
torch::Tensor scale_from_amax(const torch::Tensor& amax, const torch::Tensor& scaled_max,
                              const torch::Tensor& fallback) {
  return torch::where(torch::isfinite(amax) & (amax > 0), scaled_max / amax, fallback);
}

}  // namespace

float scale_for_amax(float amax, Format f, int margin, float fallback) {
  if (!std::isfinite(amax) || amax <= 0.0f) return fallback;
  return scaled_max_of(f, margin) / amax;
}

ScalingTable::ScalingTable(Fp8Options options, torch::Device device) : options_(std::move(options)), device_(device) {
  options_.validate();
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  amax_history_ = torch::zeros({options_.amax_history_len, 0}, fp32);
  scale_ = torch::ones({0}, fp32);
  scale_inv_ = torch::ones({0}, fp32);
  scaled_max_ = torch::ones({0}, fp32);
}

int ScalingTable::slot(const std::string& name, Format format) {
  const auto it = index_.find(name);
  if (it != index_.end()) {
    MEGATON_ASSERT(formats_[static_cast<size_t>(it->second)] == format, "FP8 slot '", name, "' registered as ",
                   format_name(formats_[static_cast<size_t>(it->second)]), " and asked for as ", format_name(format));
    return it->second;
  }
  const int k = num_slots();
  index_.emplace(name, k);
  names_.push_back(name);
  formats_.push_back(format);
  grow(k + 1);
  return k;
}

void ScalingTable::grow(int n) {
  torch::NoGradGuard no_grad;
  const int old = static_cast<int>(scale_.numel());
  const auto fp32 = scale_.options();
  torch::Tensor h = torch::zeros({options_.amax_history_len, n}, fp32);
  h.narrow(1, 0, old).copy_(amax_history_);
  torch::Tensor s = torch::ones({n}, fp32), si = torch::ones({n}, fp32), m = torch::empty({n}, fp32);
  s.narrow(0, 0, old).copy_(scale_);
  si.narrow(0, 0, old).copy_(scale_inv_);
  std::vector<float> maxima;
  for (const Format f : formats_) maxima.push_back(scaled_max_of(f, options_.margin));
  m.copy_(torch::tensor(maxima, torch::kFloat32));
  amax_history_ = h;
  scale_ = s;
  scale_inv_ = si;
  scaled_max_ = m;
}

torch::Tensor ScalingTable::scale_for(int slot, const torch::Tensor& amax) const {
  return scale_from_amax(amax, scaled_max_.narrow(0, slot, 1), torch::ones_like(amax));
}

void ScalingTable::record_amax(int slot, const torch::Tensor& amax) {
  torch::NoGradGuard no_grad;
  torch::Tensor cell = amax_history_[0].narrow(0, slot, 1);  // [1]
  cell.copy_(torch::maximum(cell, amax.reshape({1}).to(cell.options())));
}

void ScalingTable::update() {
  torch::NoGradGuard no_grad;
  if (num_slots() == 0) return;
  torch::Tensor& h = amax_history_;  // [L, n]
  const int64_t L = h.size(0);
  const torch::Tensor amax = options_.amax_compute_algo == "max" ? std::get<0>(h.max(0)) : h[0].clone();  // [n]
  scale_.copy_(scale_from_amax(amax, scaled_max_, scale_));
  scale_inv_.copy_(scale_.reciprocal());
  if (L > 1) {
    const torch::Tensor newest = h[0].clone();
    if (L > 2) h.narrow(0, 1, L - 2).copy_(h.narrow(0, 2, L - 2).clone());
    h[L - 1].copy_(newest);
  }
  h[0].zero_();
}

std::unordered_map<std::string, torch::Tensor> ScalingTable::state() const {
  return {{"amax_history", amax_history_.clone()}, {"scale", scale_.clone()}, {"scale_inv", scale_inv_.clone()}};
}

void ScalingTable::load_state(const std::vector<std::string>& names,
                              const std::unordered_map<std::string, torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  for (const char* key : {"amax_history", "scale", "scale_inv"})
    MEGATON_CHECK(state.count(key) > 0, CheckpointError, "FP8 scaling state: no '", key, "'");
  const torch::Tensor& h = state.at("amax_history");
  const torch::Tensor& s = state.at("scale");
  const torch::Tensor& si = state.at("scale_inv");
  const int64_t n = static_cast<int64_t>(names.size());
  MEGATON_CHECK(h.dim() == 2 && h.size(1) == n && s.numel() == n && si.numel() == n, CheckpointError,
                "FP8 scaling state: ", n, " slot names but amax_history ", h.sizes(), ", scale ", s.sizes(),
                ", scale_inv ", si.sizes());
  std::unordered_map<std::string, int64_t> saved;
  for (int64_t j = 0; j < n; ++j) saved.emplace(names[static_cast<size_t>(j)], j);
  std::vector<int64_t> order;  // order[k]: the saved column of this table's slot k
  for (const auto& name : names_) {
    const auto it = saved.find(name);
    MEGATON_CHECK(it != saved.end(), CheckpointError, "FP8 scaling state: the checkpoint has no tensor '", name, "'");
    order.push_back(it->second);
  }
  const torch::Tensor idx = torch::tensor(order, torch::kInt64);
  const torch::Tensor cols = h.to(torch::kCPU, torch::kFloat32).index_select(1, idx);  // [L', n] in this order
  const int64_t L = amax_history_.size(0), Ls = cols.size(0), k = num_slots();
  torch::Tensor hist = torch::zeros({L, k}, torch::kFloat32);
  // Row 0 is the iteration in progress; rows 1.. run oldest to newest, so the newest rows are the last ones.
  hist[0].copy_(cols[0]);
  const int64_t keep = std::min(L, Ls) - 1;
  if (keep > 0) hist.narrow(0, L - keep, keep).copy_(cols.narrow(0, Ls - keep, keep));
  amax_history_.copy_(hist);
  scale_.copy_(s.to(torch::kCPU, torch::kFloat32).reshape({-1}).index_select(0, idx));
  scale_inv_.copy_(si.to(torch::kCPU, torch::kFloat32).reshape({-1}).index_select(0, idx));
}

nlohmann::json ScalingTable::to_json() const {
  const torch::Tensor h = amax_history_.to(torch::kCPU).contiguous(), s = scale_.to(torch::kCPU);
  nlohmann::json out = nlohmann::json::object();
  for (int k = 0; k < num_slots(); ++k) {
    const torch::Tensor col = h.select(1, k).contiguous();
    const float* p = col.data_ptr<float>();
    out[names_[static_cast<size_t>(k)]] = {{"scale", s[k].item<float>()},
                                           {"amax_history", std::vector<float>(p, p + col.numel())}};
  }
  return out;
}

void ScalingTable::load_json(const nlohmann::json& j) {
  MEGATON_CHECK(j.is_object(), CheckpointError, "FP8 scaling state: expected an object of slots, got ", j.type_name());
  std::vector<std::string> names;
  std::vector<float> scales;
  std::vector<std::vector<float>> rows;  // [slot][row]
  int64_t length = -1;
  try {
    for (const auto& [name, slot] : j.items()) {
      names.push_back(name);
      scales.push_back(slot.at("scale").get<float>());
      rows.push_back(slot.at("amax_history").get<std::vector<float>>());
      MEGATON_CHECK(!rows.back().empty() && (length < 0 || int64_t(rows.back().size()) == length), CheckpointError,
                    "FP8 scaling state: slot '", name, "' has an amax history of ", rows.back().size(),
                    " rows, the others ", length);
      length = static_cast<int64_t>(rows.back().size());
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(str("FP8 scaling state: a slot is malformed (", e.what(), ")"));
  }
  const int64_t n = static_cast<int64_t>(names.size());
  const int64_t L = std::max<int64_t>(length, 1);
  std::vector<float> flat(static_cast<size_t>(L * n), 0.0f);  // [L, n] row-major
  for (int64_t c = 0; c < n; ++c)
    for (int64_t r = 0; r < length; ++r)
      flat[static_cast<size_t>(r * n + c)] = rows[static_cast<size_t>(c)][static_cast<size_t>(r)];
  const torch::Tensor h = torch::from_blob(flat.data(), {L, n}, torch::kFloat32).clone();
  const torch::Tensor s = torch::tensor(scales, torch::kFloat32);
  load_state(names, {{"amax_history", h}, {"scale", s}, {"scale_inv", s.reciprocal()}});
}

}  // namespace megaton::ops::fp8
