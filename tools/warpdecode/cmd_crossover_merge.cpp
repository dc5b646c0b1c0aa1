// warpdecode crossover-merge: tunes of one card (bench-moe --tune or
// --tune-untiled JSON, one file a preset or a run) as one crossover table.
// Ladders of different kinds are put side by side; rounds of the same ladder
// (same preset, format and weights, the same batches) are combined point by
// point, each path's smallest median, and the entries derived again from the
// combined ladder by the tune's own rule (crossover_entries). Where warp
// decode and the classical path are within a few percent, one round's
// crossover moves by a ladder step with the card's clocks (H100, sessions 77
// and 78); rounds give the switch a steadier place. Host logic only.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/json_read.h"
#include "core/json_write.h"
#include "core/read_file.h"
#include "moe/tune_ladder_json.h"
#include "tools/warpdecode/commands.h"
#include "warpdecode/error.h"
#include "warpdecode/tune_ladder.h"

namespace wd::cli {
namespace {

struct MergeOptions {
  std::string out;
  std::vector<std::string> inputs;
};

// The rounds of one ladder kind: the parsed ladders and their records (the
// first's is the merged ladder's base). An input that is itself a merge
// counts its ladder's rounds and files ("rounds", "files"), not one of each.
struct Group {
  std::vector<TuneLadder> rounds;
  std::vector<const json_read::Json*> records;  // rounds[i]'s, in `docs`
  size_t round_count = 0;
  json_read::Json files = json_read::Json::array();
};

// A merged point's configuration label (the classical path's "config", or
// "w8a16_config") is that of the round whose time the merge kept: where
// rounds ran other configurations at a batch, the label names the one timed.
void label_from_kept_round(const Group& g, const std::vector<double> TuneLadder::*times,
                           const std::vector<double>& kept, const char* label, json_read::Json& points) {
  for (size_t i = 0; i < kept.size(); ++i)
    for (size_t r = 0; r < g.rounds.size(); ++r)
      if ((g.rounds[r].*times)[i] == kept[i]) {
        const json_read::Json& from = g.records[r]->at("points").at(i);
        if (from.contains(label))
          points[i][label] = from.at(label);
        else
          points[i].erase(label);
        break;
      }
}

// Appends every string of the array `v` to `into`; anything else is refused
// as "<what> must be an array of strings".
void append_strings(const json_read::Json& v, const std::string& what, json_read::Json& into) {
  const bool strings = v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_string(); });
  if (!strings) throw FormatError(what + " must be an array of strings");
  for (const auto& x : v) into.push_back(x);
}

// Appends a header's provenance to `into`: the string `one` ("command",
// "commit": a tune's header) or every string of the array `many`
// ("commands", "commits": a merge's). A field of another type is refused,
// naming the file.
void add_provenance(const json_read::Json& h, const char* one, const char* many, const std::string& path,
                    json_read::Json& into) {
  if (h.contains(many)) {
    append_strings(h.at(many), path + ": header '" + many + "'", into);
  } else if (h.contains(one)) {
    if (!h.at(one).is_string()) throw FormatError(path + ": header '" + one + "' must be a string");
    into.push_back(h.at(one));
  } else {
    into.push_back("");
  }
}

void run(const MergeOptions& o) {
  std::vector<std::string> order;  // kinds in the order first met
  std::map<std::string, Group> groups;
  json_read::Json header;
  std::string card, card_file;
  json_read::Json commands = json_read::Json::array(), commits = json_read::Json::array();
  // Every input, for the rounds' records: Group::records point into it, so it
  // is reserved up front and never reallocates.
  std::vector<json_read::Json> docs;
  docs.reserve(o.inputs.size());
  // A file given twice would count its ladders as two rounds.
  std::set<std::filesystem::path> seen;
  for (const auto& path : o.inputs)
    WD_CHECK(seen.insert(std::filesystem::weakly_canonical(path)).second, "crossover-merge: ", path,
             " is given twice (each file is one round, or one merge of rounds)");
  for (const auto& path : o.inputs) {
    const json_read::Json& doc = docs.emplace_back(json_read::parse(read_file(path), path));
    const std::vector<TuneLadder> ladders = parse_tune_ladders(doc, path);
    WD_CHECK(!ladders.empty(), "crossover-merge: ", path, " holds no ladders");
    const json_read::Json h = doc.value("header", json_read::Json::object());
    WD_CHECK(h.is_object() && h.contains("card") && h.at("card").is_string(), "crossover-merge: ", path,
             " has no header naming its card (bench-moe --tune writes one)");
    const std::string c = h.at("card").get<std::string>();
    if (card.empty()) {
      card = c, card_file = path, header = h;
    } else {
      WD_CHECK(c == card, "crossover-merge: ", card_file, " was measured on ", card, ", ", path, " on ", c,
               ": a table is one card's");
    }
    add_provenance(h, "command", "commands", path, commands);
    add_provenance(h, "commit", "commits", path, commits);
    for (size_t i = 0; i < ladders.size(); ++i) {
      const std::string k = ladders[i].kind();
      auto [it, fresh] = groups.try_emplace(k);
      const json_read::Json& record = doc.at("ladders").at(i);
      if (fresh) order.push_back(k);
      Group& g = it->second;
      g.rounds.push_back(ladders[i]);
      g.records.push_back(&record);
      const std::string where = path + ", ladder " + std::to_string(i);
      const json_read::Object r(record, where);
      g.round_count += size_t(r.integer_or("rounds", 1, 1, 1 << 20));
      if (r.has("files"))
        append_strings(r.at("files"), where + ": 'files'", g.files);
      else
        g.files.push_back(path);
    }
  }

  CrossoverTable table;
  json_read::Json merged_ladders = json_read::Json::array();
  for (const auto& k : order) {
    Group& g = groups.at(k);
    const TuneLadder best = best_of_rounds(g.rounds);
    json_read::Json lad = *g.records.front();
    json_read::Json& points = lad.at("points");
    auto put = [&](const char* key, const std::vector<double>& v) {
      for (size_t i = 0; i < v.size(); ++i) points[i][key] = v[i];
    };
    put("warp_us", best.warp_us);
    put("warp_tiled_us", best.warp_tiled_us);
    put("classical_us", best.classical_us);
    put("w8a16_us", best.w8a16_us);
    label_from_kept_round(g, &TuneLadder::classical_us, best.classical_us, "config", points);
    label_from_kept_round(g, &TuneLadder::w8a16_us, best.w8a16_us, "w8a16_config", points);
    if (g.round_count > 1) {
      // A point's clocks belong to one round; its times are now several rounds' best (its labels, the
      // kept time's round: label_from_kept_round).
      for (auto& p : points)
        for (const char* key : {"warp_sm_clock_mhz", "warp_tiled_sm_clock_mhz", "classical_sm_clock_mhz",
                                "w8a16_sm_clock_mhz"})
          p.erase(key);
      lad["rounds"] = g.round_count;
      lad["files"] = g.files;
    }
    for (const char* key : {"crossover", "tiled_crossover", "w8a16_crossover", "tiled_w8a16_crossover", "w8a16_from"})
      lad.erase(key);
    std::printf("# %s: %zu round%s\n", k.c_str(), g.round_count, g.round_count > 1 ? "s" : "");
    for (const CrossoverEntry& e : crossover_entries(best)) {
      std::printf("# crossover %s\n", crossover_line(e).c_str());
      lad[ladder_field(e)] = e.crossover;
      if (e.bf16_activations && !e.untiled) lad["w8a16_from"] = e.w8a16_from;
      table.set(e);
    }
    merged_ladders.push_back(std::move(lad));
  }

  json_read::Json doc = json_read::parse(table.to_json(), "crossover-merge");
  // The first input's header (card, bandwidths, method) with every input's
  // command and commit in place of the first's alone.
  for (const char* key : {"command", "commit", "build"}) header.erase(key);
  header["commands"] = commands;
  header["commits"] = commits;
  header["merged_by"] = command_line();
  doc["header"] = header;
  doc["ladders"] = merged_ladders;
  json_write::to_file(doc, o.out);
  std::printf("crossover-merge: %zu entries from %zu ladders in %zu files -> %s\n", table.entries().size(),
              order.size(), o.inputs.size(), o.out.c_str());
}

}  // namespace

void add_crossover_merge(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  auto* cmd = app.add_subcommand(
      "crossover-merge",
      "Merge one card's crossover tunes (bench-moe --tune JSON) into one table, rounds combined point by point");
  cmd->add_option("--out,-o", o->out, "The merged table (load it with WD_MOE_CROSSOVER=FILE)")->required();
  cmd->add_option("tunes", o->inputs, "Tune JSON files, one card's")->required()->check(CLI::ExistingFile);
  cmd->callback([o] { run(*o); });
}

}  // namespace wd::cli
