// Errors: every failure in warpdecode is a wd::Error (or a subclass) carrying
// one line that names what was wrong and what is allowed. The CLI prints that
// line and exits non-zero; library users catch wd::Error.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace wd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed a value the library cannot take (shape, preset, batch, ...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime or driver call failed; the message names the call and site.
class CudaError : public Error {
 public:
  using Error::Error;
};

// A file (checkpoint, config, JSON) is malformed or unreadable.
class FormatError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace wd

// WD_CHECK(cond, parts...): host invariant; throws wd::InvalidArgument with the
// concatenated message parts. Use for input validation, not for internal bugs.
#define WD_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) throw ::wd::InvalidArgument(::wd::detail::concat(__VA_ARGS__)); \
  } while (0)
