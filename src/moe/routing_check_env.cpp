// WD_CHECK_ROUTING (warpdecode/routing_check.h): the environment's opt-in
// check of every routing the experts() entry points receive.
#include <cstdlib>
#include <cstring>

#include "warpdecode/error.h"
#include "warpdecode/routing_check.h"

namespace wd {

bool check_routing_from_env_value(const char* value) {
  if (value == nullptr || std::strcmp(value, "") == 0 || std::strcmp(value, "0") == 0) return false;
  if (std::strcmp(value, "1") == 0) return true;
  throw InvalidArgument(detail::concat("WD_CHECK_ROUTING='", value, "': use 1 (check every routing) or 0 (off)"));
}

bool routing_checks_enabled() {
  static const bool enabled = check_routing_from_env_value(std::getenv("WD_CHECK_ROUTING"));
  return enabled;
}

}  // namespace wd
