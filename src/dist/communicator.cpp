#include "dist/communicator.h"

#include <exception>
#include <iostream>

#include "core/error.h"

namespace megaton::dist {

std::string Communicator::describe() const {
  std::string r;
  for (size_t i = 0; i < members().size(); ++i) r += (i ? "," : "") + std::to_string(members()[i]);
  return str("group '", name(), "' (global ranks ", r, ")");
}

void Work::wait_unless_unwinding() noexcept {
  if (std::uncaught_exceptions() > 0) return;
  try {
    wait();
  } catch (const std::exception& e) {
    std::cerr << "megaton: " << e.what() << std::endl;
  }
}

namespace {

struct CompletedWork : Work {
  void wait() override {}
};

}  // namespace

WorkPtr Communicator::start_all_reduce(torch::Tensor t, ReduceOp op) {
  all_reduce(t, op);
  return std::make_unique<CompletedWork>();
}

WorkPtr Communicator::start_all_gather(torch::Tensor out, torch::Tensor in) {
  all_gather(out, in);
  return std::make_unique<CompletedWork>();
}

WorkPtr Communicator::start_reduce_scatter(torch::Tensor out, torch::Tensor in, ReduceOp op) {
  reduce_scatter(out, in, op);
  return std::make_unique<CompletedWork>();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

}  // namespace megaton::dist
