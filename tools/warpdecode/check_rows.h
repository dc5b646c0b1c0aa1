// The rows `warpdecode check` prints: one implementation's output against
// the FP64 reference on the same (dequantized) weights, judged against its
// tolerance (cmd_check.cpp lists them and why).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "warpdecode/reference.h"
#include "warpdecode/weights.h"
#ifdef WD_HAVE_CUDA
#include "warpdecode/warp_decode.h"
#endif

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

// Appends to a row's note, "; " between notes.
inline void add_note(CheckRow& r, const std::string& note) { r.note += (r.note.empty() ? "" : "; ") + note; }

#ifdef WD_HAVE_CUDA
// The FP32 output (n values) of one call on the device, poisoned first
// (NaN: an output the call leaves unwritten fails the check).
std::vector<double> poisoned_fp32_output(size_t n, const std::function<void(const MoeOutput&)>& call);

// The classical path in its default configuration at this batch (and, for
// MXFP8 on sm_90a, W8A16 beside it), then MoeDispatch itself,
// on host weights w of any format with the reference routing; ref is the
// exact FP64 layer on that routing (check_classical.cpp).
std::vector<CheckRow> check_classical(const MoeWeights& w, const std::vector<uint16_t>& x, int batch,
                                      const reference::Routing& routing, const std::vector<double>& ref);
#endif

}  // namespace wd::cli
