// The JSON report; its schema is documented in docs/json-format.md.
#include <nlohmann/json.hpp>

#include <set>

#include "report/report.h"
#include "version.h"

namespace torchleak::report {

namespace {
nlohmann::json position(const std::string& line_text, uint32_t line, uint32_t byte_col, bool same_line) {
  return {{"line", line}, {"column", (same_line ? codepoint_column(line_text, byte_col) : byte_col) + 1}};
}
}  // namespace

std::string render_json(const RunResult& result, const Options&) {
  const Catalogue& catalogue = Catalogue::builtin();
  nlohmann::json diags = nlohmann::json::array();
  std::set<std::string> files;
  for (const auto& d : result.diagnostics) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    nlohmann::json j;
    j["rule"] = d.rule_id;
    j["name"] = rule ? rule->name : "";
    j["severity"] = rule ? std::string(severity_name(rule->severity)) : "warning";
    j["path"] = d.path;
    j["start"] = position(d.source_line, d.start.line, d.start.column, true);
    j["end"] = position(d.source_line, d.end.line, d.end.column, d.end.line == d.start.line);
    j["message"] = d.message;
    j["help"] = d.help;
    j["context"] = d.context;
    if (d.fix) {
      nlohmann::json edits = nlohmann::json::array();
      for (const auto& e : d.fix->edits)
        edits.push_back({{"start_byte", e.start_byte}, {"end_byte", e.end_byte}, {"content", e.replacement}});
      j["fix"] = {{"title", d.fix->title},
                  {"safety", d.fix->safety == FixSafety::Safe ? "safe" : "unsafe"},
                  {"edits", edits}};
    } else {
      j["fix"] = nullptr;
    }
    diags.push_back(std::move(j));
    files.insert(d.path);
  }
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& e : result.errors) errors.push_back({{"path", e.path}, {"message", e.message}});
  nlohmann::json out = {
      {"version", 1},
      {"tool", {{"name", "torchleak"}, {"version", kVersion}}},
      {"diagnostics", diags},
      {"errors", errors},
      {"summary",
       {{"problems", result.diagnostics.size()},
        {"files_with_problems", files.size()},
        {"files_analyzed", result.files_analyzed},
        {"files_failed", result.errors.size()}}},
  };
  return out.dump(2) + "\n";
}

}  // namespace torchleak::report
