// `warpdecode report`: fixed JSON renders to the expected Markdown; PNGs when
// gnuplot is installed (skipped with the reason otherwise); the Markdown is
// still written without gnuplot.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "accuracy/report.h"
#include "warpdecode/error.h"

namespace wd::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kMoeJson = R"({
  "header": {"card": "NVIDIA H200", "sms": 132, "driver": "13.0", "cuda_runtime": "13.0", "commit": "abc123",
             "sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "max_sm_clock_mhz": 1980,
             "command": "warpdecode bench-moe --json h200-moe.json", "read_tbps": 4.51},
  "records": [
    {"preset": "qwen3-30b-a3b", "format": "mxfp8", "batch": 1, "path": "warp", "config": "gu1x1/cvt",
     "default_config": true, "us_median": 20.54, "tbps": 1.8512, "pct_read_bw": 41.04},
    {"preset": "qwen3-30b-a3b", "format": "mxfp8", "batch": 8, "path": "warp", "config": "gu2x1/cvt",
     "default_config": false, "us_median": 130.2, "tbps": 2.5, "pct_read_bw": 55.4},
    {"preset": "qwen3-30b-a3b", "format": "mxfp8", "batch": 8, "path": "warp", "config": "gu4x1/cvt",
     "default_config": true, "us_median": 110.25, "tbps": 2.9, "pct_read_bw": 64.3},
    {"preset": "qwen3-30b-a3b", "format": "mxfp8", "batch": 8, "path": "classical", "config": "t16",
     "default_config": true, "us_median": 150, "tbps": 2.13, "pct_read_bw": 47.2, "warp_speedup": 1.36}
  ]})";

const char* const kAccuracyJson = R"({
  "header": {"tool": "warpdecode accuracy", "source": "gpu", "card": "NVIDIA H200", "driver": "13.0",
             "cuda_runtime": "13.0", "commit": "abc123", "sm_clock_mhz": 1980, "mem_clock_mhz": 3201,
             "command": "warpdecode accuracy --json a.json", "output": "bf16"},
  "records": [
    {"preset": "qwen3-30b-a3b", "format": "mxfp8", "batch": 8, "inputs": "gaussian",
     "err_warp": 0.00112, "err_classical_bf16": 0.0039, "err_classical_fp8": 0.0431, "err_classical_w8a16": 0.00395,
     "ratio_fp8_over_warp": 38.48, "err_weight_quant": 0.0452, "source": "gpu", "seeds": 8,
     "worst": {"err_warp": 0.00125, "err_classical_bf16": 0.0041, "err_classical_fp8": 0.0452,
               "err_classical_w8a16": 0.00405, "ratio_fp8_over_warp": 35.1, "err_weight_quant": 0.0471}},
    {"preset": "qwen3-30b-a3b", "format": "bf16", "batch": 32, "inputs": "outliers",
     "err_warp": 0.00111, "err_classical_bf16": 0.00385, "err_classical_fp8": null,
     "ratio_fp8_over_warp": null, "err_weight_quant": null, "source": "cpu-model", "seeds": 8,
     "worst": {"err_warp": 0.00121, "err_classical_bf16": 0.0042}}
  ],
  "drift": [
    {"preset": "qwen3-30b-a3b", "format": "mxfp8", "batch": 8, "inputs": "gaussian", "layers": 10,
     "depth": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
     "err_warp": [1e-5, 2e-5, 3e-5, 4e-5, 5e-5, 6e-5, 7e-5, 8e-5, 9e-5, 1e-4],
     "err_classical_bf16": [2e-5, 4e-5, 6e-5, 8e-5, 1e-4, 1.2e-4, 1.4e-4, 1.6e-4, 1.8e-4, 2e-4],
     "err_classical_fp8": [3e-4, 6e-4, 9e-4, 1.2e-3, 1.5e-3, 1.8e-3, 2.1e-3, 2.4e-3, 2.7e-3, null],
     "ratio_fp8_over_warp": [30, 30, 30, 30, 30, 30, 30, 30, 30, null],
     "err_weight_quant": [3e-4, 6e-4, 9e-4, 1.2e-3, 1.5e-3, 1.8e-3, 2.1e-3, 2.4e-3, 2.7e-3, 3e-3],
     "worst": {"err_warp": [2e-5, 3e-5, 4e-5, 5e-5, 6e-5, 7e-5, 8e-5, 9e-5, 1e-4, 1.1e-4]},
     "weights": {"warp": "mxfp8", "classical_bf16": "bf16", "classical_fp8": "mxfp8"},
     "reroutes": {"warp": [0, 0, 0, 0, 0, 0, 0, 0.5, 0, 1], "classical_bf16": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                  "classical_fp8": [0, 1, 0, 0, 0, 0, 0, 2, 0, 3]},
     "source": "gpu", "seeds": 3, "residual": "fp32"}
  ]})";

TEST(Report, MoeTableKeepsDefaultConfigurations) {
  EXPECT_EQ(moe_table(json::parse(kMoeJson)),
            "| preset | format | B | path | config | µs | TB/s | % of read |\n"
            "|---|---|--:|---|---|--:|--:|--:|\n"
            "| qwen3-30b-a3b | mxfp8 | 1 | warp | gu1x1/cvt | 20.5 | 1.851 | 41.0 |\n"
            "| qwen3-30b-a3b | mxfp8 | 8 | warp | gu4x1/cvt | 110.2 | 2.900 | 64.3 |\n"
            "| qwen3-30b-a3b | mxfp8 | 8 | classical | t16 | 150.0 | 2.130 | 47.2 |\n");
}

TEST(Report, AccuracyTable) {
  EXPECT_EQ(accuracy_table(json::parse(kAccuracyJson)),
            "| preset | format | B | inputs | source | warp decode | classical BF16 | classical FP8 | classical W8A16 | "
            "FP8 / warp | weight quant |\n"
            "|---|---|--:|---|---|--:|--:|--:|--:|--:|--:|\n"
            "| qwen3-30b-a3b | mxfp8 | 8 | gaussian | gpu | 1.12e-03 (1.25e-03) | 3.90e-03 (4.10e-03) | "
            "4.31e-02 (4.52e-02) | 3.95e-03 (4.05e-03) | 38.48 (35.10) | 4.52e-02 (4.71e-02) |\n"
            "| qwen3-30b-a3b | bf16 | 32 | outliers | cpu-model | 1.11e-03 (1.21e-03) | 3.85e-03 (4.20e-03) | - | - | - | - |\n");
  // FP8 block-128: warp decode does not stream it, and the table says what it ran.
  json fp8 = {{"records", {{{"preset", "qwen3-30b-a3b"}, {"format", "fp8-block128"}, {"batch", 8},
                            {"inputs", "gaussian"}, {"source", "gpu"}, {"err_warp", 1.2e-3},
                            {"weights", {{"warp", "mxfp8"}, {"classical_fp8", "fp8-block128"}}}}}}};
  EXPECT_NE(accuracy_table(fp8).find("\nWarp decode ran other weights in fp8-block128 rows: mxfp8.\n"),
            std::string::npos)
      << accuracy_table(fp8);
}

TEST(Report, DriftTableAtPowersOfTwoAndTheLastDepth) {
  const json doc = json::parse(kAccuracyJson);
  EXPECT_EQ(drift_table(doc["drift"][0]),
            "| depth | warp decode | classical BF16 | classical FP8 | classical W8A16 | FP8 / warp | weight quant | "
            "reroutes warp / BF16 / FP8 / W8A16 |\n"
            "|--:|--:|--:|--:|--:|--:|--:|--:|\n"
            "| 1 | 1.00e-05 (2.00e-05) | 2.00e-05 | 3.00e-04 | - | 30.00 | 3.00e-04 | 0.0 / 0.0 / 0.0 / - |\n"
            "| 2 | 2.00e-05 (3.00e-05) | 4.00e-05 | 6.00e-04 | - | 30.00 | 6.00e-04 | 0.0 / 0.0 / 1.0 / - |\n"
            "| 4 | 4.00e-05 (5.00e-05) | 8.00e-05 | 1.20e-03 | - | 30.00 | 1.20e-03 | 0.0 / 0.0 / 0.0 / - |\n"
            "| 8 | 8.00e-05 (9.00e-05) | 1.60e-04 | 2.40e-03 | - | 30.00 | 2.40e-03 | 0.5 / 0.0 / 2.0 / - |\n"
            "| 10 | 1.00e-04 (1.10e-04) | 2.00e-04 | - | - | - | 3.00e-03 | 1.0 / 0.0 / 3.0 / - |\n");
}

// A path that ran and wrote non-finite output has a null statistic, as has a
// path that did not run: the first prints NaN, the second "-"; so does the
// FP8 / warp ratio, null where either of its paths wrote NaN.
TEST(Report, NonFiniteOutputsPrintNaNWhereAPathDidNotRunPrintsADash) {
  json doc = json::parse(kAccuracyJson);
  json& rec = doc["records"][0];
  rec["err_warp"] = nullptr;
  rec["ratio_fp8_over_warp"] = nullptr;
  rec["worst"].erase("err_warp");
  rec["worst"].erase("ratio_fp8_over_warp");
  rec["non_finite"] = {{"warp", 2}, {"classical_bf16", 0}, {"classical_fp8", 0}, {"classical_w8a16", 0}};
  const std::string t = accuracy_table(doc);
  EXPECT_NE(t.find("| qwen3-30b-a3b | mxfp8 | 8 | gaussian | gpu | NaN | 3.90e-03 (4.10e-03) | 4.31e-02 (4.52e-02) | "
                   "3.95e-03 (4.05e-03) | NaN | 4.52e-02 (4.71e-02) |"),
            std::string::npos)
      << t;
  // The BF16 record: FP8 did not run, so its error and the ratio are "-".
  EXPECT_NE(t.find("| qwen3-30b-a3b | bf16 | 32 | outliers | cpu-model | 1.11e-03 (1.21e-03) | 3.85e-03 (4.20e-03) | - | - | - | - |"),
            std::string::npos)
      << t;
  // A drift record: FP8 wrote NaN at depth 10 (NaN, and so the ratio);
  // W8A16 did not run ("-").
  json& drift = doc["drift"][0];
  drift["non_finite"] = {{"warp", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, {"classical_fp8", {0, 0, 0, 0, 0, 0, 0, 0, 0, 3}}};
  EXPECT_NE(drift_table(drift).find("| 10 | 1.00e-04 (1.10e-04) | 2.00e-04 | NaN | - | NaN | 3.00e-03 |"),
            std::string::npos)
      << drift_table(drift);
}

TEST(Report, HeaderLines) {
  const json doc = json::parse(kMoeJson);
  EXPECT_EQ(header_lines(doc["header"]),
            "- card: NVIDIA H200 (132 SMs) · driver's CUDA 13.0 · CUDA 13.0 · commit abc123\n"
            "- clocks as read: SM 1980 MHz (max 1980 MHz), memory 3201 MHz\n"
            "- command: `warpdecode bench-moe --json h200-moe.json`\n");
  // Since session 81 "driver" is the driver's own version, the CUDA version it
  // supports "cuda_driver"; before, "driver" held the latter.
  json now = doc["header"];
  now["driver"] = "580.159.04";
  now["cuda_driver"] = "13.0";
  EXPECT_EQ(header_lines(now).rfind("- card: NVIDIA H200 (132 SMs) · driver 580.159.04 · CUDA 13.0 · commit abc123\n", 0),
            0u)
      << header_lines(now);
  EXPECT_EQ(header_lines(json::parse(R"({"commit": "abc", "command": "warpdecode accuracy"})")),
            "- card: none (CPU models only: no CUDA GPU, or --cpu) · commit abc\n- command: `warpdecode accuracy`\n");
}

TEST(Report, PlotScripts) {
  const auto moe = moe_plots(json::parse(kMoeJson), "h200-moe");
  ASSERT_EQ(moe.size(), 1u);
  EXPECT_EQ(moe[0].name, "h200-moe-qwen3-30b-a3b");
  EXPECT_EQ(moe[0].data, "# warp mxfp8\n1 1.8512\n8 2.9\n\n\n# classical mxfp8\n8 2.13\n\n\n");
  EXPECT_NE(moe[0].script.find("4.5100 with lines"), std::string::npos) << moe[0].script;
  EXPECT_NE(moe[0].script.find("'measured read ceiling 4.51 TB/s'"), std::string::npos) << moe[0].script;
  const auto drift = drift_plots(json::parse(kAccuracyJson), "h200-accuracy");
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].name, "h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-gaussian");
  EXPECT_NE(drift[0].data.find("\n10 0.0001 0.0002 NaN NaN 0.003\n"), std::string::npos) << drift[0].data;
  EXPECT_NE(drift[0].script.find("'warp decode (mxfp8)'"), std::string::npos);
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/wd-report-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Report, RendersPngsWithGnuplot) {
  if (find_program("gnuplot").empty()) GTEST_SKIP() << "gnuplot is not installed here (apt-get install gnuplot-nox)";
  TempDir t;
  Options o;
  o.moe_files = {t.write("h200-moe.json", kMoeJson)};
  o.accuracy_files = {t.write("h200-accuracy.json", kAccuracyJson)};
  o.out_dir = (t.path / "out").string();
  const Result r = render(o);
  EXPECT_TRUE(r.plots_note.empty()) << r.plots_note;
  ASSERT_EQ(r.pngs.size(), 2u);
  for (const auto& png : r.pngs) {
    const std::string bytes = read_file(png);
    ASSERT_GT(bytes.size(), 1000u) << png;
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << png;
  }
  const std::string md = read_file(r.markdown);
  EXPECT_NE(md.find("![qwen3-30b-a3b: achieved TB/s vs batch size](h200-moe-qwen3-30b-a3b.png)"), std::string::npos)
      << md;
  EXPECT_NE(md.find("(h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-gaussian.png)"), std::string::npos) << md;
  EXPECT_NE(md.find(moe_table(json::parse(kMoeJson))), std::string::npos);
  EXPECT_NE(md.find(accuracy_table(json::parse(kAccuracyJson))), std::string::npos);
  EXPECT_NE(md.find("- numbers from: GPU kernels"), std::string::npos);
  EXPECT_TRUE(fs::exists(t.path / "out" / "gnuplot" / "h200-moe-qwen3-30b-a3b.gp"));
}

TEST(Report, WritesMarkdownWithoutGnuplot) {
  TempDir t;
  Options o;
  o.accuracy_files = {t.write("a.json", kAccuracyJson)};
  o.out_dir = (t.path / "out").string();
  o.gnuplot = "gnuplot-that-is-not-installed";
  const Result r = render(o);
  EXPECT_TRUE(r.pngs.empty());
  EXPECT_NE(r.plots_note.find("gnuplot not found"), std::string::npos) << r.plots_note;
  const std::string md = read_file(r.markdown);
  EXPECT_NE(md.find(accuracy_table(json::parse(kAccuracyJson))), std::string::npos) << md;
  EXPECT_EQ(md.find(".png)"), std::string::npos) << md;
  EXPECT_NE(md.find("gnuplot not found"), std::string::npos) << md;
}

// Files whose records carry no weight_copies were measured before session
// 81's harness (one weight copy of each layer): the report says so, and only
// for them.
TEST(Report, SaysWhichFilesPredateTheHarnessCopies) {
  TempDir t;
  json now = json::parse(kMoeJson);
  for (auto& r : now["records"]) r["weight_copies"] = 12;
  Options o;
  o.moe_files = {t.write("before.json", kMoeJson)};
  o.out_dir = (t.path / "before").string();
  o.gnuplot = "gnuplot-that-is-not-installed";
  EXPECT_NE(read_file(render(o).markdown).find("- weight copies: measured before session 81's harness"),
            std::string::npos);
  o.moe_files = {t.write("after.json", now.dump())};
  o.out_dir = (t.path / "after").string();
  EXPECT_EQ(read_file(render(o).markdown).find("weight copies: measured before"), std::string::npos);
}

TEST(Report, SaysWhichReadCeilingAFileCarries) {
  TempDir t;
  json with = json::parse(kMoeJson);
  with["header"]["read_patterns_tbps"] = {{"grid-stride", 4.30}, {"warp-chunks-d8", 4.51}};
  Options o;
  o.moe_files = {t.write("before.json", kMoeJson), t.write("after.json", with.dump())};
  o.out_dir = (t.path / "out").string();
  o.gnuplot = "gnuplot-that-is-not-installed";
  const std::string md = read_file(render(o).markdown);
  EXPECT_NE(md.find("- measured read ceiling: 4.510 TB/s (streaming read, same run; the grid-stride walk alone)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- measured read ceiling: 4.510 TB/s (streaming read, same run; the fastest of: grid-stride 4.300 "
                    "warp-chunks-d8 4.510)"),
            std::string::npos)
      << md;
}

TEST(Report, RejectsUnreadableInput) {
  TempDir t;
  Options o;
  o.out_dir = (t.path / "out").string();
  o.accuracy_files = {t.write("bad.json", "{ not json")};
  EXPECT_THROW(render(o), FormatError);
  o.accuracy_files = {(t.path / "missing.json").string()};
  EXPECT_THROW(render(o), FormatError);
  o.accuracy_files.clear();
  EXPECT_THROW(render(o), InvalidArgument);
  // Every input is read before anything is written: no output directory.
  EXPECT_FALSE(fs::exists(t.path / "out"));
  // Nesting past json_read::kMaxDepth is refused by name (printing such a
  // value would recurse once a level).
  o.accuracy_files = {t.write("deep.json", std::string(300, '[') + std::string(300, ']'))};
  try {
    render(o);
    ADD_FAILURE() << "300 levels of nesting were not refused";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper than 256 levels"), std::string::npos) << e.what();
  }
  // Each file must be the kind its option says, before anything is written.
  const std::string acc = t.write("acc.json", R"({"header": {"tool": "warpdecode accuracy", "source": "gpu"},
                                                  "records": [], "drift": []})");
  const std::string moe = t.write("moe.json", R"({"header": {"card": "X"},
      "records": [{"preset": "p", "format": "bf16", "batch": 1, "path": "warp", "us_median": 10.0}]})");
  auto refusal = [&](std::vector<std::string> moe_files, std::vector<std::string> acc_files) {
    Options r;
    r.out_dir = (t.path / "out").string();
    r.moe_files = std::move(moe_files);
    r.accuracy_files = std::move(acc_files);
    try {
      render(r);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(refusal({acc}, {}).find("is an `accuracy --json` file: give it with --accuracy"), std::string::npos);
  EXPECT_NE(refusal({}, {moe}).find("is not an `accuracy --json` file"), std::string::npos);
  EXPECT_NE(refusal({t.write("empty.json", R"({"header": {}, "records": []})")}, {})
                .find("holds no bench-moe records"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(t.path / "out"));
}

// Two inputs of one file name (one card's directory each) keep a plot each:
// the second's names take "-2".
TEST(Report, InputsOfOneFileNameKeepTheirOwnPlots) {
  TempDir t;
  fs::create_directories(t.path / "h200");
  fs::create_directories(t.path / "h100");
  json h100 = json::parse(kMoeJson);
  h100["header"]["card"] = "NVIDIA H100 80GB HBM3";
  Options o;
  o.moe_files = {t.write("h200/moe.json", kMoeJson), t.write("h100/moe.json", h100.dump())};
  o.out_dir = (t.path / "out").string();
  o.gnuplot = "gnuplot-that-is-not-installed";
  render(o);
  const fs::path gp = t.path / "out" / "gnuplot";
  ASSERT_TRUE(fs::exists(gp / "moe-qwen3-30b-a3b.gp"));
  ASSERT_TRUE(fs::exists(gp / "moe-qwen3-30b-a3b-2.gp"));
  EXPECT_NE(read_file((gp / "moe-qwen3-30b-a3b.gp").string()).find("(NVIDIA H200)"), std::string::npos);
  EXPECT_NE(read_file((gp / "moe-qwen3-30b-a3b-2.gp").string()).find("(NVIDIA H100 80GB HBM3)"), std::string::npos);
}

}  // namespace
}  // namespace wd::report
