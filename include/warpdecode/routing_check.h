// Checking a routing that did not come from warpdecode's own router.
//
// The MoE kernels take a RoutingView on trust: ids in [0, E) and finite
// weights (layout.h). An id outside that range makes them read another
// expert's weights, or memory past the weights, and write wrong outputs
// without any error; checking every id inside the kernels would cost each
// forward call a dependent load before its first weight load. So the check
// is a separate, opt-in step:
//   * validate_routing(): call it once on routing from your own router (a
//     test, an import, a new model) before trusting it; it synchronises the
//     stream and throws wd::InvalidArgument naming the first bad entry.
//   * WD_CHECK_ROUTING=1 in the environment: every experts() call of
//     WarpDecodeMoe and ClassicalMoe (and so MoeDispatch, and forward(),
//     whose routing is the router's) validates its routing first. This
//     synchronises the stream on each call: for debugging, not for speed.
//     Calls made while the stream is being captured into a CUDA graph are
//     not checked (a capture cannot synchronise), nor calls on the legacy
//     stream while another stream captures; a check runs in relaxed capture
//     mode, so that another thread's capture is not invalidated by it.
#pragma once

#include "warpdecode/layout.h"

#ifdef WD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace wd {

// What WD_CHECK_ROUTING's value asks for: unset, empty or "0" off, "1" on;
// anything else throws wd::InvalidArgument naming the value.
bool check_routing_from_env_value(const char* value);
// The environment's WD_CHECK_ROUTING, read once per process.
bool routing_checks_enabled();

#ifdef WD_HAVE_CUDA
// Throws wd::InvalidArgument unless every one of the batch · top_k entries
// (device memory) has an id in [0, experts) and a finite weight; the message
// names how many entries are bad and the first one (token, slot, id,
// weight). Allocates a few bytes and synchronises `stream`: not for use
// inside a captured or timed forward call.
void validate_routing(const RoutingView& routing, int experts, cudaStream_t stream);

// validate_routing() when routing_checks_enabled() and `stream` is not
// capturing; otherwise nothing. The experts() entry points call it first.
void maybe_validate_routing(const RoutingView& routing, int experts, cudaStream_t stream);
#endif

}  // namespace wd
