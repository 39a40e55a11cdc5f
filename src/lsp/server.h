// `torchleak lsp`: a Language Server over stdio. It renders the engine's
// diagnostics for the editor and offers their fixes as code actions; it knows
// nothing of rules or frontends.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/diagnostic.h"

namespace torchleak::lsp {

// Splits a byte stream into LSP messages (Content-Length framing).
class Framer {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete message body, or nullopt when more bytes are needed.
  // A malformed header is reported through `error` and skipped.
  std::optional<std::string> next(std::string* error);

 private:
  std::string buffer_;
};

std::string frame(const nlohmann::json& message);

// A document's text with conversions between byte offsets and LSP positions
// (0-based lines, UTF-16 code units).
class Document {
 public:
  Document() = default;
  Document(std::string uri, std::string language, int version, std::string text);

  const std::string& uri() const { return uri_; }
  const std::string& text() const { return text_; }
  const std::string& language() const { return language_; }
  int version() const { return version_; }
  void set_version(int v) { version_ = v; }

  void replace_all(std::string text);
  // Applies an incremental change; returns false when the range is invalid.
  bool apply(const nlohmann::json& range, const std::string& text);

  nlohmann::json position_of(size_t byte) const;
  size_t offset_of(const nlohmann::json& position) const;

 private:
  void index_lines();
  std::string uri_, language_, text_;
  int version_ = 0;
  std::vector<size_t> line_starts_;
};

struct ServerOptions {
  std::chrono::milliseconds debounce{100};
};

class Server {
 public:
  explicit Server(ServerOptions options = {});
  // Runs on the given file descriptors until `exit`; returns the exit status.
  int serve(int in_fd, int out_fd);

  // Handles one message body; returns the messages to send. Exposed for tests
  // and the fuzzer.
  std::vector<nlohmann::json> handle(const std::string& body);
  // Runs a pending analysis if its debounce time has come (or `force`).
  std::vector<nlohmann::json> tick(bool force = false);
  bool exited() const { return exited_; }
  int exit_status() const { return shutdown_ ? 0 : 1; }
  std::optional<std::chrono::steady_clock::time_point> deadline() const { return pending_; }

 private:
  std::vector<nlohmann::json> dispatch(const nlohmann::json& msg);
  nlohmann::json initialize(const nlohmann::json& params);
  nlohmann::json code_actions(const nlohmann::json& params);
  std::vector<nlohmann::json> analyze();
  nlohmann::json to_lsp(const Diagnostic& d, const Document& doc) const;
  void schedule(std::chrono::milliseconds delay);

  // A notebook the editor synchronises (LSP 3.17 notebook documents): its
  // cells in order, each a kind (1 markdown, 2 code) and a cell document
  // kept in documents_.
  struct NotebookDocument {
    std::string uri;
    int version = 0;
    std::vector<std::pair<int, std::string>> cells;
  };
  std::vector<nlohmann::json> notebook_message(const std::string& method, const nlohmann::json& params);
  void open_cell(const nlohmann::json& item);
  std::vector<nlohmann::json> close_cells(const std::vector<std::string>& uris);

  ServerOptions options_;
  std::map<std::string, NotebookDocument> notebooks_;   // by URI
  std::string root_;  // workspace folder, absolute; empty when none
  std::string docs_lang_ = "en";  // the rule pages' language, from the client's locale
  std::map<std::string, Document> documents_;           // by URI
  std::map<std::string, std::vector<Diagnostic>> last_;  // by URI, for code actions
  std::set<std::string> config_errors_shown_;  // bad configuration files already reported
  Config default_config_;                        // for files whose configuration file is bad
  std::map<std::string, int> analyzed_version_;          // by URI
  std::optional<std::chrono::steady_clock::time_point> pending_;
  bool initialized_ = false;
  bool shutdown_ = false;
  bool exited_ = false;
};

// file:///a/b%20c.py -> /a/b c.py; "" for anything that is not a file URI.
std::string uri_to_path(const std::string& uri);

}  // namespace torchleak::lsp
