// SARIF 2.1.0 for code scanning: rule metadata from the catalogue, results
// with repository-relative URIs under %SRCROOT%, UTF-16 columns, full
// regions and content-derived fingerprints that survive moved lines.
#include <fmt/format.h>
#include <xxhash.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "report/report.h"
#include "version.h"

namespace torchleak::report {

namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxResults = 25000;      // GitHub code scanning's limit per run
constexpr size_t kMaxDescription = 1024;  // GitHub's limit for rule descriptions

// A relative URI reference: unreserved and sub-delimiter characters kept, the
// rest percent-encoded (':' too, which would read as a scheme).
std::string uri_reference(std::string_view path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || std::string_view("/-._~!$&'()*+,;=@").find(static_cast<char>(c)) != std::string_view::npos)
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

// Catalogue prose is wrapped at a fixed width; a SARIF viewer wraps text
// itself. Lines of a paragraph are joined, paragraphs and list items kept.
std::string unwrapped(std::string_view text) {
  std::string out;
  bool blank_before = true;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
      blank_before = true;
      continue;
    }
    bool item = line.rfind("- ", 0) == 0 || line.rfind("* ", 0) == 0;
    if (!out.empty()) out += blank_before ? "\n\n" : item ? "\n" : " ";
    out += line;
    blank_before = false;
  }
  return out;
}

std::string first_paragraph(const std::string& text) { return text.substr(0, text.find("\n\n")); }

// At most `max` bytes, cut after the last whole sentence that fits (or, if
// none does, at a character boundary with an ellipsis).
std::string clipped(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t sentence = s.rfind(". ", max - 1);
  if (sentence != std::string::npos && sentence > 0) return s.substr(0, sentence + 1);
  size_t cut = max - 3;  // room for "…" (3 bytes)
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\xE2\x80\xA6";
}

// SARIF messages are complete sentences.
std::string sentence(std::string s) {
  if (!s.empty() && s.back() != '.' && s.back() != '!' && s.back() != '?') s += '.';
  return s;
}

std::string level_of(Severity s) {
  return s == Severity::Error ? "error" : s == Severity::Note ? "note" : "warning";
}

Json rule_descriptor(const RuleInfo& r) {
  std::string why = unwrapped(r.why);
  std::string text = unwrapped(r.summary) + "\n\n" + why + "\n\nFix: " + unwrapped(r.fix);
  std::string level = level_of(r.severity);
  return {
      {"id", r.id},
      {"name", r.name},
      {"shortDescription", {{"text", clipped(unwrapped(r.summary), kMaxDescription)}}},
      {"fullDescription", {{"text", clipped(first_paragraph(why), kMaxDescription)}}},
      {"help", {{"text", text}, {"markdown", render_rule_markdown(r)}}},
      {"helpUri", std::string(kDocsBaseUrl) + r.doc_file()},
      {"defaultConfiguration", {{"level", level}}},
      {"properties",
       {{"precision", r.precision},
        {"problem.severity", r.severity == Severity::Note ? "recommendation" : level},
        {"tags", r.tags}}},
  };
}

// Lines and columns are 1-based; columns count UTF-16 code units (the run's
// columnKind); endColumn is exclusive and a region is never empty.
// A notebook's findings are placed in its JSON text, which is what code
// scanning shows of the file.
Json region(const Diagnostic& d) {
  FileRange r = file_range(d);
  uint32_t start_column = utf16_column(r.start_line, r.start.column) + 1;
  uint32_t end_column = utf16_column(r.end_line, r.end.column) + 1;
  if (r.end.line == r.start.line) end_column = std::max(end_column, start_column + 1);
  return {{"startLine", r.start.line},
          {"startColumn", start_column},
          {"endLine", std::max(r.end.line, r.start.line)},
          {"endColumn", end_column}};
}

Json location(const std::string& uri) {
  return {{"physicalLocation", {{"artifactLocation", {{"uri", uri}, {"uriBaseId", "%SRCROOT%"}}}}}};
}

// Files that could not be analyzed (errors) and caveats (notes), as the
// invocation's notifications.
Json invocation(const RunResult& result, const Options& options) {
  Json notifications = Json::array();
  auto add = [&](const FileError& e, const char* level) {
    notifications.push_back({{"level", level},
                             {"message", {{"text", sentence(e.message)}}},
                             {"locations", {location(uri_reference(repository_path(e.path, options.srcroot)))}}});
  };
  for (const auto& e : result.errors) add(e, "error");
  for (const auto& n : result.notes) add(n, "note");
  Json inv = {{"executionSuccessful", result.errors.empty()}};
  if (!notifications.empty()) inv["toolExecutionNotifications"] = notifications;
  return inv;
}

}  // namespace

std::string fingerprint_basis(const Diagnostic& d, const std::string& path) {
  std::string out = d.rule_id + "\n" + path + "\n" + d.context + "\n";
  for (char c : d.source_line)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

std::string render_sarif(const RunResult& result, const Options& options) {
  const Catalogue& catalogue = Catalogue::builtin();
  Json rules = Json::array();
  std::map<std::string, size_t> rule_index;
  for (const auto& r : catalogue.rules()) {
    rule_index[r.id] = rules.size();
    rules.push_back(rule_descriptor(r));
  }
  Json results = Json::array();
  // Identical fingerprint inputs are numbered in order, as GitHub does.
  std::map<std::string, int> occurrences;
  for (const auto& d : result.diagnostics) {
    if (results.size() == kMaxResults) break;
    const RuleInfo* rule = catalogue.find(d.rule_id);
    std::string uri = uri_reference(repository_path(d.path, options.srcroot));
    std::string basis = fingerprint_basis(d, uri);
    int nth = ++occurrences[basis];
    Json res = {{"ruleId", d.rule_id}};
    if (auto it = rule_index.find(d.rule_id); it != rule_index.end()) res["ruleIndex"] = it->second;
    res["level"] = level_of(rule ? rule->severity : Severity::Warning);
    res["message"] = {{"text", d.notebook.cell ? fmt::format("In {}: {}", cell_label(d), sentence(d.message))
                                               : sentence(d.message)}};
    Json loc = location(uri);
    loc["physicalLocation"]["region"] = region(d);
    res["locations"] = Json::array({loc});
    // The cell, and the position in it, as the notebook's reader sees them.
    if (d.notebook.cell)
      res["properties"] = {{"notebookCell", d.notebook.cell},
                           {"cellLine", d.notebook.start.line},
                           {"cellColumn", codepoint_column(d.source_line, d.notebook.start.column) + 1}};
    res["partialFingerprints"] = {
        {"primaryLocationLineHash", fmt::format("{:016x}:{}", XXH3_64bits(basis.data(), basis.size()), nth)}};
    results.push_back(std::move(res));
  }
  std::string docs(kDocsBaseUrl);
  Json run = {
      {"tool",
       {{"driver",
         {{"name", "torchleak"},
          {"version", kVersion},
          {"semanticVersion", kVersion},
          {"informationUri", docs.substr(0, docs.find("/blob/"))},
          {"rules", rules}}}}},
      {"invocations", Json::array({invocation(result, options)})},
      {"originalUriBaseIds", {{"%SRCROOT%", {{"description", {{"text", "The root of the repository analyzed."}}}}}}},
      {"columnKind", "utf16CodeUnits"},
      {"results", results},
  };
  Json log = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", Json::array({run})},
  };
  return log.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string merge_sarif_runs(const std::vector<std::string>& paths, const std::string& category) {
  Json merged;
  Json results = Json::array();
  Json notifications = Json::array();
  bool successful = true;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot read", path));
    Json log;
    try {
      log = Json::parse(in);
    } catch (const Json::exception& e) {
      throw std::runtime_error(fmt::format("{}: not JSON: {}", path, e.what()));
    }
    auto fail = [&](std::string_view why) {
      return std::runtime_error(fmt::format("{}: not a SARIF report of one torchleak run: {}", path, why));
    };
    if (!log.is_object() || log.value("version", "") != "2.1.0") throw fail("version is not 2.1.0");
    if (!log.contains("runs") || !log["runs"].is_array() || log["runs"].size() != 1) throw fail("not exactly one run");
    Json& run = log["runs"][0];
    if (!run.contains("tool") || run["tool"]["driver"].value("name", "") != "torchleak") throw fail("not torchleak's");
    if (merged.is_null()) {
      merged = log;
    } else if (run["tool"]["driver"].value("version", "") !=
               merged["runs"][0]["tool"]["driver"].value("version", "")) {
      throw fail("written by another version of torchleak than the first report");
    }
    if (run.contains("results"))
      for (auto& r : run["results"]) results.push_back(std::move(r));
    if (run.contains("invocations"))
      for (auto& inv : run["invocations"]) {
        successful = successful && inv.value("executionSuccessful", true);
        if (inv.contains("toolExecutionNotifications"))
          for (auto& n : inv["toolExecutionNotifications"]) notifications.push_back(std::move(n));
      }
  }
  if (merged.is_null()) throw std::runtime_error("no report to merge");
  if (results.size() > kMaxResults) results.erase(results.begin() + kMaxResults, results.end());
  Json& run = merged["runs"][0];
  Json invocation = {{"executionSuccessful", successful}};
  if (!notifications.empty()) invocation["toolExecutionNotifications"] = std::move(notifications);
  run["invocations"] = Json::array({invocation});
  run["results"] = std::move(results);
  if (!category.empty()) run["automationDetails"] = {{"id", category + "/"}};
  return merged.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace torchleak::report
