// Batch lists on the command line (tools/warpdecode/batch_list.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/warpdecode/batch_list.h"
#include "warpdecode/error.h"

namespace {

using wd::cli::expand_batch_list;
using V = std::vector<int>;

TEST(BatchList, SizesRangesAndSteps) {
  EXPECT_EQ(expand_batch_list({"8"}), V{8});
  EXPECT_EQ(expand_batch_list({"1", "2", "4"}), (V{1, 2, 4}));
  EXPECT_EQ(expand_batch_list({"1-5"}), (V{1, 2, 3, 4, 5}));
  EXPECT_EQ(expand_batch_list({"7-7"}), V{7});
  EXPECT_EQ(expand_batch_list({"16-64:16", "96"}), (V{16, 32, 48, 64, 96}));
  EXPECT_EQ(expand_batch_list({"2-7:2"}), (V{2, 4, 6}));  // the step need not reach the end
  EXPECT_EQ(expand_batch_list({"4096"}), V{4096});
  EXPECT_EQ(expand_batch_list({"1-64"}).size(), 64u);
}

TEST(BatchList, BadTermsAreRefusedByName) {
  for (const std::string bad : {"0", "4097", "5-3", "1-8:0", "x", "", "-4", "3-", "8:2", "1-2-3", "1.5", "+2",
                                "99999999999"}) {
    try {
      expand_batch_list({bad});
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const wd::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("batch '" + bad + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(expand_batch_list({}), wd::InvalidArgument);
}

}  // namespace
