// GptStage split over pipeline stages (and TP): one micro-batch driven by hand through the stages with send/recv,
// the tied embedding's gradients summed over the embedding group, then every stage's gradients, the logits and the
// loss compared with the whole model on one rank.
#include <torch/torch.h>

#include "dist/self_communicator.h"
#include "model/gpt_stage.h"
#include "model/model_mpi_test_util.h"
#include "parallel/tensor/mappings.h"
#include "support/mpi_fixture.h"

using namespace megaton;

TEST(ModelPipelineStages, StagesTogetherMatchTheWholeModel) {
  const auto local = dist::single_rank_groups();
  const std::vector<std::pair<int, int>> layouts{{1, 2}, {2, 2}, {1, 4}, {2, 4}, {4, 2}};
  for (const auto& [tp, pp] : layouts) {
    if (mpitest::world_size() % (tp * pp) != 0) continue;
    for (const char* positions : {"absolute", "alibi"}) {
      auto c = modeltest::tiny_config(positions, "swiglu");
      c.model.num_layers = 5;  // uneven: stages get 3+2, or 2+1+1+1
      auto g = mpitest::cpu_groups(tp, pp);
      model::GptStage m(c, g), ref(c, local);
      const auto ids = modeltest::tokens(2, 8, 100), labels = modeltest::tokens(2, 8, 100, 4);
      const auto mask = torch::ones({2, 8});
      const int stage = g.coords.pp;
      auto& pipe = *g.pp;
      const std::vector<int64_t> hshape{8, 2, c.model.hidden_size};

      // Forward: receive from the previous stage, compute, send on.
      torch::Tensor x, y, loss;
      if (m.is_first_stage()) {
        y = m.forward(ids);
      } else {
        x = torch::empty(hshape);
        pipe.recv(x, stage - 1);
        x.requires_grad_(true);
        y = m.forward(x);
      }
      if (!m.is_last_stage()) {
        pipe.send(y.detach().contiguous(), stage + 1);
      } else {
        loss = model::GptStage::masked_mean(m.token_losses(y, labels), mask);
      }
      // Backward: the last stage starts from the loss; the others from the gradient of their output.
      if (m.is_last_stage()) {
        loss.backward();
      } else {
        auto grad = torch::empty(hshape);
        pipe.recv(grad, stage + 1);
        y.backward(grad);
      }
      if (!m.is_first_stage()) pipe.send(x.grad().contiguous(), stage - 1);
      model::all_reduce_tied_embedding_grads(m.params(), *g.embedding);

      auto ref_logits = ref.forward(ids);
      auto ref_loss = model::GptStage::masked_mean(ref.token_losses(ref_logits, labels), mask);
      ref_loss.backward();
      bool ok = true;
      if (m.is_last_stage()) {
        auto full = parallel::all_gather_last_dim(y.detach(), *g.tp).narrow(-1, 0, 100);
        ok &= modeltest::rel_err(full, ref_logits.narrow(-1, 0, 100)) < 1e-5;
        ok &= modeltest::rel_err(loss, ref_loss) < 1e-6;
      }
      std::string worst;
      int missing = 0;
      const double err = modeltest::worst_param_error(m.params(), ref.params(), *g.tp, true, &worst, &missing);
      // Layer ownership: this stage's layers are global indices [first, first + n).
      for (const auto& p : m.params())
        if (p.name.rfind("layers.", 0) == 0) {
          const int idx = std::stoi(p.name.substr(7));
          ok &= idx >= m.first_layer() && idx < m.first_layer() + m.num_layers();
        }
      const bool tied_here = m.is_first_stage() || m.is_last_stage();
      bool has_tied = false;
      for (const auto& p : m.params()) has_tied |= p.name == "embedding.word_embeddings.weight";
      ok &= has_tied == tied_here;
      EXPECT_TRUE(mpitest::all_ranks(ok && missing == 0))
          << positions << " TP=" << tp << " PP=" << pp << " stage " << stage;
      EXPECT_TRUE(mpitest::all_ranks(err < 1e-5))
          << positions << " TP=" << tp << " PP=" << pp << ": gradient of " << worst << " differs by " << err;
      int layers = m.num_layers();
      MPI_Allreduce(MPI_IN_PLACE, &layers, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(layers, 5 * mpitest::world_size() / pp);  // every layer on exactly one stage (per TP x DP rank)
    }
  }
}
