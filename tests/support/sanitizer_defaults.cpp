// With -DMEGATON_SANITIZE, the sanitizers' defaults for the test binaries. Open MPI and LibTorch (not instrumented)
// keep allocations until the process exits: leaks are not what these runs look for. UBSan prints where it stops.
extern "C" const char* __asan_default_options() {
  return "detect_leaks=0";
}
extern "C" const char* __ubsan_default_options() {
  return "print_stacktrace=1";
}
