// The rows `warpdecode check` prints: one implementation's output against
// the FP64 reference on the same (dequantized) weights, judged against its
// tolerance (cmd_check.cpp lists them and why).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "warpdecode/reference.h"
#include "warpdecode/weights.h"

namespace wd::cli {

struct CheckRow {
  std::string format, path;
  double rel_l2 = NAN, max_rel = NAN, tolerance = NAN;
  bool pass = false;
  std::string note;
  bool skipped = false;  // not run on this shape or device (the note says why): neither passed nor failed
};

// rel_l2 and max_rel of out against ref; passes when every output is finite
// and rel_l2 <= tol.
CheckRow judge(const std::string& format, const std::string& path, const std::vector<double>& ref,
               const std::vector<double>& out, double tol);

#ifdef WD_HAVE_CUDA
// The classical path in the configuration MoeDispatch gives it at this batch
// (and, for MXFP8 on sm_90a, W8A16 beside W8A8), then MoeDispatch itself,
// on host weights w of any format with the reference routing; ref is the
// exact FP64 layer on that routing (check_classical.cpp).
std::vector<CheckRow> check_classical(const MoeWeights& w, const std::vector<uint16_t>& x, int batch,
                                      const reference::Routing& routing, const std::vector<double>& ref);
#endif

}  // namespace wd::cli
