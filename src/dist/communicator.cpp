#include "dist/communicator.h"

#include "core/error.h"

namespace megaton::dist {

std::string Communicator::describe() const {
  std::string r;
  for (size_t i = 0; i < members().size(); ++i) r += (i ? "," : "") + std::to_string(members()[i]);
  return str("group '", name(), "' (global ranks ", r, ")");
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
