// warpdecode: the command-line tool. Errors become one line on stderr and a
// non-zero exit status.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "tools/warpdecode/commands.h"
#include "warpdecode/error.h"

int main(int argc, char** argv) {
  CLI::App app{"warpdecode: small-batch Mixture-of-Experts decode on NVIDIA GPUs (warp decode)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", wd::cli::build_description());
  wd::cli::add_all(app);
  wd::cli::set_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const wd::Error& e) {
    std::fprintf(stderr, "warpdecode: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpdecode: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
