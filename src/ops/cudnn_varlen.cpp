#include "ops/cudnn_varlen.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace megaton::ops::cudnn_varlen {

namespace {

constexpr const char* kForward = "aten::_cudnn_attention_forward";
constexpr const char* kBackward = "aten::_cudnn_attention_backward";

using Named = std::map<std::string, c10::IValue>;

auto find(const char* name) {
  return c10::Dispatcher::singleton().findSchema(c10::OperatorName{name, ""});
}

bool takes(const char* op, const char* argument) {
  const auto h = find(op);
  if (!h) return false;
  for (const c10::Argument& a : h->schema().arguments())
    if (a.name() == argument) return true;
  return false;
}

// `op` called with the arguments in `args` matched by name to its schema; the others take their defaults.
std::vector<c10::IValue> call(const char* op, const Named& args) {
  const auto h = find(op);
  MEGATON_CHECK(h.has_value(), InternalError, op, " is not in this LibTorch (", compat::torch_version(), ")");
  std::vector<c10::IValue> stack;
  size_t used = 0;
  for (const c10::Argument& a : h->schema().arguments()) {
    const auto it = args.find(a.name());
    if (it != args.end()) {
      // An absent tensor: None where the schema takes `Tensor?`, an undefined tensor where it takes `Tensor`.
      const bool none = it->second.isNone() && a.type()->kind() != c10::TypeKind::OptionalType;
      stack.push_back(none ? c10::IValue(at::Tensor()) : it->second);
      ++used;
    } else {
      MEGATON_CHECK(a.default_value().has_value(), InternalError, op, ": this LibTorch's schema (", h->schema(),
                    ") has a required argument '", a.name(), "' megaton does not know");
      stack.push_back(*a.default_value());
    }
  }
  MEGATON_CHECK(used == args.size(), InternalError, op, ": this LibTorch's schema (", h->schema(),
                ") lacks some of the arguments megaton passes");
  h->callBoxed(&stack);
  return stack;  // the returns, in the schema's order
}

torch::Tensor tensor_at(const std::vector<c10::IValue>& r, size_t i, const char* what) {
  MEGATON_CHECK(i < r.size() && r[i].isTensor(), InternalError, kForward, ": expected a tensor '", what, "' at return ",
                i, " of ", r.size());
  return r[i].toTensor();
}

}  // namespace

bool available() {
  static const bool yes = takes(kForward, "cum_seq_q") && takes(kBackward, "cum_seq_q");
  return yes;
}

compat::VarlenFlashOut forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& cu_seqlens, int64_t max_len, double dropout_p) {
  const std::vector<c10::IValue> r = call(kForward, {{"query", q},
                                                     {"key", k},
                                                     {"value", v},
                                                     {"attn_bias", c10::IValue()},
                                                     {"cum_seq_q", cu_seqlens},
                                                     {"cum_seq_k", cu_seqlens},
                                                     {"max_q", max_len},
                                                     {"max_k", max_len},
                                                     {"compute_log_sumexp", true},
                                                     {"dropout_p", dropout_p},
                                                     {"is_causal", true},
                                                     {"return_debug_mask", false}});
  // (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug_attn_mask)
  MEGATON_CHECK(r.size() >= 8, InternalError, kForward, ": expected 9 returns, got ", r.size());
  return {tensor_at(r, 0, "output"), tensor_at(r, 1, "logsumexp"), tensor_at(r, 6, "philox_seed"),
          tensor_at(r, 7, "philox_offset")};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> backward(const torch::Tensor& grad_out, const torch::Tensor& q,
                                                                 const torch::Tensor& k, const torch::Tensor& v,
                                                                 const compat::VarlenFlashOut& f,
                                                                 const torch::Tensor& cu_seqlens, int64_t max_len,
                                                                 double dropout_p) {
  const std::vector<c10::IValue> r = call(kBackward, {{"grad_out", grad_out},
                                                      {"query", q},
                                                      {"key", k},
                                                      {"value", v},
                                                      {"out", f.out},
                                                      {"logsumexp", f.logsumexp},
                                                      {"philox_seed", f.rng_state},
                                                      {"philox_offset", f.unused},
                                                      {"attn_bias", c10::IValue()},
                                                      {"cum_seq_q", cu_seqlens},
                                                      {"cum_seq_k", cu_seqlens},
                                                      {"max_q", max_len},
                                                      {"max_k", max_len},
                                                      {"dropout_p", dropout_p},
                                                      {"is_causal", true}});
  MEGATON_CHECK(r.size() == 3 && r[0].isTensor() && r[1].isTensor() && r[2].isTensor(), InternalError, kBackward,
                ": expected (dq, dk, dv), got ", r.size(), " returns");
  return {r[0].toTensor(), r[1].toTensor(), r[2].toTensor()};
}

}  // namespace megaton::ops::cudnn_varlen
