// megaton merge-data: Megatron's tools/merge_preprocessed_data.py (--merge serial).
#include <iostream>

#include "cli/parser.h"
#include "core/error.h"
#include "core/log.h"
#include "data/merge.h"
#include "tools/subcommands.h"

namespace megaton::tools {

namespace po = boost::program_options;

int run_merge_data(int argc, const char* const* argv) {
  std::vector<std::string> datasets;
  std::string output_prefix, merge = "serial";
  po::options_description d;
  d.add_options()("datasets", po::value(&datasets)->multitoken()->required(),
                  "dataset prefixes (without .bin/.idx), in order")(
      "output-prefix", po::value(&output_prefix)->required(), "writes PREFIX.bin / PREFIX.idx")(
      "merge", po::value(&merge), "serial (the only mode; 'distributed' is not supported)");
  if (!cli::parse_args("merge-data", "Concatenate preprocessed .bin/.idx datasets.", argc, argv, d, std::cout))
    return 0;
  MEGATON_CHECK(merge == "serial", UsageError, "--merge ", merge, " is not supported; only serial");
  const Logger log;
  const data::MergeStats s = data::merge_datasets(datasets, output_prefix);
  log.info("merge-data: ", datasets.size(), " datasets -> ", output_prefix, ".bin/.idx: ", s.documents, " documents, ",
           s.items, " items, ", s.tokens, " tokens");
  return 0;
}

}  // namespace megaton::tools
