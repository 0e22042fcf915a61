// Runs a shell command from a test and returns its standard output; a non-zero exit is prefixed as "EXIT <status>: "
// so that a caller parsing the output fails with the reason in view.
#pragma once
#include <cstdio>
#include <cstdlib>
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

/// The first python3 that imports `module`: PATH's, else Debian's /usr/bin/python3 (a pyenv python3 ahead on PATH may
/// lack Debian's packages); "" when neither does.
inline std::string python_with(const std::string& module) {
  for (const char* py : {"python3", "/usr/bin/python3"})
    if (std::system((std::string(py) + " -c 'import " + module + "' 2>/dev/null").c_str()) == 0) return py;
  return "";
}

}  // namespace megaton::testing_support
