#include "model/recompute.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

namespace megaton::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Closure : torch::CustomClassHolder {
  HiddenFn fn;
  parallel::RngTracker* rng = nullptr;
  parallel::RngState forward_state;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, c10::intrusive_ptr<Closure> closure) {
    closure->forward_state = closure->rng->get_state();
    ctx->save_for_backward({x});
    torch::Tensor y = closure->fn(x);  // grad mode is off here: nothing inside is kept
    ctx->saved_data["closure"] = c10::IValue::make_capsule(closure);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto closure = c10::static_intrusive_pointer_cast<Closure>(ctx->saved_data["closure"].toCapsule());
    torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    parallel::RngTracker& rng = *closure->rng;
    const parallel::RngState now = rng.get_state();
    rng.set_state(closure->forward_state);
    torch::Tensor y;
    {
      torch::AutoGradMode enable(true);
      y = closure->fn(x);
    }
    rng.set_state(now);
    torch::autograd::backward({y}, {grads[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(const HiddenFn& fn, const torch::Tensor& x, parallel::RngTracker& rng) {
  if (!x.requires_grad() || !torch::GradMode::is_enabled()) return fn(x);
  auto closure = c10::make_intrusive<Closure>();
  closure->fn = fn;
  closure->rng = &rng;
  return CheckpointFunction::apply(x, closure);
}

}  // namespace megaton::model
