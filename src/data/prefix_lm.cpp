#include "data/prefix_lm.h"

#include <algorithm>

#include "core/error.h"
#include "data/document_positions.h"

namespace megaton::data {
namespace {

// The end of every document: the positions of the end-of-document tokens, and s when the row does not end with one
// (its last, partial document).
std::vector<int64_t> document_ends(const std::vector<int64_t>& tokens, int64_t eod) {
  std::vector<int64_t> ends;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] == eod) ends.push_back(static_cast<int64_t>(i));
  if (tokens.empty() || tokens.back() != eod) ends.push_back(static_cast<int64_t>(tokens.size()));
  return ends;
}

}  // namespace

std::vector<int64_t> prefix_lm_indices(const std::vector<int64_t>& tokens, int64_t eod, bool per_document,
                                       PythonRandom& rng) {
  const int64_t s = static_cast<int64_t>(tokens.size());
  MEGATON_ASSERT(s >= 1, "prefix-LM row of ", s, " tokens");
  if (!per_document) return {rng.randint(1, s)};
  std::vector<int64_t> out;
  int64_t prev = 0;
  for (const int64_t end : document_ends(tokens, eod)) {
    // An empty document (an end-of-document token first, or right after another) has only its end token: the fork's
    // randint(prev + 1, prev) raises there; megaton takes prev + 1 without a draw.
    out.push_back(end > prev ? rng.randint(prev + 1, end) : prev + 1);
    prev = end + 1;
  }
  return out;
}

std::vector<uint8_t> prefix_lm_prefix_tokens(const std::vector<int64_t>& tokens, int64_t eod,
                                             const std::vector<int64_t>& prefix, bool per_document) {
  const int64_t s = static_cast<int64_t>(tokens.size());
  std::vector<uint8_t> in(static_cast<size_t>(s), 0);
  if (!per_document) {
    MEGATON_ASSERT(prefix.size() == 1, prefix.size(), " prefix indices for one row");
    std::fill(in.begin(), in.begin() + std::clamp<int64_t>(prefix[0], 0, s), 1);
    return in;
  }
  const std::vector<int64_t> ends = document_ends(tokens, eod);
  MEGATON_ASSERT(prefix.size() == ends.size(), prefix.size(), " prefix indices for ", ends.size(), " documents");
  int64_t prev = 0;
  for (size_t j = 0; j < ends.size(); ++j) {
    for (int64_t q = prev; q < std::min(prefix[j], s); ++q) in[static_cast<size_t>(q)] = 1;
    prev = ends[j] + 1;
  }
  return in;
}

PrefixLmMasks prefix_lm_masks(const std::vector<int64_t>& tokens, int64_t eod, const std::vector<int64_t>& prefix,
                              const PrefixLmOptions& o) {
  const int64_t s = static_cast<int64_t>(tokens.size());
  PrefixLmMasks m;
  if (o.attention_matrix) m.attends.assign(static_cast<size_t>(s * s), 0);
  auto at = [&](int64_t q, int64_t k) -> uint8_t& {
    return m.attends[static_cast<size_t>(q * s + k)];
  };  // attention_matrix only
  for (int64_t q = 0; q < s && o.attention_matrix; ++q)
    for (int64_t k = 0; k <= q; ++k) at(q, k) = 1;
  m.loss_mask.assign(static_cast<size_t>(s), 1.0f);
  if (o.eod_mask_loss)
    for (int64_t i = 0; i < s; ++i)
      if (tokens[i] == eod) m.loss_mask[i] = 0.0f;
  m.position_ids.resize(static_cast<size_t>(s));
  if (o.reset_position_ids) {
    std::vector<int64_t> document(static_cast<size_t>(s));
    document_positions(tokens.data(), s, eod, m.position_ids.data(), document.data());
  } else {
    for (int64_t i = 0; i < s; ++i) m.position_ids[i] = i;
  }

  if (o.reset_attention_mask) {  // per document: no attention across a boundary, a prefix in each document
    const std::vector<int64_t> ends = document_ends(tokens, eod);
    MEGATON_ASSERT(prefix.size() == ends.size(), prefix.size(), " prefix indices for ", ends.size(), " documents");
    int64_t prev = 0;
    for (size_t j = 0; j < ends.size(); ++j) {
      const int64_t i = ends[j], p = prefix[j];
      for (int64_t q = i + 1; q < s && o.attention_matrix; ++q)
        for (int64_t k = 0; k <= std::min(i, s - 1); ++k) at(q, k) = 0;
      for (int64_t q = prev; q < std::min(p, s) && o.attention_matrix; ++q)
        for (int64_t k = prev; k < std::min(p, s); ++k) at(q, k) = 1;
      if (o.loss_on_targets_only)  // the prefix's last token predicts the first target: it keeps its loss
        for (int64_t q = prev; q < std::min(p - 1, s); ++q) m.loss_mask[q] = 0.0f;
      prev = i + 1;
    }
  } else {  // per row: one prefix
    MEGATON_ASSERT(prefix.size() == 1, prefix.size(), " prefix indices for one row");
    const int64_t p = std::min(prefix[0], s);
    for (int64_t q = 0; q < p && o.attention_matrix; ++q)
      for (int64_t k = 0; k < p; ++k) at(q, k) = 1;
    if (o.loss_on_targets_only)
      for (int64_t q = 0; q < p - 1; ++q) m.loss_mask[q] = 0.0f;
  }
  if (o.reweight_loss)  // reweight_loss_mask_: (s - i) / (s + 1) * 2
    for (int64_t i = 0; i < s; ++i) m.loss_mask[i] *= static_cast<float>(s - i) / static_cast<float>(s + 1) * 2.0f;
  return m;
}

}  // namespace megaton::data
