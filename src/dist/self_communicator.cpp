#include "dist/self_communicator.h"

#include "core/error.h"

namespace megaton::dist {

SelfCommunicator::SelfCommunicator(std::string name, int global_rank) : name_(std::move(name)), members_{global_rank} {}

void SelfCommunicator::all_gather(torch::Tensor& out, const torch::Tensor& in) {
  MEGATON_ASSERT(out.numel() == in.numel(), "all_gather on ", describe(), ": out has ", out.numel(),
                 " elements, in has ", in.numel());
  out.view(-1).copy_(in.reshape(-1));
}

void SelfCommunicator::reduce_scatter(torch::Tensor& out, const torch::Tensor& in, ReduceOp op) {
  MEGATON_ASSERT(out.numel() == in.numel(), "reduce_scatter on ", describe(), ": out has ", out.numel(),
                 " elements, in has ", in.numel());
  out.view(-1).copy_(in.reshape(-1));
}

void SelfCommunicator::broadcast(torch::Tensor& t, int root) {
  MEGATON_ASSERT(root == 0, "broadcast on ", describe(), " from root ", root, " of a one-rank group");
}

void SelfCommunicator::send(const torch::Tensor& t, int peer) {
  throw InternalError(str("send to peer ", peer, " on ", describe(), ": a one-rank group has no peer"));
}

void SelfCommunicator::recv(torch::Tensor& t, int peer) {
  throw InternalError(str("recv from peer ", peer, " on ", describe(), ": a one-rank group has no peer"));
}

void SelfCommunicator::send_recv(const torch::Tensor& send, int send_peer, torch::Tensor& recv, int recv_peer) {
  throw InternalError(str("send_recv on ", describe(), ": a one-rank group has no peer"));
}

ProcessGroups single_rank_groups() {
  ProcessGroups g{RankGrid(1, 1, 1)};
  g.rank = 0;
  g.coords = g.grid.coords(0);
  g.world = std::make_shared<SelfCommunicator>("world");
  g.tp = std::make_shared<SelfCommunicator>("tp");
  g.dp = std::make_shared<SelfCommunicator>("dp");
  g.pp = std::make_shared<SelfCommunicator>("pp");
  g.mp = std::make_shared<SelfCommunicator>("mp");
  g.embedding = std::make_shared<SelfCommunicator>("embedding");
  g.host = std::make_shared<SelfCommunicator>("host");
  return g;
}

}  // namespace megaton::dist
