#include "core/host_name.h"

#include <unistd.h>

namespace megaton {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace megaton
