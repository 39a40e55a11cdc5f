#include "core/config_file.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "core/catalogue.h"

namespace fs = std::filesystem;

namespace torchleak {

namespace {

constexpr uint64_t kDefaultDeviceMemory = uint64_t{16} << 30;

std::string_view a_type(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

namespace {

// Reads one table of settings, naming the file and the key in every error.
class Reader {
 public:
  Reader(std::string path, std::string table) : path_(std::move(path)), table_(std::move(table)) {}

  [[noreturn]] void fail(const toml::node& at, std::string_view key, std::string_view what) const {
    fail(at.source(), key, what);
  }
  [[noreturn]] void fail(const toml::source_region& at, std::string_view key, std::string_view what) const {
    const auto& begin = at.begin;
    std::string where = begin.line ? fmt::format("{}:{}:{}", path_, begin.line, begin.column) : path_;
    throw ConfigError(fmt::format("{}: {}key '{}'{}{}", where, table_.empty() ? "" : table_ + " ", key,
                                  what.substr(0, 1) == ":" ? "" : " ", what));
  }

  std::vector<std::string> strings(const toml::node& n, std::string_view key) const {
    const toml::array* arr = n.as_array();
    if (!arr) fail(n, key, fmt::format("must be an array of strings, not {}", a_type(n)));
    std::vector<std::string> out;
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& item = *arr->get(i);
      auto s = item.value<std::string>();
      if (!s) fail(item, key, fmt::format("must be an array of strings, but item {} is {}", i + 1, a_type(item)));
      if (s->empty()) fail(item, key, fmt::format("must be an array of strings, but item {} is empty", i + 1));
      out.push_back(*s);
    }
    return out;
  }

  // Codes, names or prefixes, each naming at least one rule (as --select).
  std::vector<std::string> rules(const toml::node& n, std::string_view key) const {
    std::vector<std::string> out = strings(n, key);
    const Catalogue& catalogue = Catalogue::builtin();
    const toml::array& arr = *n.as_array();
    for (size_t i = 0; i < out.size(); ++i) {
      bool known = out[i] == "ALL" || std::any_of(catalogue.rules().begin(), catalogue.rules().end(),
                                                  [&](const RuleInfo& r) { return rule_listed(r, {out[i]}); });
      if (!known)
        fail(*arr.get(i), key,
             fmt::format("names no rule: '{}' (expected rule codes such as \"TL001\", prefixes such as \"TL0\", "
                         "names such as \"accumulate-undetached\", or \"ALL\")",
                         out[i]));
    }
    return out;
  }

  [[noreturn]] void unknown(const toml::key& key) const {
    std::string expected;
    std::string_view closest;
    size_t best = 3;
    for (auto k : config_keys()) {
      expected += fmt::format("{}{}", expected.empty() ? "" : ", ", k);
      size_t d = edit_distance(key.str(), k);
      if (d < best) {
        best = d;
        closest = k;
      }
    }
    std::string hint = closest.empty() ? "" : fmt::format("; did you mean '{}'?", closest);
    fail(key.source(), key.str(), fmt::format(": unknown key (expected one of: {}){}", expected, hint));
  }

  Config read(const toml::table& t) const {
    Config c;
    for (const auto& [k, node] : t) {
      std::string_view key = k.str();
      c.keys_set.emplace_back(key);
      if (key == "select") {
        c.select = rules(node, key);
      } else if (key == "extend-select") {
        c.extend_select = rules(node, key);
      } else if (key == "ignore" || key == "extend-ignore") {
        std::vector<std::string> r = rules(node, key);
        c.ignore.insert(c.ignore.end(), r.begin(), r.end());
      } else if (key == "extend") {
        auto s = node.value_exact<std::string>();
        if (!s || s->empty())
          fail(node, key, fmt::format("must be the path of another configuration file, not {}", a_type(node)));
        c.extend = *s;
      } else if (key == "exclude") {
        c.exclude = strings(node, key);
      } else if (key == "per-file-ignores") {
        const toml::table* pfi = node.as_table();
        if (!pfi)
          fail(node, key, fmt::format("must be a table of globs to arrays of rules (`\"tests/*\" = [\"TL001\"]`), not {}",
                                      a_type(node)));
        for (const auto& [glob, rules_node] : *pfi) {
          std::string entry = fmt::format("per-file-ignores.\"{}\"", glob.str());
          if (glob.str().empty()) fail(rules_node, entry, "must name a non-empty glob");
          c.per_file_ignores.push_back({std::string(glob.str()), rules(rules_node, entry)});
        }
      } else if (key == "target-torch-version") {
        auto s = node.value<std::string>();
        bool ok = s && !s->empty();
        if (ok) {
          size_t dot = s->find('.');
          auto digits = [](std::string_view d) {
            return !d.empty() && d.size() <= 4 &&
                   std::all_of(d.begin(), d.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
          };
          ok = dot != std::string::npos && digits(std::string_view(*s).substr(0, dot)) &&
               digits(std::string_view(*s).substr(dot + 1));
        }
        if (!ok)
          fail(node, key,
               s ? fmt::format("must be a version \"major.minor\" such as \"2.1\", not \"{}\"", *s)
                 : fmt::format("must be a string \"major.minor\" such as \"2.1\", not {}", a_type(node)));
        c.target_torch_version = *s;
      } else if (key == "oversized-layer-threshold" || key == "device-memory") {
        std::optional<uint64_t> bytes;
        if (auto i = node.value_exact<int64_t>()) {
          if (*i > 0) bytes = static_cast<uint64_t>(*i);
        } else if (auto s = node.value_exact<std::string>()) {
          bytes = parse_size(*s);
        }
        if (!bytes) {
          std::string got = node.is_string() ? fmt::format("\"{}\"", *node.value<std::string>())
                            : node.is_integer() ? fmt::format("{}", *node.value<int64_t>())
                                                : std::string(a_type(node));
          fail(node, key,
               fmt::format("must be a size in bytes: a positive integer or a string such as \"1GiB\" or \"512MiB\", "
                           "not {}",
                           got));
        }
        if (key == "device-memory") {
          c.device_memory_bytes = *bytes;
          if (!c.oversized_layer_set) c.oversized_layer_bytes = *bytes / 2;
        } else {
          c.oversized_layer_bytes = *bytes;
          c.oversized_layer_set = true;
        }
      } else if (key == "extra-models") {
        c.extra_models = strings(node, key);
      } else if (key == "extra-losses") {
        c.extra_losses = strings(node, key);
      } else if (key == "extra-optimizers") {
        c.extra_optimizers = strings(node, key);
      } else if (key == "extra-data-parallel") {
        c.extra_data_parallel = strings(node, key);
      } else if (key == "models") {
        c.model_files = strings(node, key);
      } else {
        unknown(k);
      }
    }
    return c;
  }

 private:
  std::string path_;
  std::string table_;  // "[tool.torchleak]" for pyproject.toml, "" otherwise
};

bool is_pyproject(const std::string& path) { return fs::path(path).filename() == "pyproject.toml"; }

// A glob of `exclude` matches a path relative to the configuration's
// directory, or the file's or directory's name; "dir/" and "dir/**" match
// everything under dir.
bool exclude_matches(const std::string& glob, const std::string& relative, const std::string& name) {
  if (fnmatch(glob.c_str(), relative.c_str(), 0) == 0 || fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
  std::string_view dir = glob;
  while (!dir.empty() && (dir.back() == '/' || dir.back() == '*')) dir.remove_suffix(1);
  if (dir.empty() || dir.size() == glob.size()) return false;
  std::string d(dir);
  return fnmatch(d.c_str(), relative.c_str(), 0) == 0 ||
         (relative.size() > d.size() && relative.compare(0, d.size() + 1, d + "/") == 0);
}

// The path as a user reads it: relative to the working directory when under it.
std::string display(const fs::path& absolute, const fs::path& cwd) {
  fs::path rel = absolute.lexically_relative(cwd);
  if (!rel.empty() && rel.native().rfind("..", 0) != 0) return rel.generic_string();
  return absolute.generic_string();
}

// Loads the configuration's model files (relative to `dir`) over the shipped models.
void attach_models(Config& c, const fs::path& dir) {
  if (c.model_files.empty()) return;
  std::vector<std::string> paths;
  for (const auto& f : c.model_files) {
    fs::path p(f);
    paths.push_back((p.is_absolute() ? p : dir / p).lexically_normal().string());
  }
  try {
    c.models = LibraryModels::with_files(paths);
  } catch (const ModelError& e) {
    throw ConfigError(fmt::format("{}: models: {}", c.source.empty() ? "the command line" : c.source, e.what()));
  }
}

}  // namespace

const std::vector<std::string_view>& config_keys() {
  static const std::vector<std::string_view> keys = {
      "extend",       "select",       "extend-select",    "ignore",             "extend-ignore",
      "exclude",      "per-file-ignores",   "target-torch-version",
      "device-memory", "oversized-layer-threshold", "extra-models", "extra-losses", "extra-optimizers",
      "extra-data-parallel", "models"};
  return keys;
}

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t number_start = i;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  size_t integer_end = i;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == integer_end + 1) return std::nullopt;  // "1." has no fraction
  }
  if (integer_end == number_start) return std::nullopt;
  std::string number(text.substr(number_start, i - number_start));
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])))
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i++])));
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) return std::nullopt;
  static const std::vector<std::pair<std::string_view, long double>> units = {
      {"", 1},           {"b", 1},
      {"kb", 1e3L},      {"mb", 1e6L},
      {"gb", 1e9L},      {"tb", 1e12L},
      {"kib", 1024.0L},  {"mib", 1024.0L * 1024},
      {"gib", 1024.0L * 1024 * 1024}, {"tib", 1024.0L * 1024 * 1024 * 1024}};
  auto u = std::find_if(units.begin(), units.end(), [&](const auto& p) { return p.first == unit; });
  if (u == units.end()) return std::nullopt;
  long double value = std::strtold(number.c_str(), nullptr) * u->second;
  if (!(value >= 1) || value > 1.8e19L) return std::nullopt;
  return static_cast<uint64_t>(std::floor(value));
}

std::optional<Config> parse_config(std::string_view text, const std::string& display_path) {
  toml::table doc;
  try {
    doc = toml::parse(text, display_path);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw ConfigError(fmt::format("{}:{}:{}: invalid TOML: {}", display_path, begin.line, begin.column, e.description()));
  }
  if (!is_pyproject(display_path)) return Reader(display_path, "").read(doc);
  const toml::node* tool = doc.get("tool");
  if (!tool) return std::nullopt;
  const toml::table* tool_table = tool->as_table();
  if (!tool_table) return std::nullopt;  // another tool's business, however odd
  const toml::node* mine = tool_table->get("torchleak");
  if (!mine) return std::nullopt;
  const toml::table* table = mine->as_table();
  if (!table) {
    const auto& begin = mine->source().begin;
    throw ConfigError(fmt::format("{}:{}:{}: [tool.torchleak] must be a table, not {}", display_path, begin.line,
                                  begin.column, a_type(*mine)));
  }
  return Reader(display_path, "[tool.torchleak]").read(*table);
}

void apply_keys(Config& to, const Config& from) {
  for (const std::string& key : from.keys_set) {
    if (key == "select") to.select = from.select;
    else if (key == "extend-select") to.extend_select.insert(to.extend_select.end(), from.extend_select.begin(),
                                                             from.extend_select.end());
    else if (key == "ignore" || key == "extend-ignore") {
      // below, once
    }    else if (key == "exclude") to.exclude = from.exclude;
    else if (key == "per-file-ignores") to.per_file_ignores = from.per_file_ignores;
    else if (key == "target-torch-version") to.target_torch_version = from.target_torch_version;
    else if (key == "device-memory") {
      to.device_memory_bytes = from.device_memory_bytes;
      if (!to.oversized_layer_set) to.oversized_layer_bytes = from.oversized_layer_bytes;
    } else if (key == "oversized-layer-threshold") {
      to.oversized_layer_bytes = from.oversized_layer_bytes;
      to.oversized_layer_set = true;
    } else if (key == "extra-models") to.extra_models = from.extra_models;
    else if (key == "extra-losses") to.extra_losses = from.extra_losses;
    else if (key == "extra-optimizers") to.extra_optimizers = from.extra_optimizers;
    else if (key == "extra-data-parallel") to.extra_data_parallel = from.extra_data_parallel;
    else if (key == "models") to.model_files = from.model_files;
    if (std::find(to.keys_set.begin(), to.keys_set.end(), key) == to.keys_set.end()) to.keys_set.push_back(key);
  }
  // `ignore` as written replaces, `extend-ignore` adds; both land in ignore.
  bool replaces = std::find(from.keys_set.begin(), from.keys_set.end(), "ignore") != from.keys_set.end();
  if (replaces) to.ignore = from.ignore;
  else to.ignore.insert(to.ignore.end(), from.ignore.begin(), from.ignore.end());
}

namespace {

// A configuration file and the ones it extends, the furthest first.
std::optional<Config> load_extending(const std::string& path, std::vector<std::string>& chain) {
  std::error_code ec;
  std::string absolute = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
  if (std::find(chain.begin(), chain.end(), absolute) != chain.end())
    throw ConfigError(fmt::format("{}: `extend` goes round in a circle back to this file", path));
  chain.push_back(absolute);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(fmt::format("{}: cannot read the configuration file: {}", path,
                                  errno ? std::strerror(errno) : "cannot open"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::optional<Config> own = parse_config(ss.str(), path);
  if (!own || own->extend.empty()) return own;
  fs::path dir = fs::path(path).parent_path();
  std::string base_path = (fs::path(own->extend).is_absolute() ? fs::path(own->extend) : dir / own->extend).string();
  std::optional<Config> base = load_extending(base_path, chain);
  if (!base) throw ConfigError(fmt::format("{}: `extend` names {}, which has no [tool.torchleak] table", path, own->extend));
  // The base's model files are relative to the base's directory.
  for (auto& m : base->model_files)
    if (!fs::path(m).is_absolute()) m = fs::relative(fs::absolute(fs::path(base_path).parent_path() / m, ec), fs::absolute(dir, ec), ec).string();
  Config out = std::move(*base);
  apply_keys(out, *own);
  out.extend.clear();
  return out;
}

}  // namespace

std::optional<Config> load_config_file(const std::string& path) {
  std::vector<std::string> chain;
  return load_extending(path, chain);
}

Config layer_command_line(Config file, const Config& cli) {
  Config out = std::move(file);
  if (!cli.select.empty()) {
    out.select = cli.select;
    out.extend_select = cli.extend_select;
    out.ignore = cli.ignore;
  } else {
    out.extend_select.insert(out.extend_select.end(), cli.extend_select.begin(), cli.extend_select.end());
    out.ignore.insert(out.ignore.end(), cli.ignore.begin(), cli.ignore.end());
  }
  if (!cli.target_torch_version.empty()) out.target_torch_version = cli.target_torch_version;
  if (cli.device_memory_bytes != kDefaultDeviceMemory) {
    out.device_memory_bytes = cli.device_memory_bytes;
    if (!out.oversized_layer_set) out.oversized_layer_bytes = cli.device_memory_bytes / 2;
  }
  if (cli.oversized_layer_set) {
    out.oversized_layer_bytes = cli.oversized_layer_bytes;
    out.oversized_layer_set = true;
  }
  auto add = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  add(out.extra_models, cli.extra_models);
  add(out.extra_losses, cli.extra_losses);
  add(out.extra_optimizers, cli.extra_optimizers);
  add(out.extra_data_parallel, cli.extra_data_parallel);
  add(out.model_files, cli.model_files);
  out.per_file_ignores.insert(out.per_file_ignores.end(), cli.per_file_ignores.begin(), cli.per_file_ignores.end());
  // C++: how sources are compiled (-p, --extra-arg, --extra-arg-before).
  if (!cli.cpp_database_dir.empty()) out.cpp_database_dir = cli.cpp_database_dir;
  add(out.cpp_extra_args, cli.cpp_extra_args);
  add(out.cpp_extra_args_before, cli.cpp_extra_args_before);
  if (!cli.cpp_cache_dir.empty()) out.cpp_cache_dir = cli.cpp_cache_dir;
  return out;
}

ConfigResolver::ConfigResolver(Config command_line, std::string config_file, bool discover, Config overrides)
    : command_line_(std::move(command_line)),
      overrides_(std::move(overrides)),
      config_file_(std::move(config_file)),
      discover_(discover) {
  std::error_code ec;
  cwd_ = fs::current_path(ec);
}

Config ConfigResolver::layered(Config file) const {
  Config c = layer_command_line(std::move(file), command_line_);
  apply_keys(c, overrides_);
  return c;
}

const Config& ConfigResolver::defaults() {
  if (!defaults_) {
    defaults_ = std::make_unique<Config>(layered(Config{}));
    defaults_->root = cwd_.string();
  }
  return *defaults_;
}

const Config& ConfigResolver::for_directory(const fs::path& directory) {
  if (!discover_) return defaults();
  if (!config_file_.empty()) {
    std::error_code ec;
    fs::path file = fs::absolute(config_file_, ec).lexically_normal();
    auto it = by_file_.find(file.string());
    if (it != by_file_.end()) return *it->second;
    std::optional<Config> parsed = load_config_file(config_file_);
    if (!parsed) throw ConfigError(fmt::format("{}: has no [tool.torchleak] table", config_file_));
    auto c = std::make_unique<Config>(layered(std::move(*parsed)));
    c->source = config_file_;
    c->root = cwd_.string();  // as ruff: --config's relative globs are relative to the working directory
    attach_models(*c, file.parent_path());
    return *(by_file_[file.string()] = std::move(c));
  }
  std::error_code ec;
  fs::path dir = fs::absolute(directory, ec).lexically_normal();
  if (!dir.empty() && dir != dir.root_path() && !dir.has_filename()) dir = dir.parent_path();  // "a/b/" -> "a/b"
  std::vector<std::string> visited;
  const Config* found = nullptr;
  for (fs::path d = dir;; d = d.parent_path()) {
    if (auto it = by_directory_.find(d.string()); it != by_directory_.end()) {
      found = it->second;
      break;
    }
    visited.push_back(d.string());
    // As ruff: the hidden file first, then the plain one, then pyproject.toml.
    for (const char* name : {".torchleak.toml", "torchleak.toml", "pyproject.toml"}) {
      fs::path candidate = d / name;
      if (!fs::is_regular_file(candidate, ec)) continue;
      std::string key = candidate.string();
      auto it = by_file_.find(key);
      if (it == by_file_.end()) {
        std::optional<Config> parsed = load_config_file(display(candidate, cwd_));
        std::unique_ptr<Config> c;
        if (parsed) {
          c = std::make_unique<Config>(layered(std::move(*parsed)));
          c->source = display(candidate, cwd_);
          c->root = d.string();
          attach_models(*c, d);
        }
        it = by_file_.emplace(key, std::move(c)).first;
      }
      if (it->second) {  // a pyproject.toml without [tool.torchleak] does not count
        found = it->second.get();
        break;
      }
    }
    if (found || d == d.root_path() || d.parent_path() == d || d.empty()) break;
  }
  if (!found) found = &defaults();
  for (const auto& v : visited) by_directory_[v] = found;
  return *found;
}

const Config& ConfigResolver::for_file(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec).lexically_normal();
  return for_directory(abs.parent_path());
}

bool ConfigResolver::excluded(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec).lexically_normal();
  if (!abs.has_filename()) abs = abs.parent_path();
  const Config& c = for_directory(abs.parent_path());
  if (c.exclude.empty()) return false;
  fs::path rel = abs.lexically_relative(c.root.empty() ? cwd_ : fs::path(c.root));
  std::string relative = rel.empty() || rel.native().rfind("..", 0) == 0 ? abs.generic_string() : rel.generic_string();
  std::string name = abs.filename().string();
  return std::any_of(c.exclude.begin(), c.exclude.end(),
                     [&](const std::string& g) { return exclude_matches(g, relative, name); });
}

}  // namespace torchleak
