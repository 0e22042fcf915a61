#include "data/merge.h"

#include "core/error.h"
#include "data/indexed_dataset.h"

namespace megaton::data {

MergeStats merge_datasets(const std::vector<std::string>& inputs, const std::string& output_prefix) {
  MEGATON_CHECK(!inputs.empty(), UsageError, "merge-data: --datasets needs at least one dataset prefix");
  // Check every input (existence, structure, dtype) before writing anything.
  uint8_t dtype = 0;
  std::string first;
  for (const auto& p : inputs) {
    MEGATON_CHECK(p != output_prefix, UsageError, "merge-data: --output-prefix '", output_prefix, "' is also an input");
    const MMapIndexedDataset ds(p);
    if (first.empty()) {
      dtype = ds.dtype(), first = p;
    } else {
      MEGATON_CHECK(ds.dtype() == dtype, DataError, "merge-data: '", p, "' has dtype ", dtype_name(ds.dtype()),
                    " but '", first, "' has ", dtype_name(dtype), "; datasets of different dtypes cannot be merged");
    }
  }
  IndexedDatasetBuilder out(output_prefix, dtype);
  for (const auto& p : inputs) out.merge_file(p);
  out.finalize();
  return {out.num_items(), out.num_documents(), out.num_tokens()};
}

}  // namespace megaton::data
