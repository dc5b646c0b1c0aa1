// A tune's ladders from a JSON document already parsed (warpdecode/tune_ladder.h
// takes the text): for readers that also need the document's other fields,
// such as `warpdecode crossover-merge`'s header and provenance, so that a
// file is parsed once. Same checks and errors as the text form.
#pragma once

#include <string>
#include <vector>

#include "core/json_read.h"
#include "warpdecode/tune_ladder.h"

namespace wd {

std::vector<TuneLadder> parse_tune_ladders(const json_read::Json& doc, const std::string& source);

}  // namespace wd
