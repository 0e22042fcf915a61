// The subcommands of the megaton binary. Each is `int run_X(int argc, const char* const* argv)`: argv[0] is the
// subcommand's name; it returns the process exit code and throws megaton::Error for failures (main reports them).
#pragma once

namespace megaton::tools {

using SubcommandFn = int (*)(int argc, const char* const* argv);

struct Subcommand {
  const char* name;
  SubcommandFn run;
  const char* summary;
};

int run_train(int argc, const char* const* argv);
int run_preprocess(int argc, const char* const* argv);
int run_merge_data(int argc, const char* const* argv);
int run_generate(int argc, const char* const* argv);
int run_eval(int argc, const char* const* argv);
int run_serve(int argc, const char* const* argv);
int run_reshard(int argc, const char* const* argv);
int run_export_hf(int argc, const char* const* argv);
int run_import_hf(int argc, const char* const* argv);
int run_convert(int argc, const char* const* argv);
int run_inspect(int argc, const char* const* argv);
int run_plan(int argc, const char* const* argv);
int run_comm_bench(int argc, const char* const* argv);

}  // namespace megaton::tools
