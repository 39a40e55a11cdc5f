// A file analyzed in the context of its project, and the cache of facts
// that makes that cheap: the same findings as the whole project, entries
// reused while the file, the files it imports, the settings and the build
// are unchanged, atomic writes, damaged entries, the size bound, clean.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <chrono>
#include <set>
#include <thread>

#include "core/discovery.h"
#include "core/engine.h"
#include "core/analysis_cache.h"

namespace torchleak {
namespace {

namespace fs = std::filesystem;

class Project {
 public:
  Project() {
    std::string tmpl = (fs::temp_directory_path() / "torchleak-project-XXXXXX").string();
    root_ = fs::path(::mkdtemp(tmpl.data())).lexically_normal();
    fs::create_directories(root_ / ".git");  // a repository: the project's root
  }
  ~Project() { fs::remove_all(root_); }
  Project(const Project&) = delete;
  Project& operator=(const Project&) = delete;

  std::string write(const std::string& relative, const std::string& text) const {
    fs::path p = root_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string read(const std::string& relative) const {
    std::ifstream in(root_ / relative, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string operator/(const std::string& relative) const { return (root_ / relative).string(); }
  const fs::path& root() const { return root_; }

  // The rule and line of each finding of `check paths`.
  std::set<std::string> check(const std::vector<std::string>& paths, RunResult* result = nullptr,
                              bool context = true) const {
    RunOptions options;
    options.paths.clear();
    for (const auto& p : paths) options.paths.push_back((root_ / p).string());
    options.project_context = context;
    options.cache_dir = (root_ / ".torchleak_cache").string();
    options.jobs = 2;
    RunResult r = run(options);
    std::set<std::string> out;
    for (const auto& d : r.diagnostics)
      out.insert(d.rule_id + " " + fs::path(d.path).filename().string() + ":" + std::to_string(d.start.line));
    if (result) *result = std::move(r);
    return out;
  }

 private:
  fs::path root_;
};

// A training loop whose zero_grad is in a helper file, and a tagger wrapped
// in DataParallel by another script (the fixtures of TL010 and TL005).
void write_project(const Project& p) {
  fs::path fixtures = fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures" / "python";
  fs::create_directories(p.root() / "tagger");
  for (const char* f : {"engine.py", "train.py"})
    fs::copy_file(fixtures / "TL010/neg_cross_file_helper" / f, p.root() / f);
  for (const char* f : {"model.py", "train.py"})
    fs::copy_file(fixtures / "TL005/cross_file_wrap" / f, p.root() / "tagger" / f);
}

TEST(ProjectContext, EachFileAloneGivesTheWholeProjectsFindingsForIt) {
  Project p;
  write_project(p);
  std::set<std::string> whole = p.check({"."});
  EXPECT_EQ(whole, (std::set<std::string>{"TL005 model.py:18"}));
  std::set<std::string> joined;
  for (const char* f : {"engine.py", "train.py", "tagger/model.py", "tagger/train.py"}) {
    std::set<std::string> alone = p.check({f});
    joined.insert(alone.begin(), alone.end());
  }
  EXPECT_EQ(joined, whole);
  // Every split into two groups of files gives the same answer.
  std::vector<std::string> files{"engine.py", "train.py", "tagger/model.py", "tagger/train.py"};
  for (unsigned mask = 1; mask < 15; ++mask) {
    std::vector<std::string> a, b;
    for (size_t i = 0; i < files.size(); ++i) ((mask >> i) & 1 ? a : b).push_back(files[i]);
    std::set<std::string> both = p.check(a);
    std::set<std::string> other = p.check(b);
    both.insert(other.begin(), other.end());
    EXPECT_EQ(both, whole) << "split " << mask;
  }
  // Alone, without the project: the wrap is not seen, and the helper the
  // training script imports is not analyzed, so whether it clears the
  // gradients is not known (no finding either way).
  EXPECT_EQ(p.check({"train.py"}, nullptr, false), (std::set<std::string>{}));
  EXPECT_EQ(p.check({"tagger/model.py"}, nullptr, false), (std::set<std::string>{}));
}

// The findings of a run as "rule path:line", paths relative to `root`.
std::set<std::string> findings_of(const RunResult& r, const fs::path& root) {
  std::set<std::string> out;
  for (const auto& d : r.diagnostics)
    out.insert(d.rule_id + " " + fs::path(d.path).lexically_normal().lexically_relative(root).generic_string() + ":" +
               std::to_string(d.start.line));
  return out;
}

// Every multi-file fixture project of the Python rules: each file checked
// alone in the project's context, and each split of its files into two
// shards (`torchleak facts` of one, `check --facts` of the other), give the
// whole project's findings.
TEST(ProjectContext, EveryMultiFileFixtureGivesTheSameFindingsAloneAndInShards) {
  fs::path fixtures = fs::path(TORCHLEAK_SOURCE_DIR) / "fixtures" / "python";
  size_t projects = 0;
  for (const auto& rule : fs::directory_iterator(fixtures)) {
    if (!rule.is_directory()) continue;
    for (const auto& dir : fs::directory_iterator(rule.path())) {
      if (!dir.is_directory()) continue;
      std::vector<std::string> files;
      for (const auto& f : fs::directory_iterator(dir.path()))
        if (f.path().extension() == ".py") files.push_back(f.path().filename().string());
      if (files.size() < 2) continue;
      std::sort(files.begin(), files.end());
      ++projects;
      Project p;
      for (const auto& f : fs::directory_iterator(dir.path()))
        if (f.path().extension() != ".fixed") fs::copy(f.path(), p.root() / f.path().filename());
      auto run_on = [&](const std::vector<std::string>& names, bool context, std::vector<std::string> facts = {},
                        bool keep = false) {
        RunOptions options;
        options.paths.clear();
        for (const auto& n : names) options.paths.push_back((p.root() / n).string());
        options.project_context = context;
        options.use_cache = false;
        options.facts_files = std::move(facts);
        options.keep_facts = keep;
        options.jobs = 1;
        return run(options);
      };
      std::string name = rule.path().filename().string() + "/" + dir.path().filename().string();
      std::set<std::string> whole = findings_of(run_on({"."}, true), p.root());
      std::set<std::string> alone;
      for (const auto& f : files) {
        std::set<std::string> one = findings_of(run_on({f}, true), p.root());
        alone.insert(one.begin(), one.end());
      }
      EXPECT_EQ(alone, whole) << name << ": each file alone";
      for (unsigned mask = 1; mask + 1 < (1u << files.size()); ++mask) {
        std::vector<std::string> shard[2];
        for (size_t i = 0; i < files.size(); ++i) shard[(mask >> i) & 1].push_back(files[i]);
        std::string facts[2];
        for (int k = 0; k < 2; ++k) {
          facts[k] = (p.root() / ("shard" + std::to_string(k) + ".facts")).string();
          RunResult r = run_on(shard[k], false, {}, true);
          std::vector<std::string> paths;
          for (const auto& n : shard[k]) paths.push_back((p.root() / n).string());
          write_facts_file(facts[k], paths, r.facts);
        }
        std::set<std::string> joined;
        for (int k = 0; k < 2; ++k) {
          std::set<std::string> part = findings_of(run_on(shard[k], true, {facts[1 - k]}), p.root());
          joined.insert(part.begin(), part.end());
        }
        EXPECT_EQ(joined, whole) << name << ": split " << mask;
      }
    }
  }
  EXPECT_GE(projects, 20u);
}

TEST(ProjectContext, TheCacheServesUnchangedFilesAndNotChangedOnes) {
  Project p;
  write_project(p);
  RunResult r;
  p.check({"train.py"}, &r);
  EXPECT_EQ(r.context_files, 3u);
  EXPECT_EQ(r.cached_files, 0u);  // cold
  p.check({"train.py"}, &r);
  EXPECT_EQ(r.cached_files, 3u);  // warm
  EXPECT_TRUE(fs::exists(p / ".torchleak_cache/.gitignore"));

  // An edit of a context file: analyzed again, and its new facts count.
  p.write("engine.py", "def begin_step(model, optimizer):\n    model.train()\n");
  EXPECT_EQ(p.check({"train.py"}, &r), (std::set<std::string>{"TL010 train.py:12"}));
  EXPECT_EQ(r.cached_files, 2u);

  // An edit of a file that a context file's analysis read (owner.py asks
  // what class `self.attention` is, in attention.py): the reader's entry is
  // stale too. (The training scripts name the helper and the model's class
  // without reading those files: their facts do not depend on them.)
  p.write("attention.py", R"(import torch.nn as nn


class Attention(nn.Module):
    def clear_cache(self):
        self.cache = None
)");
  p.write("owner.py", R"(import torch.nn as nn
from attention import Attention


class Owner(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()

    def decode(self, x):
        self.attention.clear_cache()
        return x
)");
  p.check({"tagger/model.py"}, &r);
  p.check({"tagger/model.py"}, &r);
  EXPECT_EQ(r.cached_files, 5u);
  p.write("attention.py", "import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    pass\n");
  p.check({"tagger/model.py"}, &r);
  EXPECT_EQ(r.cached_files, 3u);  // not attention.py (changed), not owner.py (read it)
}

// Every field of every finding, as a reporter could show it.
std::string everything(const RunResult& r) {
  std::string out;
  for (const auto& d : r.diagnostics) {
    out += d.rule_id + "|" + d.path + "|" + std::to_string(d.start.line) + ":" + std::to_string(d.start.column) + "-" +
           std::to_string(d.end.line) + ":" + std::to_string(d.end.column) + "|" + std::to_string(d.start_byte) + "-" +
           std::to_string(d.end_byte) + "|" + d.message + "|" + d.help + "|" + d.source_line + "|" +
           d.end_source_line + "|" + d.context + "|" + d.snippet;
    if (d.fix) {
      out += "|fix " + d.fix->title + (d.fix->safety == FixSafety::Safe ? " safe" : " unsafe");
      for (const auto& e : d.fix->edits)
        out += " [" + std::to_string(e.start_byte) + "," + std::to_string(e.end_byte) + ")=" + e.replacement;
    }
    out += "\n";
  }
  for (const auto& n : r.notes) out += "note " + n.path + ": " + n.message + "\n";
  return out + "lines " + std::to_string(r.lines_analyzed) + "\n";
}

TEST(ProjectContext, AnUnchangedTreeReportsTheCachedFindingsAsTheyWere) {
  Project p;
  write_project(p);
  // A syntax error (a note) and a suppression comment that silences a finding.
  p.write("broken.py", "import torch\ndef f(:\n    pass\n");
  p.write("noqa.py", "import torch\n\n\ndef run(loader, model):\n    losses = []\n    for x in loader:\n"
                     "        loss = model(x).sum()\n        loss.backward()\n        losses.append(loss)  # noqa: TL001\n"
                     "        total = 0\n        total += loss\n    return losses, total\n");
  RunResult cold, warm;
  p.check({"."}, &cold);
  EXPECT_EQ(cold.cached_findings, 0u);
  p.check({"."}, &warm);
  EXPECT_EQ(warm.files_analyzed, 6u);
  EXPECT_EQ(warm.cached_findings, 6u);
  EXPECT_FALSE(cold.diagnostics.empty());
  EXPECT_EQ(everything(warm), everything(cold));
}

TEST(ProjectContext, CachedFindingsThatReadAnotherFilesFactsFollowThatFile) {
  Project p;
  write_project(p);
  RunResult r;
  EXPECT_EQ(p.check({"tagger/model.py"}, &r), (std::set<std::string>{"TL005 model.py:18"}));
  EXPECT_EQ(p.check({"tagger/model.py"}, &r), (std::set<std::string>{"TL005 model.py:18"}));
  EXPECT_EQ(r.cached_findings, 1u);
  // The wrap in DataParallel goes from the other script: model.py is unchanged, its finding goes.
  std::string train = p.read("tagger/train.py");
  std::string unwrapped = train;
  unwrapped.replace(unwrapped.find("model = nn.DataParallel(model)"), 30, "model = model");
  p.write("tagger/train.py", unwrapped);
  EXPECT_EQ(p.check({"tagger/model.py"}, &r), (std::set<std::string>{}));
  EXPECT_EQ(r.cached_findings, 0u);
  EXPECT_EQ(p.check({"tagger/model.py"}, &r), (std::set<std::string>{}));
  EXPECT_EQ(r.cached_findings, 1u);
  p.write("tagger/train.py", train);
  EXPECT_EQ(p.check({"tagger/model.py"}, &r), (std::set<std::string>{"TL005 model.py:18"}));
  // Named another way, or asked for unused suppressions: computed again.
  RunOptions options;
  options.paths = {(p.root() / "tagger/model.py").string()};
  options.cache_dir = (p.root() / ".torchleak_cache").string();
  options.report_unused_suppressions = true;
  r = run(options);
  EXPECT_EQ(r.cached_findings, 0u);
  EXPECT_EQ(r.diagnostics.size(), 1u);
  r = run(options);
  EXPECT_EQ(r.cached_findings, 1u);
}

TEST(ProjectContext, AFileIsKnownUnchangedByItsStampAndChangedByItsContent) {
  Project p;
  write_project(p);
  std::string model = p / "tagger/model.py";
  // Stamps taken within a second of a change are not trusted (git's "racily clean").
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  RunResult r;
  p.check({"tagger/model.py"}, &r);
  // Touched, content unchanged: still current (and its new stamp recorded).
  fs::last_write_time(model, fs::file_time_type::clock::now());
  p.check({"tagger/model.py"}, &r);
  EXPECT_EQ(r.cached_findings, 1u);
  // Changed with the same size and the old modification time: the content decides.
  auto when = fs::last_write_time(model);
  std::string text = p.read("tagger/model.py");
  size_t at = text.find("nn.LSTM");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "nn.GRU ");
  p.write("tagger/model.py", text);
  fs::last_write_time(model, when);
  p.check({"tagger/model.py"}, &r);
  EXPECT_EQ(r.cached_findings, 0u);
}

TEST(ProjectContext, AFileNowAboveTheSizeLimitIsSkippedNotTakenFromTheCache) {
  Project p;
  write_project(p);
  RunResult r;
  p.check({"tagger/model.py"}, &r);
  RunOptions options;
  options.paths = {p / "tagger/model.py"};
  options.cache_dir = (p.root() / ".torchleak_cache").string();
  options.max_file_size = 100;
  r = run(options);
  EXPECT_EQ(r.cached_findings, 0u);
  EXPECT_TRUE(r.diagnostics.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].message.rfind("skipped: too large", 0), 0u) << r.notes[0].message;
}

TEST(ProjectContext, ASettingThatChangesFactsMissesTheCache) {
  Project p;
  write_project(p);
  RunResult r;
  p.check({"train.py"}, &r);
  p.write("torchleak.toml", "extra-data-parallel = [\"Parallel\"]\n");
  p.check({"train.py"}, &r);
  EXPECT_EQ(r.cached_files, 0u);
  p.check({"train.py"}, &r);
  EXPECT_EQ(r.cached_files, 3u);
}

TEST(ProjectContext, ADamagedEntryIsIgnoredAndRewritten) {
  Project p;
  write_project(p);
  RunResult r;
  p.check({"train.py"}, &r);
  // One byte changed in the middle of the segment: the entry it falls in no
  // longer matches its checksum, the others are still used.
  auto segments = [&] {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(p / ".torchleak_cache"))
      if (e.path().extension() == ".seg") out.push_back(e.path());
    return out;
  };
  auto damage = [&](const fs::path& file, bool cut) {
    std::string bytes = p.read(file.string());  // absolute: the root is not prepended
    if (cut) bytes.resize(bytes.size() / 2);
    else bytes[bytes.size() / 2] ^= 0x5a;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  };
  ASSERT_EQ(segments().size(), 1u);
  damage(segments().front(), false);
  EXPECT_EQ(p.check({"train.py"}, &r), (std::set<std::string>{}));
  EXPECT_EQ(r.cached_files, 2u);
  p.check({"train.py"}, &r);
  EXPECT_EQ(r.cached_files, 3u);
  // Every segment cut short: what is left of each is still read.
  for (const auto& f : segments()) damage(f, true);
  EXPECT_EQ(p.check({"train.py"}), (std::set<std::string>{}));
  p.check({"train.py"}, &r);
  EXPECT_EQ(r.cached_files, 3u);
}

TEST(ProjectContext, ConcurrentRunsLeaveAUsableCache) {
  Project p;
  write_project(p);
  // Four torchleak processes at once, filling one cache.
  std::string command = "cd '" + p.root().string() + "' && for i in 1 2 3 4; do '" +
                        std::string(TORCHLEAK_BINARY) +
                        "' check --select TL005 --quiet tagger/model.py > out$i.txt 2>&1 & done; wait";
  ASSERT_EQ(std::system(command.c_str()), 0);
  for (int i = 1; i <= 4; ++i) {
    std::ifstream in(p / ("out" + std::to_string(i) + ".txt"));
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first.substr(0, first.find(": warning")), "tagger/model.py:18:21") << "run " << i;
  }
  // A segment per process, nothing half-written: a fifth run takes every
  // file from the cache.
  size_t segments = 0;
  for (const auto& e : fs::recursive_directory_iterator(p / ".torchleak_cache")) {
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
    segments += e.path().extension() == ".seg" ? 1 : 0;
  }
  EXPECT_EQ(segments, 4u);
  command = "cd '" + p.root().string() + "' && '" + std::string(TORCHLEAK_BINARY) +
            "' check --select TL005 --verbose tagger/model.py > out5.txt 2>&1";
  std::system(command.c_str());
  std::string all = p.read("out5.txt");
  EXPECT_NE(all.find("1 file checked (1 from the cache), 3 other files of the project read for their facts (3 from "
                     "the cache"),
            std::string::npos)
      << all;
}

TEST(ProjectContext, TheCacheIsBoundedAndCleaned) {
  Project p;
  std::string root = p / "cache";
  AnalysisCache cache(root, 2000);
  Config config;
  for (int i = 0; i < 40; ++i) {
    std::string file = p.write(std::string("f") + std::to_string(i) + ".py", "x = " + std::to_string(i) + "\n");
    cache.store(file, stamp_of(file), content_hash("x"), config,
                encode_facts({Fact{"class", "Model" + std::to_string(i), file, 1, {std::string(40, 'v')}}}), {},
                nullptr);
  }
  EXPECT_EQ(cache.writes(), 40u);
  cache.flush();
  auto measure = [&](uint64_t& total) {
    total = 0;
    size_t segments = 0;
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.path().extension() == ".seg") {
        total += e.file_size();
        ++segments;
      }
    return segments;
  };
  uint64_t total = 0;
  EXPECT_EQ(measure(total), 1u);
  EXPECT_LE(total, 2000u);
  // The newest entries were kept: the last file's is there, the first's is not.
  AnalysisCache again(root, 2000);
  auto has = [&](int i) {
    std::string file = p / (std::string("f") + std::to_string(i) + ".py");
    std::string text = "x";
    return again.load(file, std::nullopt, [&] { return &text; }, config).has_value();
  };
  EXPECT_TRUE(has(39));
  EXPECT_FALSE(has(0));
  // More segments than a few: the next run that writes merges them into one.
  for (int run = 0; run < 9; ++run) {
    AnalysisCache writer(root);
    std::string file = p.write("g" + std::to_string(run) + ".py", "y\n");
    writer.store(file, stamp_of(file), content_hash("y"), config, encode_facts({}), {}, nullptr);
    writer.flush();
  }
  EXPECT_LE(measure(total), 8u);
  EXPECT_GT(clean_analysis_cache(root), 0u);
  EXPECT_EQ(clean_analysis_cache(root), 0u);
  EXPECT_EQ(measure(total), 0u);
}

TEST(ProjectContext, TheRootIsTheNearestConfigurationElseTheRepository) {
  Project p;
  std::string deep = p.write("a/b/train.py", "x = 1\n");
  EXPECT_EQ(find_project_root(deep), p.root().string());
  p.write("c/pyproject.toml", "[project]\nname = \"c\"\n");  // not torchleak's
  EXPECT_EQ(find_project_root(p.write("c/d/train.py", "x = 1\n")), p.root().string());
  p.write("e/pyproject.toml", "[tool.torchleak]\nselect = [\"TL001\"]\n");
  EXPECT_EQ(find_project_root(p.write("e/f/train.py", "x = 1\n")), (p.root() / "e").string());
  p.write("g/torchleak.toml", "select = [\"TL001\"]\n");
  EXPECT_EQ(find_project_root(p.write("g/train.py", "x = 1\n")), (p.root() / "g").string());
}

// The answers are remembered per directory; a long-lived process (the
// language server) forgets them before each analysis, and a configuration
// made since counts.
TEST(ProjectContext, AForgottenRootIsLookedUpAgain) {
  Project p;
  std::string file = p.write("h/train.py", "x = 1\n");
  EXPECT_EQ(find_project_root(file), p.root().string());
  p.write("h/torchleak.toml", "select = [\"TL001\"]\n");
  EXPECT_EQ(find_project_root(file), p.root().string());  // remembered
  forget_project_roots();
  EXPECT_EQ(find_project_root(file), (p.root() / "h").string());
}

}  // namespace
}  // namespace torchleak
