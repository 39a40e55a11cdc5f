// The JSON report; its schema is documented in docs/json-format.md and is
// stable within a "version": fields are only ever added.
#include <nlohmann/json.hpp>

#include <set>

#include "report/report.h"
#include "version.h"

namespace torchleak::report {

namespace {

using Json = nlohmann::ordered_json;

// 1-based line and column; columns count Unicode code points.
Json position(std::string_view line_text, Position p) {
  return {{"line", p.line}, {"column", codepoint_column(line_text, p.column) + 1}};
}

Json diagnostic(const Diagnostic& d, const Catalogue& catalogue) {
  const RuleInfo* rule = catalogue.find(d.rule_id);
  Json j;
  j["rule"] = d.rule_id;
  j["name"] = rule ? rule->name : "";
  j["severity"] = std::string(severity_name(rule ? rule->severity : Severity::Warning));
  j["path"] = d.path;
  // In a notebook: the cell, and lines and columns within it.
  if (d.notebook.cell) {
    j["cell"] = d.notebook.cell;
    j["start"] = position(d.source_line, d.notebook.start);
    j["end"] = position(end_line_text(d), d.notebook.end);
  } else {
    j["start"] = position(d.source_line, d.start);
    j["end"] = position(end_line_text(d), d.end);
  }
  j["message"] = d.message;
  j["help"] = d.help;
  j["context"] = d.context;
  if (!d.fix) {
    j["fix"] = nullptr;
    return j;
  }
  Json edits = Json::array();
  // A notebook's edits are byte ranges of the cell's source.
  for (const auto& e : d.notebook.cell ? d.notebook.edits : d.fix->edits)
    edits.push_back({{"start_byte", e.start_byte}, {"end_byte", e.end_byte}, {"content", e.replacement}});
  j["fix"] = {{"title", d.fix->title},
              {"safety", d.fix->safety == FixSafety::Safe ? "safe" : "unsafe"},
              {"edits", edits}};
  return j;
}

Json file_messages(const std::vector<FileError>& list) {
  Json out = Json::array();
  for (const auto& e : list) out.push_back({{"path", e.path}, {"message", e.message}});
  return out;
}

}  // namespace

std::string render_json(const RunResult& result, const Options&) {
  const Catalogue& catalogue = Catalogue::builtin();
  Json diags = Json::array();
  std::set<std::string> files;
  for (const auto& d : result.diagnostics) {
    diags.push_back(diagnostic(d, catalogue));
    files.insert(d.path);
  }
  Json statistics = Json::array();
  for (const auto& [id, n] : problems_per_rule(result)) {
    const RuleInfo* rule = catalogue.find(id);
    statistics.push_back({{"rule", id}, {"name", rule ? rule->name : ""}, {"count", n}});
  }
  Json out = {
      {"version", 1},
      {"tool", {{"name", "torchleak"}, {"version", kVersion}}},
      {"diagnostics", diags},
      {"errors", file_messages(result.errors)},
      {"notes", file_messages(result.notes)},
      {"statistics", statistics},
      {"summary",
       {{"problems", result.diagnostics.size()},
        {"files_with_problems", files.size()},
        {"files_analyzed", result.files_analyzed},
        {"files_failed", result.errors.size()}}},
  };
  // A path need not be valid UTF-8; JSON text must be.
  return out.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace torchleak::report
