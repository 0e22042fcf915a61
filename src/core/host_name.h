// This machine's host name (gethostname), or "localhost" when it cannot be read.
#pragma once
#include <string>

namespace megaton {

std::string host_name();

}  // namespace megaton
