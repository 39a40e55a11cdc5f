#include "lsp/server.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "core/analysis.h"
#include "core/catalogue.h"
#include "core/config_file.h"
#include "core/discovery.h"
#include "core/engine.h"
#include "core/fixer.h"
#include "core/notebook.h"
#include "version.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace torchleak::lsp {

namespace {

// JSON-RPC error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kServerNotInitialized = -32002;

json error_response(const json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

json result_response(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string normalized_path(const std::string& p) {
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  return (ec ? fs::path(p) : abs).lexically_normal().string();
}

bool is_python(const std::string& path) {
  return path.size() > 3 && (path.ends_with(".py") || path.ends_with(".pyi"));
}

}  // namespace

// ---------------------------------------------------------------------------
// Framing

std::optional<std::string> Framer::next(std::string* error) {
  while (true) {
    size_t header_end = buffer_.find("\r\n\r\n");
    if (header_end == std::string::npos) {
      // Bound what a peer can make us hold without a header terminator.
      if (buffer_.size() > (1u << 20) && buffer_.find("Content-Length") == std::string::npos) {
        if (error) *error = "discarded bytes without a Content-Length header";
        buffer_.clear();
      }
      return std::nullopt;
    }
    std::string headers = buffer_.substr(0, header_end);
    long long length = -1;
    std::istringstream in(headers);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      if (name == "content-length") {
        std::string value = line.substr(colon + 1);
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(value.c_str(), &end, 10);
        if (errno == 0 && end != value.c_str() && v >= 0 && v <= (1ll << 30)) length = v;
      }
    }
    if (length < 0) {
      if (error) *error = "message header without a valid Content-Length";
      buffer_.erase(0, header_end + 4);
      continue;
    }
    size_t total = header_end + 4 + static_cast<size_t>(length);
    if (buffer_.size() < total) return std::nullopt;
    std::string body = buffer_.substr(header_end + 4, static_cast<size_t>(length));
    buffer_.erase(0, total);
    return body;
  }
}

std::string frame(const json& message) {
  std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
  return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// ---------------------------------------------------------------------------
// Documents

Document::Document(std::string uri, std::string language, int version, std::string text)
    : uri_(std::move(uri)), language_(std::move(language)), text_(std::move(text)), version_(version) {
  index_lines();
}

void Document::index_lines() {
  line_starts_.assign(1, 0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

void Document::replace_all(std::string text) {
  text_ = std::move(text);
  index_lines();
}

json Document::position_of(size_t byte) const {
  byte = std::min(byte, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), byte);
  size_t line = static_cast<size_t>(it - line_starts_.begin()) - 1;
  size_t units = 0;
  for (size_t i = line_starts_[line]; i < byte; ++i) {
    unsigned char c = static_cast<unsigned char>(text_[i]);
    if ((c & 0xC0) == 0x80) continue;
    units += (c >> 3) == 0x1E ? 2 : 1;
  }
  return {{"line", line}, {"character", units}};
}

size_t Document::offset_of(const json& position) const {
  size_t line = position.at("line").get<size_t>();
  size_t character = position.at("character").get<size_t>();
  if (line >= line_starts_.size()) return text_.size();
  size_t i = line_starts_[line];
  size_t end = line + 1 < line_starts_.size() ? line_starts_[line + 1] - 1 : text_.size();
  if (end > i && end <= text_.size() && end > 0 && text_[end - 1] == '\r') --end;
  size_t units = 0;
  while (i < end && units < character) {
    unsigned char c = static_cast<unsigned char>(text_[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    units += len == 4 ? 2 : 1;
    i += len;
  }
  return std::min(i, end);
}

bool Document::apply(const json& range, const std::string& text) {
  size_t start = offset_of(range.at("start"));
  size_t end = offset_of(range.at("end"));
  if (end < start) return false;
  text_.replace(start, end - start, text);
  index_lines();
  return true;
}

std::string uri_to_path(const std::string& uri) {
  constexpr std::string_view scheme = "file://";
  if (uri.compare(0, scheme.size(), scheme) != 0) return {};
  std::string rest = uri.substr(scheme.size());
  // file://host/path: only an empty host or localhost is local.
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return {};
  std::string host = rest.substr(0, slash);
  if (!host.empty() && host != "localhost") return {};
  std::string out;
  for (size_t i = slash; i < rest.size(); ++i) {
    if (rest[i] == '%' && i + 2 < rest.size() && hex_value(rest[i + 1]) >= 0 && hex_value(rest[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(rest[i + 1]) * 16 + hex_value(rest[i + 2]));
      i += 2;
    } else {
      out += rest[i];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The server

Server::Server(ServerOptions options) : options_(options) {}

void Server::schedule(std::chrono::milliseconds delay) {
  auto when = std::chrono::steady_clock::now() + delay;
  if (!pending_ || when > *pending_) pending_ = when;
}

std::vector<json> Server::handle(const std::string& body) {
  json msg = json::parse(body, nullptr, false);
  if (msg.is_discarded()) return {error_response(nullptr, kParseError, "Parse error: the message is not JSON")};
  // `"jsonrpc": 2` is not the string "2.0" (json::value would throw on it).
  if (!msg.is_object() || !msg.contains("jsonrpc") || msg["jsonrpc"] != "2.0") {
    json id = msg.is_object() && msg.contains("id") ? msg["id"] : json(nullptr);
    return {error_response(id, kInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 object")};
  }
  try {
    return dispatch(msg);
  } catch (const json::exception& e) {
    if (msg.contains("id") && msg.contains("method"))
      return {error_response(msg["id"], kInvalidParams, std::string("Invalid params: ") + e.what())};
    std::cerr << "torchleak lsp: ignored a malformed notification: " << e.what() << "\n";
    return {};
  }
}

std::vector<json> Server::dispatch(const json& msg) {
  bool is_request = msg.contains("id");
  if (!msg.contains("method")) return {};  // a response to a request we never send
  const json& method_value = msg["method"];
  if (!method_value.is_string()) return {error_response(is_request ? msg["id"] : json(nullptr), kInvalidRequest, "Invalid Request: method must be a string")};
  std::string method = method_value.get<std::string>();
  const json params = msg.value("params", json::object());
  json id = is_request ? msg["id"] : json(nullptr);

  if (method == "exit") {
    exited_ = true;
    return {};
  }
  if (shutdown_ && is_request) return {error_response(id, kInvalidRequest, "the server is shutting down")};
  if (method == "initialize") {
    if (!is_request) return {};
    initialized_ = true;
    return {result_response(id, initialize(params))};
  }
  if (!initialized_) {
    if (is_request) return {error_response(id, kServerNotInitialized, "the server is not initialized")};
    return {};
  }
  if (method == "initialized") return {};
  if (method == "shutdown") {
    shutdown_ = true;
    return {result_response(id, nullptr)};
  }
  if (method == "textDocument/didOpen") {
    const json& td = params.at("textDocument");
    std::string uri = td.at("uri").get<std::string>();
    documents_[uri] = Document(uri, td.value("languageId", ""), td.value("version", 0), td.at("text").get<std::string>());
    schedule(std::chrono::milliseconds(0));
    return {};
  }
  if (method == "textDocument/didChange") {
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    auto it = documents_.find(uri);
    if (it == documents_.end()) return {};
    for (const auto& change : params.at("contentChanges")) {
      if (change.contains("range")) {
        if (!it->second.apply(change["range"], change.at("text").get<std::string>()))
          std::cerr << "torchleak lsp: ignored a change with an invalid range for " << uri << "\n";
      } else {
        it->second.replace_all(change.at("text").get<std::string>());
      }
    }
    it->second.set_version(params.at("textDocument").value("version", it->second.version() + 1));
    schedule(options_.debounce);
    return {};
  }
  if (method == "textDocument/didSave") {
    schedule(std::chrono::milliseconds(0));
    return {};
  }
  if (method == "textDocument/didClose") {
    std::string uri = params.at("textDocument").at("uri").get<std::string>();
    documents_.erase(uri);
    last_.erase(uri);
    analyzed_version_.erase(uri);
    // Clear what the editor shows for it.
    return {{{"jsonrpc", "2.0"},
             {"method", "textDocument/publishDiagnostics"},
             {"params", {{"uri", uri}, {"diagnostics", json::array()}}}}};
  }
  if (method.rfind("notebookDocument/", 0) == 0) return notebook_message(method, params);
  if (method == "textDocument/codeAction") return {result_response(id, code_actions(params))};
  if (method == "workspace/didChangeConfiguration" || method == "workspace/didChangeWatchedFiles") {
    schedule(std::chrono::milliseconds(0));
    return {};
  }
  if (is_request) {
    if (method.rfind("$/", 0) == 0) return {error_response(id, kMethodNotFound, "unsupported: " + method)};
    return {error_response(id, kMethodNotFound, "Method not found: " + method)};
  }
  return {};  // notifications we do not need ($/cancelRequest, $/setTrace, ...)
}

json Server::initialize(const json& params) {
  std::string root;
  if (params.contains("workspaceFolders") && params["workspaceFolders"].is_array() &&
      !params["workspaceFolders"].empty())
    root = uri_to_path(params["workspaceFolders"][0].value("uri", ""));
  if (root.empty() && params.contains("rootUri") && params["rootUri"].is_string())
    root = uri_to_path(params["rootUri"].get<std::string>());
  if (root.empty() && params.contains("rootPath") && params["rootPath"].is_string())
    root = params["rootPath"].get<std::string>();
  root_ = root.empty() ? "" : normalized_path(root);
  // The client's locale ("zh-cn") chooses the language of the rule pages the
  // diagnostics link to; TORCHLEAK_LANG when the client sends none.
  std::string locale = params.contains("locale") && params["locale"].is_string() ? params["locale"].get<std::string>() : "";
  if (locale.empty())
    if (const char* env = std::getenv("TORCHLEAK_LANG")) locale = env;
  docs_lang_ = locale.rfind("zh", 0) == 0 ? "zh" : "en";
  return {
      {"capabilities",
       {{"positionEncoding", "utf-16"},
        {"textDocumentSync", {{"openClose", true}, {"change", 2}, {"save", {{"includeText", false}}}}},
        {"codeActionProvider", {{"codeActionKinds", {"quickfix", "source.fixAll.torchleak"}}}},
        {"notebookDocumentSync",
         {{"notebookSelector", {{{"notebook", {{"notebookType", "jupyter-notebook"}}}, {"cells", {{{"language", "python"}}}}}}}}}}},
      {"serverInfo", {{"name", "torchleak"}, {"version", kVersion}}},
  };
}

void Server::open_cell(const json& item) {
  std::string uri = item.at("uri").get<std::string>();
  documents_[uri] = Document(uri, item.value("languageId", "python"), item.value("version", 0),
                             item.at("text").get<std::string>());
}

std::vector<json> Server::close_cells(const std::vector<std::string>& uris) {
  std::vector<json> out;
  for (const auto& uri : uris) {
    documents_.erase(uri);
    last_.erase(uri);
    analyzed_version_.erase(uri);
    out.push_back({{"jsonrpc", "2.0"},
                   {"method", "textDocument/publishDiagnostics"},
                   {"params", {{"uri", uri}, {"diagnostics", json::array()}}}});
  }
  return out;
}

// notebookDocument/didOpen, didChange, didSave, didClose: the notebook's cell
// list and its cells' texts; the analysis runs on the program the code cells
// make (core/notebook.h) and publishes each finding on its cell.
std::vector<json> Server::notebook_message(const std::string& method, const json& params) {
  const json& nd = params.at("notebookDocument");
  std::string uri = nd.at("uri").get<std::string>();
  if (method == "notebookDocument/didOpen") {
    NotebookDocument nb;
    nb.uri = uri;
    nb.version = nd.value("version", 0);
    for (const auto& c : nd.at("cells")) nb.cells.emplace_back(c.value("kind", 2), c.at("document").get<std::string>());
    for (const auto& item : params.value("cellTextDocuments", json::array())) open_cell(item);
    notebooks_[uri] = std::move(nb);
    schedule(std::chrono::milliseconds(0));
    return {};
  }
  auto it = notebooks_.find(uri);
  if (it == notebooks_.end()) return {};
  NotebookDocument& nb = it->second;
  if (method == "notebookDocument/didClose") {
    std::vector<std::string> cells;
    for (const auto& [kind, cell] : nb.cells) cells.push_back(cell);
    notebooks_.erase(it);
    return close_cells(cells);
  }
  if (method == "notebookDocument/didSave") {
    schedule(std::chrono::milliseconds(0));
    return {};
  }
  if (method != "notebookDocument/didChange") return {};
  nb.version = nd.value("version", nb.version + 1);
  std::vector<json> out;
  const json change = params.value("change", json::object());
  const json cells = change.value("cells", json::object());
  if (cells.contains("structure")) {
    const json& st = cells["structure"];
    const json& array = st.at("array");
    size_t start = std::min<size_t>(array.value("start", 0u), nb.cells.size());
    size_t count = std::min<size_t>(array.value("deleteCount", 0u), nb.cells.size() - start);
    std::vector<std::pair<int, std::string>> inserted;
    for (const auto& c : array.value("cells", json::array()))
      inserted.emplace_back(c.value("kind", 2), c.at("document").get<std::string>());
    nb.cells.erase(nb.cells.begin() + static_cast<std::ptrdiff_t>(start),
                   nb.cells.begin() + static_cast<std::ptrdiff_t>(start + count));
    nb.cells.insert(nb.cells.begin() + static_cast<std::ptrdiff_t>(start), inserted.begin(), inserted.end());
    for (const auto& item : st.value("didOpen", json::array())) open_cell(item);
    std::vector<std::string> closed;
    for (const auto& item : st.value("didClose", json::array())) closed.push_back(item.at("uri").get<std::string>());
    out = close_cells(closed);
  }
  for (const auto& c : cells.value("data", json::array())) {
    std::string cell = c.at("document").get<std::string>();
    for (auto& entry : nb.cells)
      if (entry.second == cell) entry.first = c.value("kind", entry.first);
  }
  for (const auto& tc : cells.value("textContent", json::array())) {
    std::string cell = tc.at("document").at("uri").get<std::string>();
    auto doc = documents_.find(cell);
    if (doc == documents_.end()) continue;
    for (const auto& ch : tc.at("changes")) {
      if (ch.contains("range")) doc->second.apply(ch["range"], ch.at("text").get<std::string>());
      else doc->second.replace_all(ch.at("text").get<std::string>());
    }
    doc->second.set_version(tc.at("document").value("version", doc->second.version() + 1));
  }
  schedule(options_.debounce);
  return out;
}

json Server::to_lsp(const Diagnostic& d, const Document& doc) const {
  const RuleInfo* rule = Catalogue::builtin().find(d.rule_id);
  int severity = !rule ? 2 : rule->severity == Severity::Error ? 1 : rule->severity == Severity::Note ? 3 : 2;
  json out = {
      {"range", {{"start", doc.position_of(d.start_byte)}, {"end", doc.position_of(d.end_byte)}}},
      {"severity", severity},
      {"code", d.rule_id},
      {"source", "torchleak"},
      {"message", d.message + (d.help.empty() ? "" : "\nhelp: " + d.help)},
  };
  if (rule) {
    std::string base(kDocsBaseUrl);  // .../docs/rules/
    if (docs_lang_ != "en" && base.size() > 6 && base.substr(base.size() - 6) == "rules/")
      base.insert(base.size() - 6, docs_lang_ + "/");
    out["codeDescription"] = {{"href", base + rule->doc_file()}};
  }
  return out;
}

std::vector<json> Server::analyze() {
  pending_.reset();
  if (documents_.empty()) return {};
  forget_project_roots();  // a torchleak.toml or a .git made since the last analysis counts
  // Open buffers take precedence over the files on disk; the rest of the
  // workspace is read from disk so cross-file facts count.
  std::map<std::string, std::string> path_to_uri;
  std::vector<SourceFile> files;
  std::set<std::string> seen;
  for (const auto& [uri, doc] : documents_) {
    std::string path = uri_to_path(uri);
    if (path.empty() || !frontend_for(path) || is_notebook_path(path)) continue;
    path = normalized_path(path);
    path_to_uri[path] = uri;
    files.push_back({path, doc.text()});
    seen.insert(path);
  }
  // Each open notebook as the nbformat text of its cells, analyzed as a
  // notebook file is; `notebook_of` finds it again by its path.
  std::map<std::string, const NotebookDocument*> notebook_of;
  size_t untitled = 0;
  for (const auto& [uri, nb] : notebooks_) {
    std::string path = uri_to_path(uri);
    if (path.empty() || !is_notebook_path(path))
      path = (root_.empty() ? std::string(".") : root_) + "/untitled-" + std::to_string(++untitled) + ".ipynb";
    path = normalized_path(path);
    json cells = json::array();
    for (const auto& [kind, cell] : nb.cells) {
      auto doc = documents_.find(cell);
      std::string text = doc == documents_.end() ? std::string() : doc->second.text();
      bool code = kind == 2 && doc != documents_.end() && doc->second.language() == "python";
      cells.push_back({{"cell_type", code ? "code" : "markdown"}, {"metadata", json::object()}, {"source", text}});
    }
    json content = {{"cells", cells},
                    {"metadata", {{"language_info", {{"name", "python"}}}}},
                    {"nbformat", 4},
                    {"nbformat_minor", 5}};
    files.push_back({path, content.dump(1, ' ', false, json::error_handler_t::replace)});
    notebook_of[path] = &nb;
    seen.insert(path);
  }
  if (files.empty()) return {};
  // Each file's settings: its nearest configuration file, as `torchleak
  // check` resolves them. A bad configuration file is shown to the user
  // (once per distinct message) and its files are analyzed with defaults.
  ConfigResolver resolver(Config{}, "", true);
  std::vector<json> out;
  auto config_for = [&](const std::string& path) -> const Config* {
    try {
      return &resolver.for_file(path);
    } catch (const ConfigError& e) {
      if (config_errors_shown_.insert(e.what()).second)
        out.push_back({{"jsonrpc", "2.0"},
                       {"method", "window/showMessage"},
                       {"params", {{"type", 1}, {"message", std::string("torchleak: ") + e.what()}}}});
      std::cerr << "torchleak lsp: " << e.what() << "\n";
      return &default_config_;
    }
  };
  std::vector<const Config*> configs;
  for (const auto& f : files) configs.push_back(config_for(f.path));
  // The rest of the workspace, read from disk: its Python files give their
  // facts (from the facts cache when current), as `torchleak check` reads a
  // named file's project.
  std::vector<std::string> context;
  std::vector<const Config*> context_configs;
  if (!root_.empty()) {
    DiscoveryOptions dopt;
    dopt.excluded_by_config = [&](const std::string& p) {
      try {
        return resolver.excluded(p);
      } catch (const ConfigError&) {
        return false;  // shown when the file's own settings are resolved
      }
    };
    DiscoveredFiles found = discover({root_}, dopt, [](const std::string& p) { return frontend_for(p) != nullptr; });
    for (const auto& p : found.files) {
      std::string path = normalized_path(p);
      const LanguageFrontend* frontend = frontend_for(path);
      if (seen.count(path) || !frontend || frontend->language() != "python") continue;
      context.push_back(path);
      context_configs.push_back(config_for(path));
    }
  }
  RunResult result = run_in_context(files, configs, context, context_configs, cache_root("", root_), 0);
  std::map<std::string, std::vector<Diagnostic>> by_uri;
  for (auto& d : result.diagnostics) {
    auto it = path_to_uri.find(d.path);
    if (it != path_to_uri.end()) {
      by_uri[it->second].push_back(std::move(d));
      continue;
    }
    // A notebook's finding, moved onto its cell: positions and fixes in the
    // cell's text.
    auto nb = notebook_of.find(d.path);
    if (nb == notebook_of.end() || d.notebook.cell == 0 || d.notebook.cell > nb->second->cells.size()) continue;
    const std::string& cell = nb->second->cells[d.notebook.cell - 1].second;
    auto doc = documents_.find(cell);
    if (doc == documents_.end()) continue;
    const std::string& text = doc->second.text();
    auto byte_of = [&](Position p) {
      size_t at = 0;
      for (uint32_t line = 1; line < p.line && at != std::string::npos; ++line) {
        at = text.find('\n', at);
        if (at != std::string::npos) ++at;
      }
      return at == std::string::npos ? text.size() : std::min(text.size(), at + p.column);
    };
    d.start_byte = static_cast<uint32_t>(byte_of(d.notebook.start));
    d.end_byte = static_cast<uint32_t>(byte_of(d.notebook.end));
    if (d.fix) d.fix->edits = d.notebook.edits;
    by_uri[cell].push_back(std::move(d));
  }
  for (const auto& e : result.errors) {
    if (path_to_uri.count(e.path)) std::cerr << "torchleak lsp: " << e.path << ": " << e.message << "\n";
  }
  std::set<std::string> cells;
  for (const auto& [path, nb] : notebook_of)
    for (const auto& [kind, cell] : nb->cells) cells.insert(cell);
  for (const auto& [uri, doc] : documents_) {
    if (!cells.count(uri) && !path_to_uri.count(normalized_path(uri_to_path(uri)))) continue;
    json diags = json::array();
    auto& list = by_uri[uri];
    for (const auto& d : list) diags.push_back(to_lsp(d, doc));
    last_[uri] = list;
    analyzed_version_[uri] = doc.version();
    out.push_back({{"jsonrpc", "2.0"},
                   {"method", "textDocument/publishDiagnostics"},
                   {"params", {{"uri", uri}, {"version", doc.version()}, {"diagnostics", diags}}}});
  }
  return out;
}

json Server::code_actions(const json& params) {
  std::string uri = params.at("textDocument").at("uri").get<std::string>();
  json actions = json::array();
  auto doc_it = documents_.find(uri);
  auto diag_it = last_.find(uri);
  if (doc_it == documents_.end() || diag_it == last_.end()) return actions;
  const Document& doc = doc_it->second;
  // Byte offsets are only valid for the text they were computed on.
  if (analyzed_version_[uri] != doc.version()) return actions;
  // The kinds asked for (context.only): a kind covers its sub-kinds
  // ("source" and "source.fixAll" cover "source.fixAll.torchleak").
  bool want_quickfix = true, want_fix_all = false;
  if (params.contains("context") && params["context"].contains("only") && params["context"]["only"].is_array()) {
    want_quickfix = false;
    for (const auto& k : params["context"]["only"]) {
      if (!k.is_string()) continue;
      std::string kind = k.get<std::string>();
      if (kind == "quickfix") want_quickfix = true;
      const std::string fix_all = "source.fixAll.torchleak";
      if (fix_all.rfind(kind, 0) == 0 && (kind.size() == fix_all.size() || fix_all[kind.size()] == '.'))
        want_fix_all = true;
    }
  }
  // source.fixAll.torchleak: every safe fix of the document in one edit
  // (fixes that overlap one already taken wait for the next request).
  if (want_fix_all) {
    json edits = json::array();
    std::vector<std::pair<uint32_t, uint32_t>> taken;
    for (const auto& d : diag_it->second) {
      if (!d.fix || d.fix->safety != FixSafety::Safe || d.fix->edits.empty()) continue;
      bool overlaps = false;
      for (const auto& e : d.fix->edits)
        for (const auto& [s, t] : taken)
          if (e.start_byte < t && s < e.end_byte + (e.start_byte == e.end_byte ? 1 : 0)) overlaps = true;
      if (overlaps) continue;
      for (const auto& e : d.fix->edits) {
        taken.emplace_back(e.start_byte, e.end_byte);
        edits.push_back({{"range", {{"start", doc.position_of(e.start_byte)}, {"end", doc.position_of(e.end_byte)}}},
                         {"newText", e.replacement}});
      }
    }
    if (!edits.empty())
      actions.push_back({{"title", "Fix all torchleak problems that have a safe fix"},
                         {"kind", "source.fixAll.torchleak"},
                         {"edit", {{"changes", {{uri, edits}}}}}});
  }
  if (!want_quickfix) return actions;
  size_t req_start = doc.offset_of(params.at("range").at("start"));
  size_t req_end = doc.offset_of(params.at("range").at("end"));
  bool python = is_python(uri_to_path(uri));
  for (const auto& d : diag_it->second) {
    if (d.end_byte < req_start || d.start_byte > req_end) continue;
    json lsp_diag = to_lsp(d, doc);
    if (d.fix) {
      json edits = json::array();
      for (const auto& e : d.fix->edits)
        edits.push_back({{"range", {{"start", doc.position_of(e.start_byte)}, {"end", doc.position_of(e.end_byte)}}},
                         {"newText", e.replacement}});
      actions.push_back({{"title", d.fix->title + " (" + d.rule_id + ")"},
                         {"kind", "quickfix"},
                         {"diagnostics", {lsp_diag}},
                         {"isPreferred", d.fix->safety == FixSafety::Safe},
                         {"edit", {{"changes", {{uri, edits}}}}}});
    }
    // Suppress on this line: extend a noqa list that ends it, or add one
    // (the edit --add-noqa writes).
    std::optional<Edit> suppress = suppression_edit(doc.text(), d.start_byte, {d.rule_id}, !python);
    if (!suppress) continue;
    json edit = {{"range", {{"start", doc.position_of(suppress->start_byte)}, {"end", doc.position_of(suppress->end_byte)}}},
                 {"newText", suppress->replacement}};
    actions.push_back({{"title", "Suppress " + d.rule_id + " on this line"},
                       {"kind", "quickfix"},
                       {"diagnostics", {lsp_diag}},
                       {"edit", {{"changes", {{uri, json::array({edit})}}}}}});
  }
  return actions;
}

std::vector<json> Server::tick(bool force) {
  if (!pending_) return {};
  if (!force && std::chrono::steady_clock::now() < *pending_) return {};
  return analyze();
}

int Server::serve(int in_fd, int out_fd) {
  Framer framer;
  auto send = [&](const json& m) {
    std::string bytes = frame(m);
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(out_fd, bytes.data() + off, bytes.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      off += static_cast<size_t>(n);
    }
    return true;
  };
  char buf[65536];
  bool eof = false;
  while (!exited_) {
    int timeout = -1;
    if (pending_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*pending_ - std::chrono::steady_clock::now());
      timeout = static_cast<int>(std::max<long long>(0, left.count()));
    }
    if (eof) {
      if (!pending_) break;
      timeout = std::max(timeout, 0);
    }
    pollfd pfd{in_fd, POLLIN, 0};
    int ready = eof ? 0 : ::poll(&pfd, 1, timeout);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0) {
      ssize_t n = ::read(in_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
      } else {
        framer.feed(std::string_view(buf, static_cast<size_t>(n)));
        std::string error;
        while (auto body = framer.next(&error)) {
          for (const auto& m : handle(*body)) send(m);
          if (exited_) break;
        }
        if (!error.empty()) {
          std::cerr << "torchleak lsp: " << error << "\n";
          send(error_response(nullptr, kParseError, "Parse error: " + error));
        }
      }
    }
    for (const auto& m : tick(eof)) send(m);
  }
  return exited_ ? exit_status() : 1;
}

}  // namespace torchleak::lsp
