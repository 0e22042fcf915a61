// What the fuzz targets share: the input written to a private scratch file (for parsers that read paths), and the
// rule every target checks: megaton's typed errors are the expected outcome of bad input; anything else (a crash, a
// sanitizer report, an escaping std::exception such as a JSON library's own) is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace megaton::fuzz {

/// A scratch directory of this process, created once (under $TMPDIR or /tmp).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string d = std::string(t && *t ? t : "/tmp") + "/megaton_fuzz_" + std::to_string(::getpid());
    std::string cmd = "mkdir -p '" + d + "'";
    if (std::system(cmd.c_str()) != 0) std::abort();
    return d;
  }();
  return dir;
}

/// Writes `data` to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace megaton::fuzz
