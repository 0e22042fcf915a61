// Carries a shared Communicator through an autograd context (AutogradContext::saved_data holds IValues only): the
// backward pass then runs the collective on the same group, and the group lives as long as the graph does.
#pragma once
#include <ATen/core/ivalue.h>

#include "dist/communicator.h"

namespace megaton::parallel {

struct CommCapsule : torch::CustomClassHolder {
  explicit CommCapsule(dist::CommunicatorPtr c) : comm(std::move(c)) {}
  dist::CommunicatorPtr comm;

  static c10::IValue wrap(const dist::CommunicatorPtr& c) {
    return c10::IValue::make_capsule(c10::make_intrusive<CommCapsule>(c));
  }
  static dist::CommunicatorPtr unwrap(const c10::IValue& v) {
    return static_cast<CommCapsule*>(v.toCapsule().get())->comm;
  }
};

}  // namespace megaton::parallel
