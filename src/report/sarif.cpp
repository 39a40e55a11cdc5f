// SARIF 2.1.0 for code scanning: rule metadata from the catalogue, results
// with repository-relative URIs under %SRCROOT%, UTF-16 columns and
// content-derived partial fingerprints.
#include <fmt/format.h>
#include <xxhash.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "report/report.h"
#include "version.h"

namespace torchleak::report {

namespace {

constexpr size_t kMaxResults = 25000;  // GitHub code scanning's limit per run

std::string relative_uri(const std::string& path, const std::string& srcroot) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec).lexically_normal();
  fs::path rel = srcroot.empty() ? fs::path(path).lexically_normal() : abs.lexically_relative(srcroot);
  std::string s = rel.generic_string();
  if (s.empty() || s.rfind("..", 0) == 0) s = fs::path(path).lexically_normal().generic_string();
  if (s.rfind("./", 0) == 0) s.erase(0, 2);
  // Percent-encode what a URI reference cannot carry literally.
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || std::string_view("/-._~!$&'()*+,;=:@").find(static_cast<char>(c)) != std::string_view::npos)
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string normalized(std::string_view s) {
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

nlohmann::json rule_descriptor(const RuleInfo& r) {
  std::string markdown = render_rule_markdown(r);
  std::string text = r.summary + "\n\n" + r.why + "\n\nFix: " + r.fix;
  std::string level = r.severity == Severity::Error ? "error" : r.severity == Severity::Note ? "note" : "warning";
  std::string problem_severity = r.severity == Severity::Note ? "recommendation" : level;
  nlohmann::json tags = r.tags;
  return {
      {"id", r.id},
      {"name", r.name},
      {"shortDescription", {{"text", r.summary}}},
      {"fullDescription", {{"text", r.why}}},
      {"help", {{"text", text}, {"markdown", markdown}}},
      {"helpUri", std::string(kDocsBaseUrl) + r.doc_file()},
      {"defaultConfiguration", {{"level", level}}},
      {"properties", {{"precision", r.precision}, {"problem.severity", problem_severity}, {"tags", tags}}},
  };
}

}  // namespace

std::string render_sarif(const RunResult& result, const Options& options) {
  const Catalogue& catalogue = Catalogue::builtin();
  nlohmann::json rules = nlohmann::json::array();
  std::map<std::string, size_t> rule_index;
  for (const auto& r : catalogue.rules()) {
    rule_index[r.id] = rules.size();
    rules.push_back(rule_descriptor(r));
  }
  nlohmann::json results = nlohmann::json::array();
  // Occurrences of the same fingerprint input are numbered, as GitHub does.
  std::map<std::string, int> occurrences;
  size_t count = 0;
  for (const auto& d : result.diagnostics) {
    if (count++ == kMaxResults) break;
    const RuleInfo* rule = catalogue.find(d.rule_id);
    std::string level = !rule ? "warning"
                        : rule->severity == Severity::Error ? "error"
                        : rule->severity == Severity::Note  ? "note"
                                                            : "warning";
    uint32_t start_col = utf16_column(d.source_line, d.start.column) + 1;
    nlohmann::json region = {{"startLine", d.start.line}, {"startColumn", start_col}};
    if (d.end.line == d.start.line) {
      region["endLine"] = d.end.line;
      region["endColumn"] = std::max(start_col + 1, utf16_column(d.source_line, d.end.column) + 1);
    } else {
      region["endLine"] = d.end.line;
    }
    std::string uri = relative_uri(d.path, options.srcroot);
    std::string basis = d.rule_id + "\n" + uri + "\n" + d.context + "\n" + normalized(d.source_line);
    int nth = ++occurrences[basis];
    std::string fingerprint = fmt::format("{:016x}:{}", XXH3_64bits(basis.data(), basis.size()), nth);
    nlohmann::json res = {
        {"ruleId", d.rule_id},
        {"level", level},
        {"message", {{"text", d.message}}},
        {"locations",
         {{{"physicalLocation",
            {{"artifactLocation", {{"uri", uri}, {"uriBaseId", "%SRCROOT%"}}}, {"region", region}}}}}},
        {"partialFingerprints", {{"torchleak/v1", fingerprint}}},
    };
    if (auto it = rule_index.find(d.rule_id); it != rule_index.end()) res["ruleIndex"] = it->second;
    results.push_back(std::move(res));
  }
  nlohmann::json run = {
      {"tool",
       {{"driver",
         {{"name", "torchleak"},
          {"semanticVersion", kVersion},
          {"version", kVersion},
          {"informationUri", std::string(kDocsBaseUrl).substr(0, std::string(kDocsBaseUrl).find("/blob/"))},
          {"rules", rules}}}}},
      {"automationDetails", {{"id", "torchleak/"}}},
      {"columnKind", "utf16CodeUnits"},
      {"originalUriBaseIds", {{"%SRCROOT%", {{"description", {{"text", "The repository root."}}}}}}},
      {"results", results},
  };
  nlohmann::json log = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", {run}},
  };
  return log.dump(2) + "\n";
}

}  // namespace torchleak::report
