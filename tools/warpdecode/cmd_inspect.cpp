// warpdecode inspect MODEL_DIR: a Hugging Face Qwen3-MoE checkpoint's shape,
// dtypes, parameter count and the GPU memory its weights need per format.
// With --convert FORMAT it also streams every MoE layer through the
// conversion (progress on stderr) and reports the time and peak resident
// memory, which stays near one layer's experts above the mapped files.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "tools/warpdecode/commands.h"
#include "warpdecode/dispatch_rules.h"
#include "warpdecode/model/checkpoint.h"
#include "warpdecode/model/config.h"
#include "warpdecode/model/expert_stack.h"
#include "warpdecode/model/model_weights.h"
#include "warpdecode/model/summary.h"

namespace wd::cli {
namespace {

std::string bytes_str(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
  else if (b >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1ull << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  return buf;
}

std::string count_str(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.2fB", double(n) / 1e9);
  else if (n >= 1000000ull)
    std::snprintf(buf, sizeof buf, "%.2fM", double(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

void print_model(const std::string& dir, const model::ModelConfig& c, const model::ModelWeights& w,
                 const model::Checkpoint& ckpt, const model::ModelSummary& s) {
  std::printf("model       %s: Qwen3MoeForCausalLM, %zu safetensors file%s, %s\n", dir.c_str(),
              ckpt.num_files(), ckpt.num_files() == 1 ? "" : "s", bytes_str(ckpt.file_bytes()).c_str());
  std::string dense;
  for (int l = 0; l < c.num_hidden_layers; ++l)
    if (!c.is_moe_layer(l)) dense += (dense.empty() ? "" : ",") + std::to_string(l);
  std::printf("layers      %d (%d MoE, %d dense%s)\n", c.num_hidden_layers, c.num_moe_layers(),
              c.num_hidden_layers - c.num_moe_layers(), dense.empty() ? "" : (": " + dense).c_str());
  std::printf("attention   hidden H=%d, %d q heads / %d kv heads x head_dim %d, rope theta %g, rms eps %g, "
              "max positions %d\n", c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
              c.rope_theta, c.rms_norm_eps, c.max_position_embeddings);
  bool fused = false;
  for (const auto& L : w.layers) fused |= L.moe && L.experts.fused;
  std::printf("moe         E=%d experts, top-K=%d (norm_topk_prob %s), moe_intermediate I=%d, %s\n",
              c.num_experts, c.num_experts_per_tok, c.norm_topk_prob ? "true" : "false",
              c.moe_intermediate_size, fused ? "fused expert tensors" : "per-expert tensors");
  if (c.num_hidden_layers > c.num_moe_layers())
    std::printf("dense mlp   intermediate %d\n", c.intermediate_size);
  std::printf("vocab       %d, lm_head %s\n", c.vocab_size, c.tie_word_embeddings ? "tied to embed_tokens" : "untied");
  std::printf("quant       %s\n", c.quant == model::QuantMethod::kFp8Block
                                    ? ("fp8 e4m3, block scales " + std::to_string(c.quant_block_rows) + "x" +
                                       std::to_string(c.quant_block_cols)).c_str()
                                    : "none");
  std::string dt;
  for (const auto& [name, tally] : s.dtypes)
    dt += (dt.empty() ? "" : ", ") + name + " " + std::to_string(tally.tensors) + " tensors " + bytes_str(tally.bytes);
  std::printf("dtypes      %s (config dtype %s)\n", dt.c_str(), c.torch_dtype.empty() ? "-" : c.torch_dtype.c_str());
  std::printf("parameters  %s total, %s in routed experts, %s active per token, %s embeddings\n",
              count_str(s.params_total).c_str(), count_str(s.params_experts).c_str(),
              count_str(s.params_active).c_str(), count_str(s.params_embedding).c_str());
  std::printf("gpu memory  weights per format (KV cache and activations extra):\n");
  // The uploads (DeviceWeightsOptions): tiled-only holds each tensor once;
  // the default and tiled_beside_canonical() keep the canonical tensors,
  // which the classical path (MoeDispatch past its crossover) reads.
  // Tiled-only BF16: the classical path's TMA GEMM reads it as it is on
  // sm_90a where SiLU·up fuses (I % 128 == 0: ClassicalConfig::reads_tiled);
  // elsewhere prefill needs the un-tiling scratch.
  const bool bf16_direct = c.moe_shape().intermediate % 128 == 0;
  const std::string scratch = bytes_str(s.gpu_bytes_bf16_untile_scratch) +
                              " for MoeDispatch::untile_tiled_only's one-layer scratch (prefill on the classical path)";
  const std::string bf16_uploads =
      s.gpu_bytes_bf16_tiled > 0
          ? "the same when tiled-only, the fastest warp decode" +
                (bf16_direct ? " (prefill: the classical path reads it as it is on sm_90a; elsewhere + " + scratch + ")"
                             : ", + " + scratch) +
                "; + " + bytes_str(s.gpu_bytes_bf16_tiled) +
                " with tiled_beside_canonical(), the fastest warp decode beside the classical path"
          : std::string("no tiled copies: the MoE shape does not take both tiled layouts (H % 64, I % 64)");
  std::printf("  bf16        %s   (%s)\n", bytes_str(s.gpu_bytes_bf16).c_str(), bf16_uploads.c_str());
  const uint64_t mx_beside = s.gpu_bytes_mxfp8_tiled_down + s.gpu_bytes_mxfp8_tiled_gate_up;
  const std::string mx_default = s.gpu_bytes_mxfp8_tiled_down > 0
                                     ? "+ " + bytes_str(s.gpu_bytes_mxfp8_tiled_down) + " for its tiled down copy"
                                     : std::string("no tiled down copy (the MoE shape does not take its layout)");
  // Tiled-only MXFP8: read as it is by the W8A16 TMA GEMM on sm_90a where
  // the shape takes it (the dispatch's rule).
  const bool mx_direct = classical_reads_tiled_only(c.moe_shape(), WeightFormat::kMXFP8, /*sm90a=*/true);
  const std::string mx_only = s.gpu_bytes_mxfp8_tiled_down > 0 && s.gpu_bytes_mxfp8_tiled_gate_up > 0
                                  ? "the same when tiled-only, the fastest warp decode" +
                                        (mx_direct ? std::string(" (prefill: the classical path reads it as it is "
                                                                 "in W8A16 on sm_90a; elsewhere + ")
                                                   : std::string(", + ")) +
                                        bytes_str(s.gpu_bytes_mxfp8_untile_scratch) + " for its un-tiling scratch" +
                                        (mx_direct ? ")" : "")
                                  : std::string("no tiled-only upload: the MoE shape does not take both tiled layouts");
  std::printf("  mxfp8       %s   (experts MXFP8, the rest BF16; %s; the default upload, which the classical path "
              "can read too, %s; tiled_beside_canonical() + %s)\n",
              bytes_str(s.gpu_bytes_mxfp8).c_str(), mx_only.c_str(), mx_default.c_str(), bytes_str(mx_beside).c_str());
  if (s.gpu_bytes_fp8_block)
    std::printf("  fp8-block   %s   (FP8 tensors as stored with their block scales, the rest BF16)\n",
                bytes_str(s.gpu_bytes_fp8_block).c_str());
  std::printf("kv cache    %s per token (BF16 K and V, %d layers x %d kv heads x %d)\n",
              bytes_str(s.kv_bytes_per_token).c_str(), c.num_hidden_layers, c.num_key_value_heads, c.head_dim);
  if (!w.ignored.empty()) {
    std::string names;
    for (const auto* t : w.ignored) names += (names.empty() ? "" : ", ") + t->name;
    std::printf("ignored     %s\n", names.c_str());
  }
}

void convert(const model::ModelWeights& w, const model::Checkpoint& ckpt, model::StackFormat f) {
  const auto t0 = std::chrono::steady_clock::now();
  int layers = 0;
  size_t largest = 0;
  model::stream_expert_stacks(w, ckpt, f, [&](model::ExpertStack&& s) {
    ++layers;
    largest = std::max(largest, s.bytes());
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("convert     %d MoE layers to %s in %.2f s, largest layer %s, peak resident memory %s "
              "(checkpoint files %s)\n", layers, model::to_string(f), secs, bytes_str(largest).c_str(),
              bytes_str(uint64_t(ru.ru_maxrss) * 1024).c_str(), bytes_str(ckpt.file_bytes()).c_str());
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect", "Show a Qwen3-MoE checkpoint's shape, dtypes, parameters and GPU memory per weight format");
  auto dir = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>();
  cmd->add_option("MODEL_DIR", *dir, "Hugging Face model directory (config.json + safetensors)")->required();
  cmd->add_option("--convert", *format,
                  "Also stream every MoE layer through the conversion to bf16, mxfp8 or fp8-block and "
                  "report time and peak memory");
  cmd->callback([dir, format] {
    const auto fmt = format->empty() ? model::StackFormat::kBF16 : model::parse_stack_format(*format);
    const model::ModelConfig c = model::load_config(*dir);
    const model::Checkpoint ckpt = model::Checkpoint::open(*dir);
    const model::ModelWeights w = model::ModelWeights::map(c, ckpt);
    print_model(*dir, c, w, ckpt, model::summarize(w, ckpt));
    std::fflush(stdout);
    if (!format->empty()) convert(w, ckpt, fmt);
  });
}

}  // namespace wd::cli
