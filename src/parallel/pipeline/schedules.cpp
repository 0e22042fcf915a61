#include "parallel/pipeline/schedules.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

#include "core/error.h"

namespace megaton::parallel::pipeline {

namespace {

torch::Tensor as_input_leaf(torch::Tensor received) {
  if (received.defined()) received.requires_grad_(true);
  return received;
}

void before(const StageStep& step, int mb) {
  if (step.before_backward) step.before_backward(mb);
}

}  // namespace

torch::Tensor backward_step(const torch::Tensor& input, const torch::Tensor& output, const torch::Tensor& output_grad) {
  MEGATON_CHECK(output.defined(), InternalError, "pipeline backward without a forward output");
  if (output_grad.defined())
    output.backward(output_grad);
  else
    output.backward();
  if (!input.defined()) return {};
  torch::Tensor g = input.grad();
  MEGATON_CHECK(g.defined(), InternalError, "pipeline backward: the stage input received no gradient");
  return g;
}

void forward_backward_no_pipelining(int num_microbatches, const StageStep& step) {
  MEGATON_CHECK(num_microbatches > 0, InternalError, "an iteration needs at least one micro-batch");
  for (int mb = 0; mb < num_microbatches; ++mb) {
    torch::Tensor out = step.forward(mb, torch::Tensor());
    before(step, mb);
    backward_step({}, out, {});
  }
}

void forward_backward_1f1b(int num_microbatches, P2p& p2p, const StageStep& step) {
  const int m = num_microbatches;
  MEGATON_CHECK(m > 0, InternalError, "an iteration needs at least one micro-batch");
  const int warmup = std::min(p2p.stages() - p2p.stage() - 1, m);
  const int remaining = m - warmup;
  std::deque<std::pair<torch::Tensor, torch::Tensor>> alive;  // (input, output) of micro-batches awaiting backward
  int next_fwd = 0, next_bwd = 0;

  for (int i = 0; i < warmup; ++i) {
    torch::Tensor input = as_input_leaf(p2p.recv_forward());  // [s, b, h] or undefined on the first stage
    torch::Tensor out = step.forward(next_fwd++, input);
    p2p.send_forward(out);
    alive.emplace_back(input, out);
  }
  torch::Tensor input;
  if (remaining > 0) input = as_input_leaf(p2p.recv_forward());
  for (int i = 0; i < remaining; ++i) {
    const bool last = i == remaining - 1;
    torch::Tensor out = step.forward(next_fwd++, input);
    torch::Tensor out_grad = p2p.send_forward_recv_backward(out);
    alive.emplace_back(input, out);
    auto [in0, out0] = alive.front();
    alive.pop_front();
    before(step, next_bwd++);
    torch::Tensor in_grad = backward_step(in0, out0, out_grad);
    if (last) {
      input = torch::Tensor();
      p2p.send_backward(in_grad);
    } else {
      input = as_input_leaf(p2p.send_backward_recv_forward(in_grad));
    }
  }
  for (int i = 0; i < warmup; ++i) {
    auto [in0, out0] = alive.front();
    alive.pop_front();
    torch::Tensor out_grad = p2p.recv_backward();
    before(step, next_bwd++);
    p2p.send_backward(backward_step(in0, out0, out_grad));
  }
  MEGATON_ASSERT(alive.empty() && next_fwd == m && next_bwd == m, "1F1B schedule left micro-batches behind");
}

void forward_backward_interleaved(int num_microbatches, int num_chunks, P2p& p2p, const ChunkedStep& step,
                                  bool forward_only) {
  const int m = num_microbatches, v = num_chunks, pp = p2p.stages(), rank = p2p.stage();
  MEGATON_CHECK(m > 0, InternalError, "an iteration needs at least one micro-batch");
  MEGATON_CHECK(v >= 1 && pp >= 2, InternalError, "interleaved schedule needs PP >= 2 and chunks >= 1 (PP ", pp,
                ", chunks ", v, ")");
  MEGATON_CHECK(m % pp == 0, UsageError, "the interleaved pipeline schedule (--num-layers-per-virtual-pipeline-stage) ",
                "needs the number of micro-batches per iteration (--global-batch-size / (--micro-batch-size x DP) = ",
                m, ") to be a multiple of --pipeline-model-parallel-size (", pp, ")");
  std::optional<torch::NoGradGuard> no_grad;
  if (forward_only) no_grad.emplace();

  const int total = m * v;
  bool all_warmup = false;
  int warmup;
  if (forward_only) {
    warmup = total;
  } else if (m == pp) {
    warmup = total;  // every forward, then every backward
    all_warmup = true;
  } else {
    warmup = std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
  }
  const int remaining = total - warmup;

  const int group = pp * v;
  auto chunk_id = [&](int k, bool fwd) {  // get_model_chunk_id (k may be negative: Python's modulo)
    const int c = (((k % group) + group) % group) / pp;
    return fwd ? c : v - 1 - c;
  };
  auto mb_id = [&](int k) { return (k / group) * pp + k % pp; };
  auto is_first = [&](int c) { return rank == 0 && c == 0; };
  auto is_last = [&](int c) { return rank == pp - 1 && c == v - 1; };
  auto leaf = [&](torch::Tensor t) { return forward_only ? t : as_input_leaf(std::move(t)); };
  auto pop = [](std::deque<torch::Tensor>& q) {
    MEGATON_ASSERT(!q.empty(), "interleaved schedule: nothing queued for a backward");
    torch::Tensor t = q.front();
    q.pop_front();
    return t;
  };

  // Per chunk, as Megatron's input_tensors / output_tensors / output_tensor_grads lists.
  std::vector<std::deque<torch::Tensor>> inputs(v), outputs(v), out_grads(v);

  auto forward_k = [&](int k) {
    const int c = chunk_id(k, true);
    if (is_first(c) && inputs[c].size() == outputs[c].size()) inputs[c].emplace_back();
    MEGATON_ASSERT(!inputs[c].empty(), "interleaved schedule: no input received for chunk ", c);
    torch::Tensor out = step.forward(c, mb_id(k), inputs[c].back());
    if (forward_only) {
      inputs[c].pop_back();
    } else {
      outputs[c].push_back(out);
    }
    return out;
  };
  auto backward_k = [&](int k) {
    const int c = chunk_id(k, false);
    if (is_last(c) && out_grads[c].empty()) out_grads[c].emplace_back();
    torch::Tensor in = pop(inputs[c]), out = pop(outputs[c]), og = pop(out_grads[c]);
    if (step.before_backward) step.before_backward(c, mb_id(k));
    return backward_step(in, out, og);
  };

  inputs[0].push_back(leaf(p2p.recv_forward()));  // undefined on stage 0
  for (int k = 0; k < warmup; ++k) {
    torch::Tensor out = forward_k(k);
    const int next_c = chunk_id(k + 1, true);
    const bool recv_prev = !(rank == 0 && next_c == 0) && k != total - 1;
    if (is_last(chunk_id(k, true))) out = torch::Tensor();
    if (k == warmup - 1 && !forward_only && !all_warmup) {
      const bool recv_next = rank != pp - 1;
      auto [in, og] = p2p.ring_send_forward_backward_recv_forward_backward(out, {}, recv_prev, recv_next);
      out_grads[v - 1].push_back(og);
      inputs[next_c].push_back(leaf(in));
    } else {
      torch::Tensor in = p2p.ring_send_forward_recv_forward(out, recv_prev);
      inputs[next_c].push_back(leaf(in));
    }
  }

  for (int k = 0; k < remaining; ++k) {
    const int fk = k + warmup, bk = k;
    torch::Tensor out = forward_k(fk);
    torch::Tensor in_grad = backward_k(bk);
    if (is_last(chunk_id(fk, true))) out = torch::Tensor();
    if (is_first(chunk_id(bk, false))) in_grad = torch::Tensor();

    bool recv_prev = true;
    int next_fc;
    if (rank == 0) {  // the first stage is ahead of the last by PP - 1
      next_fc = chunk_id(fk - (pp - 1), true);
      if (next_fc == v - 1) recv_prev = false;
      next_fc += 1;
    } else {
      next_fc = chunk_id(fk + 1, true);
    }
    bool recv_next = true;
    int next_bc;
    if (rank == pp - 1) {  // the last stage is ahead of the first by PP - 1
      next_bc = chunk_id(bk - (pp - 1), false);
      if (next_bc == 0) recv_next = false;
      next_bc -= 1;
    } else {
      next_bc = chunk_id(bk + 1, false);
    }
    if (k == remaining - 1) recv_prev = false;  // already received before the loop
    auto [in, og] = p2p.ring_send_forward_backward_recv_forward_backward(out, in_grad, recv_prev, recv_next);
    if (recv_prev) inputs[next_fc].push_back(leaf(in));
    if (recv_next) out_grads[next_bc].push_back(og);
  }

  if (forward_only) return;
  if (all_warmup) out_grads[v - 1].push_back(p2p.recv_backward());  // undefined on the last stage
  for (int k = remaining; k < total; ++k) {
    torch::Tensor in_grad = backward_k(k);
    const int next_bc = chunk_id(k + 1, false);
    const bool recv_next = !(rank == pp - 1 && next_bc == v - 1) && k != total - 1;
    out_grads[next_bc].push_back(p2p.ring_send_backward_recv_backward(in_grad, recv_next));
  }
  for (int c = 0; c < v; ++c)
    MEGATON_ASSERT(outputs[c].empty(), "interleaved schedule left ", outputs[c].size(), " forward outputs of chunk ", c,
                   " without a backward");
}

void forward_only(int num_microbatches, P2p& p2p, const StageStep& step) {
  torch::NoGradGuard no_grad;
  for (int mb = 0; mb < num_microbatches; ++mb) {
    torch::Tensor input = p2p.recv_forward();
    torch::Tensor out = step.forward(mb, input);
    p2p.send_forward(out);
  }
}

void run_schedule(int num_microbatches, int num_chunks, P2p& p2p, const ChunkedStep& step, bool forward_only_) {
  if (num_chunks > 1) {
    forward_backward_interleaved(num_microbatches, num_chunks, p2p, step, forward_only_);
    return;
  }
  StageStep stage;
  stage.forward = [&](int mb, const torch::Tensor& input) { return step.forward(0, mb, input); };
  if (step.before_backward) stage.before_backward = [&](int mb) { step.before_backward(0, mb); };
  if (forward_only_)
    forward_only(num_microbatches, p2p, stage);
  else if (p2p.stages() == 1)
    forward_backward_no_pipelining(num_microbatches, stage);
  else
    forward_backward_1f1b(num_microbatches, p2p, stage);
}

}  // namespace megaton::parallel::pipeline
