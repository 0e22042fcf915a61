// Runs a shell command from a test and returns its standard output; a non-zero exit is prefixed as "EXIT <status>: "
// so that a caller parsing the output fails with the reason in view.
#pragma once
#include <cstdio>
#include <string>

namespace megaton::testing_support {

inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "EXIT popen failed: " + cmd;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) out = "EXIT " + std::to_string(rc) + ": " + out;
  return out;
}

}  // namespace megaton::testing_support
