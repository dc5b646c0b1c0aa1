// Shape selection shared by the subcommands: a preset, optionally overridden
// dimension by dimension (--hidden, --intermediate, --experts, --top-k); and
// for check and accuracy, a checkpoint's layer instead (--model, --layer).
#pragma once

#include <CLI/CLI.hpp>

#include <array>
#include <string>

#include "tools/warpdecode/layer_source.h"
#include "warpdecode/error.h"
#include "warpdecode/layout.h"

namespace wd::cli {

// Whether option o (null: not added to this command) was given on the command line.
inline bool option_given(const CLI::Option* o) { return o && o->count(); }

// --hidden, --intermediate, --experts, --top-k: a preset's dimensions
// overridden one by one. bench-moe applies them to each of its presets;
// ShapeOptions to its one.
struct ShapeOverrides {
  int hidden = 0, intermediate = 0, experts = 0, top_k = 0;
  // A dimension is overridden only when given (even as 0, which validation
  // then refuses by name).
  CLI::Option *o_hidden = nullptr, *o_intermediate = nullptr, *o_experts = nullptr, *o_top_k = nullptr;

  void add_to(CLI::App* cmd) {
    o_hidden = cmd->add_option("--hidden", hidden, "Override H (hidden_size)");
    o_intermediate = cmd->add_option("--intermediate", intermediate, "Override I (moe_intermediate_size)");
    o_experts = cmd->add_option("--experts", experts, "Override E (num_experts)");
    o_top_k = cmd->add_option("--top-k", top_k, "Override K (num_experts_per_tok)");
  }

  // Each override: its option, its flag, its letter in labels, the shape's
  // field it sets and its value.
  struct Dim {
    CLI::Option* option;
    const char* flag;
    const char* letter;
    int MoeShape::*field;
    int value;
  };
  std::array<Dim, 4> dims() const {
    return {{{o_hidden, "--hidden", "H", &MoeShape::hidden, hidden},
             {o_intermediate, "--intermediate", "I", &MoeShape::intermediate, intermediate},
             {o_experts, "--experts", "E", &MoeShape::experts, experts},
             {o_top_k, "--top-k", "K", &MoeShape::top_k, top_k}}};
  }

  // The first override given on the command line ("--hidden", ...), or nullptr.
  const char* given_option() const {
    for (const Dim& d : dims())
      if (option_given(d.option)) return d.flag;
    return nullptr;
  }

  // The preset's shape with the overrides, validated; throws
  // wd::InvalidArgument for an unknown preset or a shape it refuses.
  MoeShape apply(const std::string& preset) const {
    MoeShape s = preset_shape(preset);
    for (const Dim& d : dims())
      if (option_given(d.option)) s.*d.field = d.value;
    s.validate();
    return s;
  }

  // The preset's name, followed by what was overridden: "qwen3-30b-a3b",
  // "qwen3-30b-a3b(H=3072,E=64)".
  std::string label(const std::string& preset) const {
    std::string given;
    for (const Dim& d : dims())
      if (option_given(d.option))
        given += (given.empty() ? "" : ",") + std::string(d.letter) + "=" + std::to_string(d.value);
    return given.empty() ? preset : preset + "(" + given + ")";
  }
};

// --preset with ShapeOverrides: one shape (dispatch, check, accuracy).
struct ShapeOptions {
  std::string preset = "qwen3-30b-a3b";
  ShapeOverrides overrides;
  CLI::Option* o_preset = nullptr;

  void add_to(CLI::App* cmd) {
    o_preset = cmd->add_option("--preset", preset,
                               "Shape preset: qwen3-30b-a3b, qwen3-235b-a22b, qwen3-coder-480b-a35b, tiny")
                   ->capture_default_str();
    overrides.add_to(cmd);
  }

  // The resolved, validated shape; throws wd::InvalidArgument otherwise.
  MoeShape resolve() const { return overrides.apply(preset); }

  // The first shape option given on the command line ("--preset", ...), or
  // nullptr when none was.
  const char* given_option() const { return option_given(o_preset) ? "--preset" : overrides.given_option(); }

  std::string label() const { return overrides.label(preset); }
};

// --model DIR [--layer L]: one MoE layer of a Hugging Face checkpoint
// (layer_source.h) instead of a ShapeOptions shape (check, accuracy).
struct ModelOptions {
  std::string dir;
  int layer = -1;  // -1: the checkpoint's first MoE layer
  CLI::Option* o_layer = nullptr;

  void add_to(CLI::App* cmd, const std::string& model_help) {
    cmd->add_option("--model", dir, model_help);
    o_layer = cmd->add_option("--layer", layer, "With --model: the model's layer index (default: its first MoE layer)");
  }

  bool given() const { return !dir.empty(); }

  // Throws wd::InvalidArgument for --layer without --model, a negative
  // --layer, or --model beside a shape option (the checkpoint has its shape).
  void validate(const ShapeOptions& shape) const {
    const bool layer_given = option_given(o_layer);
    WD_CHECK(given() || !layer_given, "--layer needs --model");
    WD_CHECK(!layer_given || layer >= 0, "--layer ", layer, " must be >= 0");
    const char* conflict = given() ? shape.given_option() : nullptr;
    WD_CHECK(conflict == nullptr, "--model takes the checkpoint's shape: drop ", conflict ? conflict : "");
  }

  LayerSource source() const { return model_layer_source(dir, layer); }
};

}  // namespace wd::cli
