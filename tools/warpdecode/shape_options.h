// Shape selection shared by the subcommands: a preset, optionally overridden
// dimension by dimension (--hidden, --intermediate, --experts, --top-k).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "warpdecode/layout.h"

namespace wd::cli {

struct ShapeOptions {
  std::string preset = "qwen3-30b-a3b";
  int hidden = 0, intermediate = 0, experts = 0, top_k = 0;
  // The override options; a dimension is overridden only when given (even as 0,
  // which validation then refuses by name).
  CLI::Option *o_hidden = nullptr, *o_intermediate = nullptr, *o_experts = nullptr, *o_top_k = nullptr;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--preset", preset, "Shape preset: qwen3-30b-a3b, qwen3-235b-a22b, qwen3-coder-480b-a35b, tiny")
        ->capture_default_str();
    o_hidden = cmd->add_option("--hidden", hidden, "Override H (hidden_size)");
    o_intermediate = cmd->add_option("--intermediate", intermediate, "Override I (moe_intermediate_size)");
    o_experts = cmd->add_option("--experts", experts, "Override E (num_experts)");
    o_top_k = cmd->add_option("--top-k", top_k, "Override K (num_experts_per_tok)");
  }

  // The resolved, validated shape; throws wd::InvalidArgument otherwise.
  MoeShape resolve() const {
    MoeShape s = preset_shape(preset);
    if (o_hidden && o_hidden->count()) s.hidden = hidden;
    if (o_intermediate && o_intermediate->count()) s.intermediate = intermediate;
    if (o_experts && o_experts->count()) s.experts = experts;
    if (o_top_k && o_top_k->count()) s.top_k = top_k;
    s.validate();
    return s;
  }

  std::string label() const {
    const bool custom = (o_hidden && o_hidden->count()) || (o_intermediate && o_intermediate->count()) ||
                        (o_experts && o_experts->count()) || (o_top_k && o_top_k->count());
    return custom ? preset + "(custom)" : preset;
  }
};

}  // namespace wd::cli
