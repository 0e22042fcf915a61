#include "checkpoint/catalog.h"

#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/collective.h"
#include "checkpoint/format.h"
#include "core/error.h"

namespace megaton::checkpoint {

using nlohmann::json;

int64_t catalog_entry_bytes(const CatalogEntry& e) {
  return stored_bytes(e.dtype, e.global_shape, e.path);
}

Catalog gather_catalog(const std::vector<LocalTensor>& local, const dist::RankGrid& grid, const dist::Coords& me) {
  json mine = json::array();
  if (me.dp == 0)
    for (const auto& t : local)
      mine.push_back({{"p", t.path},
                      {"s", t.global_shape},
                      {"d", t.partition_dim},
                      {"u", t.unpadded_rows},
                      {"t", dtype_name(t.tensor.scalar_type())}});
  const auto all = allgather_strings(mine.dump());
  Catalog cat;
  // path -> set of (pp, tp) holders among dp-0 ranks.
  std::map<std::string, std::set<std::pair<int, int>>> holders;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].empty()) continue;
    const dist::Coords c = grid.coords(r);
    for (const auto& j : json::parse(all[r])) {
      CatalogEntry e;
      e.path = j.at("p").get<std::string>();
      e.global_shape = j.at("s").get<std::vector<int64_t>>();
      e.partition_dim = j.at("d").get<int>();
      e.unpadded_rows = j.at("u").get<int64_t>();
      e.dtype = j.at("t").get<std::string>();
      e.writer_pp = c.pp;
      auto it = cat.find(e.path);
      if (it == cat.end()) {
        cat.emplace(e.path, e);
      } else {
        CatalogEntry& f = it->second;
        MEGATON_ASSERT(f.global_shape == e.global_shape && f.partition_dim == e.partition_dim &&
                           f.unpadded_rows == e.unpadded_rows,
                       "tensor '", e.path, "' is described differently by two ranks: global shape ",
                       shape_str(f.global_shape), " vs ", shape_str(e.global_shape), ", partition_dim ",
                       f.partition_dim, " vs ", e.partition_dim, ", unpadded rows ", f.unpadded_rows, " vs ",
                       e.unpadded_rows, " (rank ", r, ")");
        f.writer_pp = std::min(f.writer_pp, c.pp);
      }
      holders[e.path].insert({c.pp, c.tp});
    }
  }
  for (auto& [path, e] : cat) {
    const auto& h = holders[path];
    const int need = e.partition_dim < 0 ? 1 : grid.tp_size();
    for (int tp = 0; tp < need; ++tp)
      MEGATON_ASSERT(h.count({e.writer_pp, tp}), "tensor '", path, "' (split on dim ", e.partition_dim, "): TP rank ",
                     tp, " of pipeline stage ", e.writer_pp, " does not hold its shard");
    (void)place(e, 0, grid.tp_size());  // checks the contract (divisibility, padding dim)
  }
  return cat;
}

bool is_designated(const CatalogEntry& e, const dist::Coords& c) {
  return c.dp == 0 && c.pp == e.writer_pp && (e.partition_dim >= 0 || c.tp == 0);
}

ShardPlacement place(const CatalogEntry& e, int tp_rank, int tp_size) {
  return place_shard(e.path, e.global_shape, e.partition_dim, e.unpadded_rows, tp_rank, tp_size);
}

}  // namespace megaton::checkpoint
