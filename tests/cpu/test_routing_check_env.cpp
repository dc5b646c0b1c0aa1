// WD_CHECK_ROUTING's values (warpdecode/routing_check.h): off unless "1",
// and a value it does not know is an error, not a silent "off".
#include <gtest/gtest.h>

#include <string>

#include "warpdecode/error.h"
#include "warpdecode/routing_check.h"

namespace wd {
namespace {

TEST(RoutingCheckEnv, OnlyOneTurnsItOn) {
  EXPECT_FALSE(check_routing_from_env_value(nullptr));
  EXPECT_FALSE(check_routing_from_env_value(""));
  EXPECT_FALSE(check_routing_from_env_value("0"));
  EXPECT_TRUE(check_routing_from_env_value("1"));
}

TEST(RoutingCheckEnv, OtherValuesThrowNamingThemselves) {
  for (const char* v : {"yes", "true", "2", " 1", "10"}) {
    try {
      check_routing_from_env_value(v);
      ADD_FAILURE() << "'" << v << "' was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("WD_CHECK_ROUTING='") + v + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace wd
