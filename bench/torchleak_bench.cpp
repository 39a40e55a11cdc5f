// torchleak_bench: how far the full analysis is from what parsing alone costs.
//
//   torchleak_bench DIR [--runs N] [--threads 1,2] [--only floor|full] [--select RULES] [--findings]
//   torchleak_bench DIR --memory K
//
// The Python files under DIR (found as `torchleak check` finds them) are read
// into memory first, so file I/O is out of the measurement. Then, N times,
// for each thread count, two modes run back to back:
//
//   floor  tree-sitter parses each file and a cursor visits every node of the
//          tree, nothing else: no analyzer can be faster than this.
//   full   torchleak::run_sources with a default configuration: the semantic
//          model, every check, the project index and the second phase.
//
// --select TL004 (or --select none: the semantic model and no check) runs
// full with only those rules, to see what each check costs.
//
// Both use the engine's parallel scheme (parallel_for). The table gives the
// median of the N runs, files/s, lines/s, the ratio full/floor and the
// speed-up of the largest thread count over one thread.
//
// --memory K analyses the tree concatenated 1, 2, ... K times (each copy under
// its own directory prefix), each in a fresh child process, and prints how
// much the resident set grows beyond the loaded sources: no tree outlives its
// file, so the growth should not scale with the number of files.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <tree_sitter/api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/analysis.h"
#include "core/catalogue.h"
#include "core/discovery.h"
#include "core/engine.h"
#include "python/syntax.h"

namespace {

using torchleak::SourceFile;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir;
  unsigned runs = 5;
  std::vector<unsigned> threads{1, 2};
  unsigned memory = 0;  // --memory K: the largest number of copies
  bool findings = false;
  bool floor = true;  // --only full / --only floor: one mode, for profiling
  bool full = true;
  std::vector<std::string> select;  // --select: the rules full runs ("none": no rule)
};

[[noreturn]] void usage(const std::string& why) {
  if (!why.empty()) fmt::print(stderr, "torchleak_bench: {}\n", why);
  fmt::print(stderr,
             "usage: torchleak_bench DIR [--runs N] [--threads 1,2] [--only floor|full] [--select RULES] [--findings]\n"
             "       torchleak_bench DIR --memory K\n");
  std::exit(2);
}

unsigned parse_count(const std::string& s, const char* option) {
  char* end = nullptr;
  unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v == 0 || v > 1024) usage(fmt::format("{} needs a positive number, not '{}'", option, s));
  return static_cast<unsigned>(v);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--runs") {
      o.runs = parse_count(value(), "--runs");
    } else if (a == "--threads") {
      o.threads.clear();
      std::stringstream ss(value());
      for (std::string t; std::getline(ss, t, ',');) o.threads.push_back(parse_count(t, "--threads"));
      if (o.threads.empty()) usage("--threads needs a list such as 1,2");
    } else if (a == "--memory") {
      o.memory = parse_count(value(), "--memory");
    } else if (a == "--only") {
      std::string m = value();
      if (m != "floor" && m != "full") usage("--only takes floor or full");
      o.floor = m == "floor";
      o.full = m == "full";
    } else if (a == "--select") {
      std::stringstream ss(value());
      for (std::string r; std::getline(ss, r, ',');) o.select.push_back(r);
      if (o.select.empty()) usage("--select needs rules such as TL001,TL004, or none");
    } else if (a == "--findings") {
      o.findings = true;
    } else if (a == "-h" || a == "--help") {
      usage("");
    } else if (!a.empty() && a[0] == '-') {
      usage("unknown option " + a);
    } else if (o.dir.empty()) {
      o.dir = a;
    } else {
      usage("one directory only");
    }
  }
  if (o.dir.empty()) usage("which directory?");
  return o;
}

bool handled(const std::string& path) { return torchleak::frontend_for(path) != nullptr; }

// Lines as the engine counts them: newlines, plus an unterminated last line.
size_t count_lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) +
         (text.empty() || text.back() == '\n' ? 0 : 1);
}

struct Input {
  std::vector<SourceFile> files;
  size_t lines = 0;
  size_t bytes = 0;
};

Input load(const std::string& dir) {
  torchleak::DiscoveredFiles found = torchleak::discover({dir}, {}, handled);
  for (const auto& [path, why] : found.errors) fmt::print(stderr, "torchleak_bench: {}: {}\n", path, why);
  Input in;
  for (const auto& path : found.files) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      fmt::print(stderr, "torchleak_bench: {}: cannot open file\n", path);
      continue;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    SourceFile file{path, std::move(ss).str()};
    in.lines += count_lines(file.text);
    in.bytes += file.text.size();
    in.files.push_back(std::move(file));
  }
  return in;
}

// Kilobytes of a field of /proc/self/status: VmRSS (now), VmHWM (peak).
long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  long value = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) == 0 && line.size() > std::string(field).size() && line[std::string(field).size()] == ':') {
      std::istringstream ss(line.substr(std::string(field).size() + 1));
      ss >> value;
      break;
    }
  }
  return value;
}

// --- the floor -------------------------------------------------------------------------

struct NodeCount {
  uint64_t all = 0;
  uint64_t named = 0;
};

// Parses and visits every node; the count keeps the walk from being optimised away.
NodeCount parse_and_walk(TSParser* parser, const std::string& text) {
  NodeCount nodes;
  TSTree* tree = ts_parser_parse_string(parser, nullptr, text.data(), static_cast<uint32_t>(text.size()));
  if (!tree) return nodes;
  TSTreeCursor cursor = ts_tree_cursor_new(ts_tree_root_node(tree));
  for (bool done = false; !done;) {
    TSNode node = ts_tree_cursor_current_node(&cursor);
    ++nodes.all;
    if (ts_node_is_named(node)) ++nodes.named;
    if (ts_tree_cursor_goto_first_child(&cursor)) continue;
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        done = true;
        break;
      }
    }
  }
  ts_tree_cursor_delete(&cursor);
  ts_tree_delete(tree);
  return nodes;
}

NodeCount run_floor(const Input& in, unsigned threads) {
  std::vector<NodeCount> per_file(in.files.size());
  torchleak::parallel_for(in.files.size(), threads, [&](size_t i) {
    // One parser per thread, reused across files.
    thread_local struct ParserHolder {
      TSParser* p = ts_parser_new();
      ParserHolder() { ts_parser_set_language(p, torchleak::python::language()); }
      ~ParserHolder() { ts_parser_delete(p); }
    } holder;
    per_file[i] = parse_and_walk(holder.p, in.files[i].text);
  });
  NodeCount total;
  for (const NodeCount& n : per_file) {
    total.all += n.all;
    total.named += n.named;
  }
  return total;
}

// --- the table ---------------------------------------------------------------------------

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Process CPU time (user + system, every thread), in seconds.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

struct Series {
  std::vector<double> wall;  // seconds
  std::vector<double> cpu;
};

int benchmark(const Options& o) {
  auto t0 = Clock::now();
  Input in = load(o.dir);
  double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (in.files.empty()) {
    fmt::print(stderr, "torchleak_bench: no Python files under {}\n", o.dir);
    return 1;
  }
  fmt::print("{}: {} files, {} lines, {:.1f} MB (read in {:.2f} s, not measured)\n", o.dir, in.files.size(),
             in.lines, in.bytes / 1e6, load_s);
  fmt::print("{} runs; each run: {} for {} thread(s)\n\n", o.runs,
             o.floor && o.full ? "floor then full" : o.floor ? "floor" : "full", fmt::join(o.threads, ", "));

  torchleak::Config config;
  if (!o.select.empty()) {
    const auto& catalogue = torchleak::Catalogue::builtin();
    for (const auto& r : o.select)
      if (r != "none" && !catalogue.find(r)) usage(fmt::format("--select: no rule {}", r));
    // "none" is no rule's code or name: selecting it alone runs no check.
    config.select = o.select;
    fmt::print("full runs only: {}\n\n", fmt::join(o.select, ", "));
  }
  std::map<std::pair<std::string, unsigned>, Series> series;
  NodeCount nodes;
  torchleak::RunResult last;
  auto measure = [&](const char* mode, unsigned t, const auto& body) {
    double c0 = cpu_seconds();
    auto w0 = Clock::now();
    body();
    double wall = std::chrono::duration<double>(Clock::now() - w0).count();
    Series& s = series[{mode, t}];
    s.wall.push_back(wall);
    s.cpu.push_back(cpu_seconds() - c0);
  };
  for (unsigned r = 0; r < o.runs; ++r) {
    for (unsigned t : o.threads) {
      if (o.floor) measure("floor", t, [&] { nodes = run_floor(in, t); });
      if (o.full) measure("full", t, [&] { last = torchleak::run_sources(in.files, config, t); });
    }
  }

  unsigned base = o.threads.front();
  fmt::print("{:<6} {:>7} {:>9} {:>15} {:>9} {:>10} {:>11} {:>10} {:>9}\n", "mode", "threads", "median s",
             "min-max s", "CPU s", "files/s", "lines/s", "full/floor", fmt::format("vs {} thr", base));
  for (unsigned t : o.threads) {
    for (const char* mode : {"floor", "full"}) {
      auto it = series.find({mode, t});
      if (it == series.end()) continue;
      const auto& s = it->second.wall;
      double med = median(s);
      auto [lo, hi] = std::minmax_element(s.begin(), s.end());
      auto floor_it = series.find({"floor", t});
      std::string ratio = std::string(mode) == "full" && floor_it != series.end()
                              ? fmt::format("{:.2f}x", med / median(floor_it->second.wall))
                              : "";
      std::string speedup =
          t == base ? "" : fmt::format("{:.2f}x", median(series[{mode, base}].wall) / med);
      fmt::print("{:<6} {:>7} {:>9.3f} {:>15} {:>9.3f} {:>10.0f} {:>11.0f} {:>10} {:>9}\n", mode, t, med,
                 fmt::format("{:.3f}-{:.3f}", *lo, *hi), median(it->second.cpu), in.files.size() / med,
                 in.lines / med, ratio, speedup);
    }
  }
  fmt::print("\n(median s, files/s, lines/s: wall clock; CPU s: median process CPU time of a run)\n");
  if (o.floor) fmt::print("nodes visited per floor run: {} ({} named)\n", nodes.all, nodes.named);
  if (o.full)
    fmt::print("full analysis: {} files analyzed, {} not analyzable, {} with syntax errors, {} findings\n",
               last.files_analyzed, last.errors.size(), last.notes.size(), last.diagnostics.size());
  fmt::print("peak RSS: {:.1f} MB\n", status_kb("VmHWM") / 1024.0);
  if (o.findings) {
    for (const auto& d : last.diagnostics)
      fmt::print("  {}:{}:{}: {} {}\n", d.path, d.start.line, d.start.column + 1, d.rule_id, d.message);
    for (const auto& e : last.errors) fmt::print("  {}: not analyzed: {}\n", e.path, e.message);
  }
  return 0;
}

// --- memory ----------------------------------------------------------------------------

// In a fresh process: load `copies` copies of the tree, analyze them once with
// one thread, and print one row.
void memory_row(const std::string& dir, unsigned copies) {
  std::vector<SourceFile> files;
  size_t bytes = 0;
  {
    Input in = load(dir);
    for (unsigned k = 0; k < copies; ++k) {
      for (const auto& f : in.files) {
        files.push_back({fmt::format("copy{}/{}", k, f.path), f.text});
        bytes += f.text.size();
      }
    }
  }
  long loaded = status_kb("VmRSS");
  torchleak::RunResult r = torchleak::run_sources(files, torchleak::Config{}, 1);
  long peak = status_kb("VmHWM");
  long growth = peak - loaded;
  fmt::print("{:>6} {:>8} {:>10.1f} {:>12.1f} {:>12.1f} {:>12.1f} {:>14.2f} {:>9}\n", copies, files.size(),
             bytes / 1e6, loaded / 1024.0, peak / 1024.0, growth / 1024.0,
             static_cast<double>(growth) / static_cast<double>(files.size()), r.diagnostics.size());
}

int memory(const Options& o) {
  fmt::print("{:>6} {:>8} {:>10} {:>12} {:>12} {:>12} {:>14} {:>9}\n", "copies", "files", "source MB",
             "loaded MB", "peak MB", "growth MB", "growth KB/file", "findings");
  std::fflush(stdout);
  for (unsigned k = 1; k <= o.memory; ++k) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      memory_row(o.dir, k);
      std::fflush(stdout);
      std::_Exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fmt::print(stderr, "torchleak_bench: the measuring process for {} copies failed\n", k);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_options(argc, argv);
  return o.memory ? memory(o) : benchmark(o);
}
