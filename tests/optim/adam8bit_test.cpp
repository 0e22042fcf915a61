// bitsandbytes' blockwise 8-bit Adam (--use-bnb-optimizer): its dynamic maps against torch-computed values, the code
// search and the step against scalar transcriptions of bitsandbytes' CUDA kernels written here (codes and moments
// bit for bit, masters to an ulp), the training it does against fp32 Adam, and checkpoint round trips (exact for its
// own state, one quantization for foreign moments).
#include "optim/adam8bit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "optim/adam8bit_test_util.h"
#include "optim/dynamic_map.h"
#include "optim/optim_test_support.h"
#include "optim/optimizer.h"
#include "parallel/data/data_parallel.h"

using namespace megaton;
using optim::BlockwiseAdam8bit;

namespace {

// quantize_2D of bitsandbytes' kernels.cu, one value at a time (with the sign rule of its 8-bit optimizers).
int quantize_scalar(const std::array<float, 256>& code, float x, bool is_signed) {
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = is_signed ? -1.0f : 0.0f, upper = 1.0f;
  float val = code[127];
  for (int i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = code[pivot];
  }
  int c;
  if (x > val)
    c = x > (upper + val) * 0.5f ? upper_pivot : pivot;
  else
    c = x < (lower + val) * 0.5f ? lower_pivot : pivot;
  if (is_signed && std::signbit(code[c]) != std::signbit(x)) c += x > 0.0f ? 1 : -1;
  return std::clamp(c, 0, 255);
}

// One parameter of the scalar reference: fp32 moments, or codes and absmax per block of 2048.
struct RefParam {
  int64_t offset, numel;
  bool decay, eight_bit;
  std::vector<float> m, v;              // fp32 moments, or unused
  std::vector<uint8_t> c1, c2;          // codes
  std::vector<float> absmax1, absmax2;  // per block
};

// bitsandbytes' kOptimizer32bit2State / kOptimizerStatic8bit2StateBlockwise (ADAM), element by element.
void reference_step(std::vector<RefParam>& ps, float* p, const float* g, const optim::AdamScalars& s) {
  const auto dyn = optim::dynamic_map(true), udyn = optim::dynamic_map(false);
  const auto& h = s.hyper;
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps, lr = h.lr, wd = h.weight_decay;
  const float c2 = std::sqrt(static_cast<float>(h.bias_correction2));
  const float step_size = -lr * c2 / static_cast<float>(h.bias_correction1);
  for (auto& q : ps) {
    if (!q.eight_bit) {
      for (int64_t i = 0; i < q.numel; ++i) {
        const float gi = g[q.offset + i];
        q.m[i] = q.m[i] * b1 + (1.0f - b1) * gi;
        q.v[i] = q.v[i] * b2 + (1.0f - b2) * (gi * gi);
        float& pi = p[q.offset + i];
        pi = pi + step_size * (q.m[i] / (std::sqrt(q.v[i]) + eps * c2));
        if (wd > 0 && q.decay) pi = pi * (1.0f - lr * wd);
      }
      continue;
    }
    for (int64_t b = 0; b * 2048 < q.numel; ++b) {
      const int64_t n = std::min<int64_t>(2048, q.numel - b * 2048);
      std::vector<float> s1(n), s2(n);
      float a1 = 0, a2 = 0;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = b * 2048 + j;
        const float gi = g[q.offset + i];
        s1[j] = dyn[q.c1[i]] * q.absmax1[b] * b1 + gi * (1.0f - b1);
        s2[j] = udyn[q.c2[i]] * q.absmax2[b] * b2 + gi * gi * (1.0f - b2);
        a1 = std::max(a1, std::fabs(s1[j]));
        a2 = std::max(a2, s2[j]);
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t i = b * 2048 + j;
        float& pi = p[q.offset + i];
        pi = pi + step_size * (s1[j] / (std::sqrt(s2[j]) + c2 * eps));
        if (wd > 0 && q.decay) pi = pi * (1.0f - lr * wd);
        q.c1[i] = static_cast<uint8_t>(quantize_scalar(dyn, s1[j] / a1, true));
        q.c2[i] = static_cast<uint8_t>(quantize_scalar(udyn, s2[j] / a2, false));
      }
      q.absmax1[b] = a1;
      q.absmax2[b] = a2;
    }
  }
}

// A ParamList of flat sizes that exercise every case: 8-bit with a partial last block, 8-bit without weight decay,
// below min_8bit_size (fp32 moments), and the word embedding's fp32 override.
parallel::ParamList mixed_params() {
  parallel::ParamList ps;
  auto add = [&](const std::string& name, int64_t n, bool no_wd, bool fp32_state) {
    parallel::ParamInfo p;
    p.name = name;
    p.param = torch::zeros({n});
    p.global_shape = {n};
    p.no_weight_decay = no_wd;
    p.fp32_optimizer_state = fp32_state;
    ps.push_back(p);
  };
  add("a", 6000, false, false);
  add("small", 3000, false, false);
  add("no_decay", 4096, true, false);
  add("embedding", 5000, false, true);
  return ps;
}

}  // namespace

TEST(Adam8bitMap, MatchesBitsandbytesDynamicMaps) {
  const auto s = optim::dynamic_map(true), u = optim::dynamic_map(false);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_TRUE(std::is_sorted(u.begin(), u.end()));
  EXPECT_TRUE(std::adjacent_find(s.begin(), s.end()) == s.end()) << "entries repeat";
  // Values of bitsandbytes' create_dynamic_map(signed) as torch 1.13 computes them (fp32 linspace: last-bit
  // differences from ours are allowed).
  const std::vector<std::pair<int, double>> signed_ref = {{0, -0.992968738079071},       {1, -0.9789062142372131},
                                                          {64, -0.09859374910593033},    {100, -0.0074687497690320015},
                                                          {126, -5.500000384017767e-07}, {127, 0.0},
                                                          {128, 5.500000384017767e-07},  {200, 0.23359376192092896},
                                                          {254, 0.992968738079071},      {255, 1.0}};
  const std::vector<std::pair<int, double>> unsigned_ref = {{0, 0.0},
                                                            {1, 3.2500003044333425e-07},
                                                            {50, 0.0064843748696148396},
                                                            {128, 0.11054687201976776},
                                                            {200, 0.6167968511581421},
                                                            {254, 0.9964843988418579},
                                                            {255, 1.0}};
  for (const auto& [i, want] : signed_ref) EXPECT_NEAR(s[i], want, 2.5e-7 * std::fabs(want)) << "signed " << i;
  for (const auto& [i, want] : unsigned_ref) EXPECT_NEAR(u[i], want, 2.5e-7 * std::fabs(want)) << "unsigned " << i;
}

TEST(Adam8bitMap, CodesFollowBitsandbytesSearchAndKeepMapValues) {
  for (const bool is_signed : {true, false}) {
    const auto code = optim::dynamic_map(is_signed);
    const torch::Tensor map = optim::dynamic_map_tensor(is_signed, torch::kCPU);
    torch::manual_seed(3);
    torch::Tensor x = is_signed ? torch::rand({20000}) * 2 - 1 : torch::rand({20000});
    x = torch::cat({x, x.pow(7), map, torch::tensor({std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f})});
    const torch::Tensor got = optim::quantize_codes(map, x, is_signed);
    const float* xp = x.data_ptr<float>();
    const int64_t* gp = got.data_ptr<int64_t>();
    int64_t mismatches = 0;
    for (int64_t i = 0; i < x.numel(); ++i) mismatches += gp[i] != quantize_scalar(code, xp[i], is_signed);
    EXPECT_EQ(mismatches, 0) << (is_signed ? "signed" : "unsigned");
    // Every map value is its own code: what exact checkpoint round trips rely on.
    const torch::Tensor own = optim::quantize_codes(map, map, is_signed);
    EXPECT_TRUE(torch::equal(own, torch::arange(256, torch::kInt64))) << (is_signed ? "signed" : "unsigned");
  }
}

TEST(Adam8bitStep, MatchesScalarBitsandbytesKernels) {
  const parallel::ParamList ps = mixed_params();
  const auto pieces = optimtest::whole_pieces(ps);
  const int64_t S = pieces.back().buffer_offset + pieces.back().numel;
  BlockwiseAdam8bit adam(pieces, ps, S, torch::TensorOptions().dtype(torch::kFloat32));
  EXPECT_EQ(adam.quantized_numel(), 6000 + 4096);
  EXPECT_EQ(adam.num_blocks(), 3 + 2);
  EXPECT_LT(adam.state_bytes(), 8 * S);

  std::vector<RefParam> ref;
  for (size_t i = 0; i < ps.size(); ++i) {
    RefParam r{pieces[i].buffer_offset, pieces[i].numel, !ps[i].no_weight_decay,
               !ps[i].fp32_optimizer_state && pieces[i].numel >= 4096};
    const int64_t blocks = (r.numel + 2047) / 2048;
    r.m.assign(r.numel, 0.0f);
    r.v.assign(r.numel, 0.0f);
    r.c1.assign(r.numel, 127);
    r.c2.assign(r.numel, 0);
    r.absmax1.assign(blocks, 0.0f);
    r.absmax2.assign(blocks, 0.0f);
    ref.push_back(r);
  }
  torch::manual_seed(5);
  torch::Tensor master = torch::randn({S});
  torch::Tensor ref_master = master.clone();
  for (int step = 1; step <= 6; ++step) {
    torch::Tensor grad = torch::randn({S}) * (step % 2 ? 1.0 : 1e-3);  // the scale changes: absmax moves
    if (step == 3) grad.narrow(0, 100, 2048).zero_();                  // a block sees no gradient
    adam.step(master, grad, optimtest::adam8bit_scalars(step));
    reference_step(ref, ref_master.data_ptr<float>(), grad.data_ptr<float>(), optimtest::adam8bit_scalars(step));
    // The masters within an ulp or two: LibTorch builds differ in how they round p + (m / d) * step (Debian's 1.13
    // gives these bits exactly; a 2.x build on AVX-512 differs in the last bit). A wrong update is off by ~lr.
    EXPECT_TRUE(torch::allclose(master, ref_master, 1e-6, 1e-7))
        << "step " << step << ": max difference " << (master - ref_master).abs().max().item<float>();
  }
  // The moments read back as the reference holds them.
  const torch::Tensor m = adam.exp_avg();
  const auto dyn = optim::dynamic_map(true);
  for (const auto& r : ref) {
    for (int64_t i = 0; i < r.numel; i += 997) {
      const float want = r.eight_bit ? dyn[r.c1[i]] * r.absmax1[i / 2048] : r.m[i];
      EXPECT_EQ(m[r.offset + i].item<float>(), want) << "element " << r.offset + i;
    }
  }
}

TEST(Adam8bitStep, LoadRestoresItsOwnStateExactlyAndQuantizesForeignMoments) {
  const parallel::ParamList ps = mixed_params();
  const auto pieces = optimtest::whole_pieces(ps);
  const int64_t S = pieces.back().buffer_offset + pieces.back().numel;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  BlockwiseAdam8bit a(pieces, ps, S, opts), b(pieces, ps, S, opts);
  torch::manual_seed(9);
  torch::Tensor pa = torch::randn({S});
  for (int step = 1; step <= 4; ++step)
    a.step(pa, torch::randn({S}) - 0.3, optimtest::adam8bit_scalars(step));  // negative extremes too
  b.load(a.exp_avg(), a.exp_avg_sq());
  EXPECT_TRUE(torch::equal(a.exp_avg(), b.exp_avg()));
  EXPECT_TRUE(torch::equal(a.exp_avg_sq(), b.exp_avg_sq()));
  torch::Tensor pb = pa.clone();
  for (int step = 5; step <= 7; ++step) {
    const torch::Tensor g = torch::randn({S});
    a.step(pa, g, optimtest::adam8bit_scalars(step));
    b.step(pb, g, optimtest::adam8bit_scalars(step));
  }
  EXPECT_TRUE(torch::equal(pa, pb)) << "a resumed state continues bit for bit";

  // fp32 Adam's moments: each element lands on a map entry near it (the map's widest gap is 0.014 of the absmax).
  const torch::Tensor m = torch::randn({S}) * 1e-3, v = torch::rand({S}) * 1e-6;
  b.load(m, v);
  const torch::Tensor err_m = (b.exp_avg() - m).abs().max(), err_v = (b.exp_avg_sq() - v).abs().max();
  EXPECT_LE(err_m.item<float>(), 0.0071f * m.abs().max().item<float>());
  EXPECT_LE(err_v.item<float>(), 0.0071f * v.max().item<float>());
  EXPECT_GT(err_m.item<float>(), 0.0f) << "8-bit moments cannot hold fp32 values exactly";
}

namespace {

// y = W2 tanh(W1 x): W1 [96, 64] and W2 [80, 96] have 8-bit moments (>= 4096 elements), the biases fp32 ones.
struct Mlp {
  parallel::ParamList params;
  explicit Mlp(uint64_t seed) {
    torch::manual_seed(seed);
    add("w1", torch::randn({96, 64}) * 0.1, false);
    add("b1", torch::zeros({96}), true);
    add("w2", torch::randn({80, 96}) * 0.1, false);
  }
  void add(const std::string& name, torch::Tensor init, bool no_wd) {
    parallel::ParamInfo p;
    p.name = name;
    p.param = init.set_requires_grad(true);
    p.global_shape = init.sizes().vec();
    p.no_weight_decay = no_wd;
    params.push_back(p);
  }
  torch::Tensor loss(const torch::Tensor& x, const torch::Tensor& y) const {
    const auto h = torch::tanh(torch::matmul(x, params[0].param.t()) + params[1].param);
    return (torch::matmul(h, params[2].param.t()) - y).pow(2).mean();
  }
};

double train_mlp(bool bnb, int steps) {
  auto groups = optimtest::self_groups();
  Mlp model(1);
  parallel::DataParallel dp(model.params, groups, {});
  optim::OptimizerOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  o.clip_grad = 1.0;
  o.use_bnb = bnb;
  optim::MixedPrecisionOptimizer opt(dp, groups, o, nullptr);
  if (bnb) EXPECT_LT(opt.moment_bytes(), 8 * dp.shard_numel() / 2);
  torch::manual_seed(2);
  const torch::Tensor target = torch::randn({80, 64}) * 0.3;  // y = T x
  double loss = 0;
  for (int s = 0; s < steps; ++s) {
    const torch::Tensor x = torch::randn({32, 64});
    opt.zero_grad();
    const torch::Tensor l = model.loss(x, torch::matmul(x, target.t()));
    l.backward();
    EXPECT_TRUE(opt.step().updated);
    loss = l.item<double>();
  }
  return loss;
}

}  // namespace

TEST(Adam8bitOptimizer, TrainsAsFp32AdamDoes) {
  const double start = train_mlp(false, 1);
  const double fp32 = train_mlp(false, 150), eight = train_mlp(true, 150);
  EXPECT_LT(fp32, 0.5 * start);
  EXPECT_LT(eight, 0.5 * start);
  EXPECT_NEAR(eight, fp32, 0.1 * fp32) << "8-bit Adam should train as fp32 Adam does";
  EXPECT_NE(eight, fp32) << "the 8-bit states should change the trajectory a little";
}

TEST(Adam8bitOptimizer, StateDictRoundTripContinuesIdentically) {
  auto ga = optimtest::self_groups(), gb = optimtest::self_groups();
  Mlp a(1), b(7);
  parallel::DataParallel dpa(a.params, ga, {}), dpb(b.params, gb, {});
  optim::OptimizerOptions o;
  o.lr = 3e-3;
  o.use_bnb = true;
  optim::MixedPrecisionOptimizer oa(dpa, ga, o, nullptr), ob(dpb, gb, o, nullptr);
  torch::manual_seed(4);
  std::vector<torch::Tensor> xs;
  for (int i = 0; i < 6; ++i) xs.push_back(torch::randn({16, 64}));
  const torch::Tensor y = torch::randn({16, 80});
  auto train = [&](Mlp& m, optim::MixedPrecisionOptimizer& opt, const torch::Tensor& x) {
    opt.zero_grad();
    m.loss(x, y).backward();
    opt.step();
  };
  for (int s = 0; s < 3; ++s) train(a, oa, xs[s]);
  const auto state = oa.state_dict();
  EXPECT_EQ(state.at("w1").at("exp_avg").sizes(), a.params[0].param.sizes());
  ob.load_state_dict(state);
  ob.load_scalar_state(oa.scalar_state());
  for (int s = 3; s < 6; ++s) {
    train(a, oa, xs[s]);
    train(b, ob, xs[s]);
  }
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_TRUE(torch::equal(a.params[i].param, b.params[i].param)) << a.params[i].name;
}

TEST(Adam8bitOptimizer, RefusesSgd) {
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.use_bnb = true;
  EXPECT_THROW(o.validate(), UsageError);
}
