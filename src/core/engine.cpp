#include "core/engine.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <unordered_set>

#include "core/config_file.h"
#include "core/discovery.h"
#include "core/analysis_cache.h"
#include "core/notebook.h"
#include "core/project_index.h"
#include "core/suppression.h"

namespace torchleak {

namespace fs = std::filesystem;

namespace {

bool any_frontend_handles(const std::string& path) { return frontend_for(path) != nullptr; }

// The offset of the first byte that is not valid UTF-8, or npos.
size_t invalid_utf8_offset(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    // Source is mostly ASCII: skip eight such bytes at a time.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return i;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

std::string_view line_containing(std::string_view text, size_t byte) {
  size_t pos = std::min(byte, text.size());
  size_t begin = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1);
  begin = begin == std::string_view::npos ? 0 : begin + 1;
  size_t end = std::min(text.find('\n', pos), text.size());
  std::string_view line = text.substr(begin, end - begin);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

namespace {

bool has_lone_cr(std::string_view text) {
  for (size_t i = text.find('\r'); i != std::string_view::npos; i = text.find('\r', i + 1))
    if (i + 1 == text.size() || text[i + 1] != '\n') return true;
  return false;
}

constexpr size_t kMaxCommentRun = 32768;

// The number of '\n' in `text`, by memchr (vectorized), not byte by byte.
size_t count_newlines(std::string_view text) {
  size_t n = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end && (p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p))))) {
    ++n;
    ++p;
  }
  return n;
}

// The longest run of lines that hold only a comment (blank lines do not end
// a run), or 0 when the file (of `newlines` line ends) cannot hold a run
// longer than kMaxCommentRun. The Python parser library (tree-sitter 0.20)
// corrupts its heap when about 65,000 comments follow one another with no
// token between them.
size_t longest_comment_run(std::string_view text, size_t newlines) {
  size_t run = 0, longest = 0;
  if (newlines + 1 <= kMaxCommentRun) return 0;  // most files
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    size_t first = text.find_first_not_of(" \t\r\f", pos);
    if (first < end && text[first] == '#') longest = std::max(longest, ++run);
    else if (first < end) run = 0;
    pos = end + 1;
  }
  return longest;
}

struct Slot {
  FileResult result;
  std::string skipped;  // not analyzed, by choice (too large): why
  size_t lines = 0;
  const Config* config = nullptr;  // the settings this file was analyzed with
  bool context = false;            // read for its facts only: another file of the project
  bool cached = false;             // ... and its facts came from the cache
  // A notebook: its cells and its text, to place the findings in cells.
  std::shared_ptr<const Notebook> notebook;
  std::string notebook_text;
  // The analysis cache (core/analysis_cache.h). `cacheable`: a Python file
  // on disk in a run with a cache, whose analysis is stored. `entry`: its
  // current entry (the file was not analyzed; its facts and findings come
  // from there). `findings`: the findings reported as they are, from the entry.
  bool cacheable = false;
  std::optional<AnalysisCache::Entry> entry;
  std::optional<CachedFindings> findings;
  std::optional<FileStamp> stamp;  // taken before the file was read
  uint64_t content = 0;            // the hash of the text analyzed
  std::vector<FileRead> reads;     // the files the analysis read through imports
  EncodedFacts encoded;            // the facts as entries hold them, with their digest
  bool depends_on_project = false; // the analysis deferred findings to the project's facts
  std::optional<CachedFindings> store_findings;  // a named file's findings, to be stored
};

void analyze_program(const SourceFile& file, const LanguageFrontend& frontend, const Config& config, Slot& slot);

void analyze_one(const SourceFile& file, const Config& config, Slot& slot) {
  slot.result.path = file.path;
  const LanguageFrontend* frontend = frontend_for(file.path);
  if (!frontend) {
    slot.result.error = "no analyzer for this kind of file";
    return;
  }
  if (std::string why = unreadable_reason(file.text); !why.empty()) {
    slot.result.error = why;
    return;
  }
  // A notebook: its code cells are the program analyzed.
  SourceFile program;
  if (is_notebook_path(file.path)) {
    std::string error, language;
    std::optional<Notebook> nb = read_notebook(file.text, error, language);
    if (!nb) {
      if (!language.empty()) slot.skipped = fmt::format("skipped: a notebook in {}, not Python", language);
      else slot.result.error = "not a valid notebook: " + error;
      return;
    }
    program.path = file.path;
    program.text = nb->program;
    slot.notebook_text = file.text;
    slot.notebook = std::make_shared<const Notebook>(std::move(*nb));
    analyze_program(program, *frontend, config, slot);
    return;
  }
  analyze_program(file, *frontend, config, slot);
}

// Places each finding of a notebook in its cell.
void place_in_cells(const Notebook& nb, std::string_view text, std::vector<Diagnostic>& found) {
  for (auto& d : found) {
    NotebookPosition a = locate(nb, text, d.start_byte);
    NotebookPosition b = locate(nb, text, d.end_byte);
    CellLocation& c = d.notebook;
    c.cell = a.cell;
    c.start = a.in_cell;
    c.end = b.cell == a.cell ? b.in_cell : a.in_cell;
    c.file_start = a.in_file;
    c.file_end = b.cell == a.cell ? b.in_file : a.in_file;
    c.file_start_line = a.file_line;
    c.file_end_line = b.cell == a.cell ? b.file_line : a.file_line;
    c.edits.clear();
    if (d.fix)
      for (const auto& e : d.fix->edits)
        if (auto ce = cell_edit(nb, e); ce && ce->cell == c.cell) c.edits.push_back(ce->edit);
  }
}

void analyze_program(const SourceFile& file, const LanguageFrontend& frontend_ref, const Config& config,
                     Slot& slot) {
  const LanguageFrontend* frontend = &frontend_ref;
  // A UTF-8 byte order mark is not part of the program: analyze what follows
  // it and shift byte offsets back so fixes land in the right place.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  bool bom = std::string_view(file.text).substr(0, 3) == kBom;
  SourceFile stripped;
  const SourceFile* input = &file;
  if (bom) {
    stripped.path = file.path;
    stripped.text = file.text.substr(3);
    input = &stripped;
  }
  // A lone carriage return ends a line for Python (old Mac line ends); the
  // parser only knows \n. Replacing it keeps every byte offset, so positions,
  // excerpts and fixes stay those of the file.
  SourceFile lf;
  if (has_lone_cr(input->text)) {
    lf.path = input->path;
    lf.text = input->text;
    for (size_t i = 0; i < lf.text.size(); ++i)
      if (lf.text[i] == '\r' && (i + 1 == lf.text.size() || lf.text[i + 1] != '\n')) lf.text[i] = '\n';
    input = &lf;
  }
  size_t newlines = count_newlines(input->text);
  slot.lines = newlines +
               (input->text.empty() || input->text.back() == '\n' ? 0 : 1);
  if (frontend->language() == "python") {
    if (size_t run = longest_comment_run(input->text, newlines); run > kMaxCommentRun) {
      slot.result.error = fmt::format("{} comment lines in a row, more than the parser handles safely ({})", run,
                                      kMaxCommentRun);
      return;
    }
  }
  try {
    frontend->analyze(*input, config, slot.result);
  } catch (const std::exception& e) {
    slot.result.diagnostics.clear();
    slot.result.deferred.clear();
    slot.result.error = std::string("internal error while analyzing: ") + e.what();
    return;
  }
  // Reporters convert the end column of a multi-line range with its own line.
  auto complete = [&](Diagnostic& d) {
    if (d.end.line != d.start.line && d.end_source_line.empty())
      d.end_source_line = std::string(line_containing(input->text, d.end_byte));
  };
  for (auto& d : slot.result.diagnostics) complete(d);
  for (auto& d : slot.result.deferred) complete(d.diagnostic);
  if (bom) {
    auto shift = [](Diagnostic& d) {
      d.start_byte += 3;
      d.end_byte += 3;
      if (d.fix)
        for (auto& e : d.fix->edits) {
          e.start_byte += 3;
          e.end_byte += 3;
        }
    };
    for (auto& d : slot.result.diagnostics) shift(d);
    for (auto& d : slot.result.deferred) shift(d.diagnostic);
    for (auto& c : slot.result.comments) {
      for (uint32_t* b : {&c.start_byte, &c.end_byte, &c.remove_start, &c.remove_end}) *b += 3;
    }
  }
}

unsigned effective_jobs(unsigned jobs) {
  if (jobs) return jobs;
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

// The findings of one file that its configuration and its suppression
// comments let through, with unused suppressions (TL100) when asked for.
void filter_file(Slot& s, std::vector<Diagnostic>& found, bool report_unused, RunResult& out) {
  const Catalogue& catalogue = Catalogue::builtin();
  const Config& config = *s.config;
  const std::string& path = s.result.path;
  auto applies = [&](const RuleInfo& rule) { return !config.rule_ignored_for(rule, path); };
  std::erase_if(found, [&](const Diagnostic& d) {
    const RuleInfo* rule = catalogue.find(d.rule_id);
    return !rule || !config.rule_enabled(*rule) || !applies(*rule);
  });
  if (s.result.comments.empty()) return;
  FileSuppressions suppressions(std::move(s.result.comments), s.result.first_statement_line, catalogue);
  for (const auto& n : suppressions.notes()) out.notes.push_back({path, n});
  if (suppressions.skip_file()) {
    found.clear();
    return;
  }
  std::erase_if(found, [&](const Diagnostic& d) { return suppressions.suppresses(d, *catalogue.find(d.rule_id)); });
  const RuleInfo* unused_rule = catalogue.find("TL100");
  if (!report_unused || !unused_rule || rule_listed(*unused_rule, config.ignore) || !applies(*unused_rule)) return;
  const auto& ran = s.result.rules_run;
  auto judged = [&](const RuleInfo& rule) {
    return applies(rule) && std::find(ran.begin(), ran.end(), rule.id) != ran.end();
  };
  for (auto& d : suppressions.unused(*unused_rule, path, judged))
    if (!suppressions.suppresses(d, *unused_rule)) found.push_back(std::move(d));
}

// What, besides the entry's name, changes a named file's findings: how it
// was named (paths are reported as given) and whether unused suppressions
// are reported.
std::string circumstances(const std::string& path, bool report_unused) {
  return path + (report_unused ? "\n+unused" : "\n");
}

// Second phase: facts into the index, deferred findings resolved, filters.
// A slot with findings from the cache reports them as they are; a cacheable
// slot analyzed now keeps its findings to be stored, with `project` (the
// digest of the project's facts) when they depended on it.
RunResult finish(std::vector<Slot>& slots, bool report_unused, std::vector<Fact> given = {},
                 bool keep_facts = false, uint64_t project = 0) {
  RunResult out;
  ProjectIndex index;
  if (keep_facts)
    for (const auto& s : slots)
      if (!s.context) out.facts.insert(out.facts.end(), s.result.facts.begin(), s.result.facts.end());
  for (auto& s : slots) {
    index.add_all(std::move(s.result.facts));
    if (s.notebook) {
      std::vector<std::pair<uint32_t, uint32_t>> cells;
      for (const auto& c : s.notebook->cells) cells.emplace_back(c.number, c.first_line);
      index.add_notebook_cells(s.result.path, std::move(cells));
    }
  }
  index.add_all(std::move(given));
  index.finalize();
  for (auto& s : slots) {
    if (s.context) {
      out.context_files += s.result.error || !s.skipped.empty() ? 0 : 1;
      out.cached_files += s.cached ? 1 : 0;
      continue;
    }
    if (!s.skipped.empty()) {
      out.notes.push_back({s.result.path, s.skipped});
      continue;
    }
    if (s.result.error) {
      out.errors.push_back({s.result.path, *s.result.error});
      continue;
    }
    ++out.files_analyzed;
    if (s.findings) {
      ++out.cached_findings;
      out.lines_analyzed += s.findings->lines;
      for (auto& n : s.findings->notes) out.notes.push_back({s.result.path, std::move(n)});
      for (auto& d : s.findings->diagnostics) out.diagnostics.push_back(std::move(d));
      continue;
    }
    out.lines_analyzed += s.lines;
    size_t notes_before = out.notes.size();
    for (auto& n : s.result.notes) out.notes.push_back({s.result.path, n});
    std::vector<Diagnostic> found = std::move(s.result.diagnostics);
    for (auto& dd : s.result.deferred) {
      if (dd.resolve(index, dd.diagnostic)) found.push_back(std::move(dd.diagnostic));
    }
    filter_file(s, found, report_unused, out);
    if (s.notebook) place_in_cells(*s.notebook, s.notebook_text, found);
    if (s.cacheable) {
      CachedFindings kept;
      kept.project = s.depends_on_project ? project : 0;
      kept.circumstances = circumstances(s.result.path, report_unused);
      kept.lines = static_cast<uint32_t>(s.lines);
      for (size_t i = notes_before; i < out.notes.size(); ++i) kept.notes.push_back(out.notes[i].message);
      kept.diagnostics = found;
      s.store_findings = std::move(kept);
    }
    for (auto& d : found) out.diagnostics.push_back(std::move(d));
  }
  std::sort(out.diagnostics.begin(), out.diagnostics.end(), diagnostic_less);
  out.diagnostics.erase(std::unique(out.diagnostics.begin(), out.diagnostics.end(),
                                    [](const Diagnostic& a, const Diagnostic& b) {
                                      return a.path == b.path && a.start == b.start && a.rule_id == b.rule_id;
                                    }),
                        out.diagnostics.end());
  std::sort(out.errors.begin(), out.errors.end(),
            [](const FileError& a, const FileError& b) { return a.path < b.path; });
  return out;
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20));
  if (bytes >= (1u << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1u << 10));
  return fmt::format("{} bytes", bytes);
}

enum class ReadStatus { Ok, Failed, TooLarge };

// Reads a whole file. Opened without blocking and checked after opening (it
// may have changed since discovery): a FIFO or a device is never read, so
// the run cannot hang on one, and a file above `max_size` is not read at all.
ReadStatus read_file(const std::string& path, uint64_t max_size, std::string& text, std::string& why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    why = errno == ENOENT ? "no such file or directory" : fmt::format("cannot open: {}", std::strerror(errno));
    return ReadStatus::Failed;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = fmt::format("cannot read: {}", std::strerror(errno));
    return ReadStatus::Failed;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return ReadStatus::Failed;
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (max_size && size > max_size) {
    why = fmt::format("skipped: too large ({}; --max-file-size is {})", size_text(size), size_text(max_size));
    return ReadStatus::TooLarge;
  }
  text.clear();
  text.reserve(size);
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      why = fmt::format("read error: {}", std::strerror(errno));
      return ReadStatus::Failed;
    }
    text.append(buffer, static_cast<size_t>(n));
    // The file grew while being read: the limit still holds.
    if (max_size && text.size() > max_size) {
      why = fmt::format("skipped: too large (more than {}; --max-file-size is {})", size_text(max_size),
                        size_text(max_size));
      return ReadStatus::TooLarge;
    }
  }
  return ReadStatus::Ok;
}

// Whether the analysis of a file can be kept in the analysis cache: a Python
// source (a notebook's findings are placed in its cells, and its facts in
// the index with them: it is analyzed every time).
bool cacheable_language(const std::string& path) {
  const LanguageFrontend* f = frontend_for(path);
  return f && f->language() == "python" && !is_notebook_path(path);
}

// Analyzes `file` into `slot` (first phase), remembering what the analysis
// cache stores: the files it read, whether it deferred findings, its facts
// encoded (when `encode`).
void analyze_fresh(const SourceFile& file, Slot& slot, bool encode) {
  FileReads reads;
  analyze_one(file, *slot.config, slot);
  slot.reads = reads.files();
  slot.content = content_hash(file.text);
  slot.depends_on_project = !slot.result.deferred.empty();
  if (encode) slot.encoded = encode_facts(slot.result.facts);
}

// Reads the file of `slot` into `text`: false (and the slot says why) when
// it cannot be read or is skipped.
bool read_into(const std::string& path, uint64_t max_size, Slot& slot, std::string& text) {
  std::string why;
  switch (read_file(path, max_size, text, why)) {
    case ReadStatus::Ok: return true;
    case ReadStatus::Failed:
      slot.result.path = path;
      slot.result.error = why;
      return false;
    case ReadStatus::TooLarge:
      slot.result.path = path;
      slot.skipped = why;
      return false;
  }
  return false;
}

// First phase for one file on disk, with the analysis cache: a current entry
// stands for the analysis (the file is not even read when its stamp says it
// is unchanged); otherwise the file is analyzed.
void analyze_on_disk(const std::string& path, uint64_t max_size, const AnalysisCache& cache, Slot& slot) {
  slot.result.path = path;
  slot.cacheable = !cache.dir().empty() && cacheable_language(path);
  SourceFile file{path, {}};
  std::optional<bool> read;
  auto text = [&]() -> const std::string* {
    if (!read) read = read_into(path, max_size, slot, file.text);
    return *read ? &file.text : nullptr;
  };
  if (slot.cacheable) {
    slot.stamp = stamp_of(path);
    // A file now above the size limit is read (and skipped) as without a cache.
    bool within = !slot.stamp || !max_size || slot.stamp->size <= max_size;
    if (auto entry = within ? cache.load(path, slot.stamp, text, *slot.config) : std::nullopt) {
      slot.entry = std::move(entry);
      slot.encoded.digest = slot.entry->facts_digest();
      slot.cached = slot.context;
      return;
    }
  }
  if (!text()) return;
  analyze_fresh(file, slot, !cache.dir().empty());
}

// The digest of everything the second phase reads: each file's path and
// facts (and a notebook's cells), the facts given by other shards.
uint64_t project_digest(const std::vector<Slot>& slots, const std::vector<Fact>& given) {
  std::vector<const Slot*> order;
  for (const auto& s : slots)
    if (!s.result.error && s.skipped.empty()) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const Slot* a, const Slot* b) { return a->result.path < b->result.path; });
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  auto add = [&](const void* data, size_t size) { XXH3_64bits_update(state, data, size); };
  auto add_text = [&](std::string_view text) {
    uint64_t n = text.size();
    add(&n, sizeof n);
    add(text.data(), text.size());
  };
  for (const Slot* s : order) {
    add_text(s->result.path);
    add(&s->encoded.digest, sizeof s->encoded.digest);
    if (s->notebook)
      for (const auto& c : s->notebook->cells) {
        add(&c.number, sizeof c.number);
        add(&c.first_line, sizeof c.first_line);
      }
  }
  for (const Fact& f : given) {
    for (std::string_view part : {std::string_view(f.kind), std::string_view(f.key), std::string_view(f.file)})
      add_text(part);
    add(&f.line, sizeof f.line);
    for (const auto& v : f.values) add_text(v);
  }
  uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return digest;
}

// The Python files of the projects the targets belong to that are not
// targets themselves: read for the facts they give (a helper file's
// zero_grad, a wrap in DataParallel in another script). None when no target
// is Python (a notebook is analyzed as Python).
std::vector<std::string> context_files(const std::vector<std::string>& targets, const std::vector<std::string>& named,
                                       const std::string& given_root, const DiscoveryOptions& dopt,
                                       std::string& first_root) {
  std::set<std::string> roots;
  if (!given_root.empty()) {
    roots.insert(given_root);
  } else {
    for (const std::string& t : targets)
      if (std::string r = find_project_root(t); !r.empty()) roots.insert(r);
  }
  if (roots.empty()) return {};
  first_root = *roots.begin();
  // A root named itself, or under a named directory: its files are all
  // named (unless --exclude globs, which match paths as spelled, left some
  // of them out of the named walk).
  std::vector<std::string> named_dirs;
  if (dopt.exclude.empty()) {
    for (const std::string& t : named) {
      std::error_code ec;
      if (fs::is_directory(t, ec)) named_dirs.push_back(normal_absolute(t));
    }
  }
  std::erase_if(roots, [&](const std::string& root) {
    std::string r = normal_absolute(root);
    return std::any_of(named_dirs.begin(), named_dirs.end(), [&](const std::string& d) {
      return r == d || (r.size() > d.size() && r.compare(0, d.size(), d) == 0 && (d.back() == '/' || r[d.size()] == '/'));
    });
  });
  if (roots.empty()) return {};
  // Only Python findings read other files' facts: a run over C++ sources
  // alone reads no context.
  bool python_target = std::any_of(targets.begin(), targets.end(), [](const std::string& t) {
    const LanguageFrontend* f = frontend_for(t);
    return f && f->language() == "python";
  });
  if (!python_target) return {};
  std::unordered_set<std::string> targeted;
  for (const std::string& t : targets) targeted.insert(normal_absolute(t));
  static bool (*const handles)(const std::string&) = [](const std::string& path) {
    const LanguageFrontend* f = frontend_for(path);
    return f && f->language() == "python" && !is_notebook_path(path);  // a notebook is imported by none
  };
  DiscoveredFiles all = discover(std::vector<std::string>(roots.begin(), roots.end()), dopt, handles);
  std::vector<std::string> out;
  for (const std::string& f : all.files)
    if (!targeted.count(normal_absolute(f))) out.push_back(f);
  return out;
}

}  // namespace

void parallel_for(size_t n, unsigned jobs, const std::function<void(size_t)>& work,
                  const std::atomic<bool>* cancel) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      if (cancel && cancel->load()) return;
      work(i);
    }
  };
  jobs = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(n)));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

std::string unreadable_reason(std::string_view bytes) {
  if (bytes.find('\0') != std::string_view::npos) return "binary file (contains NUL bytes), not source text";
  size_t bad = invalid_utf8_offset(bytes);
  if (bad != std::string_view::npos) {
    size_t line = 1 + static_cast<size_t>(std::count(bytes.begin(), bytes.begin() + bad, '\n'));
    size_t begin = bad == 0 ? std::string_view::npos : bytes.rfind('\n', bad - 1);
    begin = begin == std::string_view::npos ? 0 : begin + 1;
    // What precedes the bad byte is valid UTF-8: count its code points.
    size_t column = 1 + static_cast<size_t>(std::count_if(bytes.begin() + begin, bytes.begin() + bad, [](char c) {
                      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
                    }));
    return fmt::format("not valid UTF-8: byte 0x{:02X} at line {}, column {} (source files are read as UTF-8)",
                       static_cast<unsigned char>(bytes[bad]), line, column);
  }
  return {};
}

RunResult run(const RunOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  // Each file's settings: its nearest configuration file under the command
  // line's. Resolved here, before the parallel phase, which only reads them.
  ConfigResolver configs(options.config, options.config_file, options.use_config_files, options.config_overrides);
  std::string fatal;
  DiscoveryOptions dopt;
  dopt.exclude = options.config.exclude;
  dopt.respect_gitignore = options.respect_gitignore;
  dopt.excluded_by_config = [&](const std::string& path) {
    try {
      return fatal.empty() && configs.excluded(path);
    } catch (const ConfigError& e) {
      fatal = e.what();
      return false;
    }
  };
  // A path with a buffer and no file (the standard input's) is taken as given.
  std::vector<std::string> on_disk, buffers;
  for (const std::string& p : options.paths) {
    std::error_code ec;
    bool buffer = options.overlays.count(p) && !std::filesystem::exists(p, ec);
    (buffer ? buffers : on_disk).push_back(p);
  }
  DiscoveredFiles found = on_disk.empty() ? DiscoveredFiles{} : discover(on_disk, dopt, any_frontend_handles);
  for (const std::string& p : buffers) {
    if (any_frontend_handles(p)) found.files.push_back(p);
    else found.errors.emplace_back(p, "not a Python or C++ source file");
  }
  size_t targets = found.files.size();
  if (options.list_only) {
    RunResult out;
    out.files = found.files;
    for (auto& [path, why] : found.errors) out.errors.push_back({path, why});
    try {
      if (!found.files.empty()) out.first_config = configs.for_file(found.files.front());
      for (const std::string& f : found.files) out.settings_sources.push_back(configs.for_file(f).source);
    } catch (const ConfigError& e) {
      out.fatal = e.what();
    }
    if (!fatal.empty()) out.fatal = fatal;
    return out;
  }
  std::vector<std::string> files = found.files;
  std::string root;
  // Other shards' facts stand for the rest of the project (not the named files' own).
  std::vector<Fact> given;
  if (!options.facts_files.empty()) {
    std::unordered_set<std::string> named;
    for (const std::string& f : found.files) named.insert(normal_absolute(f));
    try {
      for (const std::string& ff : options.facts_files)
        for (Fact& f : read_facts_file(ff))
          if (!named.count(normal_absolute(f.file))) given.push_back(std::move(f));
    } catch (const std::exception& e) {
      RunResult out;
      out.fatal = e.what();
      return out;
    }
  }
  if (options.project_context && options.facts_files.empty() && !files.empty()) {
    for (const std::string& f : context_files(found.files, on_disk, options.project_root, dopt, root)) files.push_back(f);
  }
  std::string cache_dir = options.use_cache ? cache_root(options.cache_dir, root) : std::string();
  AnalysisCache cache(cache_dir);
  std::vector<Slot> slots(files.size());
  for (size_t i = 0; i < slots.size() && fatal.empty(); ++i) {
    slots[i].context = i >= targets;
    try {
      slots[i].config = &configs.for_file(files[i]);
    } catch (const ConfigError& e) {
      fatal = e.what();
    }
  }
  if (!fatal.empty()) {
    RunResult out;
    out.fatal = std::move(fatal);
    return out;
  }
  unsigned jobs = effective_jobs(options.jobs);
  bool caching = !cache.dir().empty();
  // First phase: each file analyzed, or its current cache entry taken.
  parallel_for(files.size(), jobs, [&](size_t i) {
    const std::string& path = files[i];
    if (auto ov = options.overlays.find(path); ov != options.overlays.end()) {
      analyze_fresh(SourceFile{path, ov->second}, slots[i], caching);
      return;
    }
    analyze_on_disk(path, options.max_file_size, cache, slots[i]);
  }, options.cancel);
  bool cancelled = options.cancel && options.cancel->load();
  // The named files whose findings the cache holds for this project as it
  // is now are reported from it; the others are analyzed (again), and then
  // every file's facts are needed to resolve their deferred findings.
  uint64_t project = caching ? project_digest(slots, given) : 0;
  std::vector<size_t> again;
  bool resolve = false;
  for (size_t i = 0; i < targets && !cancelled; ++i) {
    Slot& s = slots[i];
    if (!s.entry) {
      resolve = resolve || s.depends_on_project;
      continue;
    }
    std::optional<CachedFindings> f = s.entry->findings();
    if (f && f->circumstances == circumstances(s.result.path, options.report_unused_suppressions) &&
        (f->project == 0 || f->project == project)) {
      s.findings = std::move(f);
    } else {
      again.push_back(i);
      resolve = true;
    }
  }
  parallel_for(again.size(), jobs, [&](size_t k) {
    Slot& s = slots[again[k]];
    SourceFile file{s.result.path, {}};
    s.stamp = stamp_of(file.path);
    if (!read_into(file.path, options.max_file_size, s, file.text)) return;
    s.entry.reset();
    analyze_fresh(file, s, true);
  }, options.cancel);
  if (resolve || options.keep_facts) {
    parallel_for(slots.size(), jobs, [&](size_t i) {
      if (slots[i].entry) slots[i].result.facts = slots[i].entry->facts();
    }, options.cancel);
  }
  RunResult out = finish(slots, options.report_unused_suppressions, std::move(given), options.keep_facts, project);
  // What was analyzed goes into the cache, findings with it for named files;
  // an entry whose file was only touched gets the file's new stamp. A run
  // stopped at any point stores nothing: its index may lack facts.
  cancelled = options.cancel && options.cancel->load();
  if (caching && !cancelled) {
    parallel_for(slots.size(), jobs, [&](size_t i) {
      Slot& s = slots[i];
      if (!s.cacheable || s.result.error || !s.skipped.empty()) return;
      if (!s.entry) {
        cache.store(s.result.path, s.stamp, s.content, *s.config, s.encoded, s.reads,
                    s.store_findings ? &*s.store_findings : nullptr);
      } else if (s.entry->restamp()) {
        std::optional<CachedFindings> f = s.entry->findings();
        cache.store(s.result.path, s.stamp, s.entry->content(), *s.config, s.entry->encoded_facts(),
                    s.entry->reads(), f ? &*f : nullptr);
      }
    });
    cache.flush();
  }
  out.cache_dir = cache_dir;
  for (auto& [path, why] : found.errors) out.errors.push_back({path, why});
  std::sort(out.errors.begin(), out.errors.end(),
            [](const FileError& a, const FileError& b) { return a.path < b.path; });
  out.cancelled = options.cancel && options.cancel->load();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string cache_root(const std::string& given, const std::string& project_root) {
  if (!given.empty()) return given;
  if (const char* d = std::getenv("TORCHLEAK_CACHE_DIR"); d && *d) return d;
  if (!project_root.empty()) return (fs::path(project_root) / ".torchleak_cache").string();
  return {};
}

RunResult run_sources(const std::vector<SourceFile>& files, const Config& config, unsigned jobs,
                      bool report_unused_suppressions) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Slot> slots(files.size());
  for (auto& s : slots) s.config = &config;
  parallel_for(files.size(), effective_jobs(jobs), [&](size_t i) { analyze_one(files[i], config, slots[i]); },
               nullptr);
  RunResult out = finish(slots, report_unused_suppressions);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

RunResult run_sources(const std::vector<SourceFile>& files, const std::vector<const Config*>& configs,
                      unsigned jobs) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Slot> slots(files.size());
  for (size_t i = 0; i < slots.size(); ++i) slots[i].config = configs.at(i);
  parallel_for(files.size(), effective_jobs(jobs), [&](size_t i) { analyze_one(files[i], *slots[i].config, slots[i]); },
               nullptr);
  RunResult out = finish(slots, false);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

RunResult run_in_context(const std::vector<SourceFile>& files, const std::vector<const Config*>& configs,
                         const std::vector<std::string>& context, const std::vector<const Config*>& context_configs,
                         const std::string& cache_root, unsigned jobs) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Slot> slots(files.size() + context.size());
  for (size_t i = 0; i < files.size(); ++i) slots[i].config = configs.at(i);
  for (size_t i = 0; i < context.size(); ++i) {
    slots[files.size() + i].config = context_configs.at(i);
    slots[files.size() + i].context = true;
  }
  AnalysisCache cache(cache_root);
  parallel_for(slots.size(), effective_jobs(jobs), [&](size_t i) {
    if (i < files.size()) {
      analyze_one(files[i], *slots[i].config, slots[i]);
      return;
    }
    analyze_on_disk(context[i - files.size()], kDefaultMaxFileSize, cache, slots[i]);
    if (slots[i].entry) slots[i].result.facts = slots[i].entry->facts();
  }, nullptr);
  RunResult out = finish(slots, false);
  // The context files analyzed now go into the cache (their facts).
  parallel_for(slots.size(), effective_jobs(jobs), [&](size_t i) {
    const Slot& s = slots[i];
    if (s.cacheable && !s.entry && !s.result.error && s.skipped.empty())
      cache.store(s.result.path, s.stamp, s.content, *s.config, s.encoded, s.reads, nullptr);
  }, nullptr);
  cache.flush();
  out.cache_dir = cache_root;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

void write_facts_file(const std::string& path, const std::vector<std::string>& files, const std::vector<Fact>& facts) {
  nlohmann::json j;
  j["torchleak-facts"] = 1;
  j["files"] = files;
  j["facts"] = nlohmann::json::array();
  for (const auto& f : facts) j["facts"].push_back({f.kind, f.key, f.file, f.line, f.values});
  std::error_code ec;
  fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  fs::path tmp = target;
  tmp += fmt::format(".tmp-{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump() << "\n";
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write", path));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("{}: cannot write: {}", path, ec.message()));
  }
}

std::vector<Fact> read_facts_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read the facts file", path));
  std::vector<Fact> out;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object() || j.value("torchleak-facts", 0) != 1)
      throw std::runtime_error("not a facts file written by `torchleak facts`");
    for (const auto& f : j.at("facts")) {
      Fact fact;
      fact.kind = f.at(0).get<std::string>();
      fact.key = f.at(1).get<std::string>();
      fact.file = f.at(2).get<std::string>();
      fact.line = f.at(3).get<uint32_t>();
      fact.values = f.at(4).get<std::vector<std::string>>();
      out.push_back(std::move(fact));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not a valid facts file: {}", path, e.what()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
  return out;
}

}  // namespace torchleak
