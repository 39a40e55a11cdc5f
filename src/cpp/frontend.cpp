// The C++ (LibTorch) frontend as the engine sees it: find the file's compile
// command, precompile LibTorch's headers once per flag set, parse the file
// with Clang and run the enabled checks. A file that does not compile is an
// error for that file: nothing is reported from an AST whose types are not
// resolved.
#include <clang/Basic/LangOptions.h>
#include <clang/Lex/Lexer.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "cpp/check.h"
#include "core/analysis.h"
#include "core/catalogue.h"
#include "core/suppression.h"
#include "cpp/compilation.h"
#include "cpp/driver.h"
#include "cpp/pch.h"
#include "cpp/translation_unit.h"

namespace fs = std::filesystem;

namespace torchleak::cpp {

namespace {

const EnvLookup kEnv = [](const char* name) -> const char* { return std::getenv(name); };

std::string line_text(std::string_view text, uint32_t byte, uint32_t& line, uint32_t& column) {
  line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < byte && i < text.size(); ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  column = byte - static_cast<uint32_t>(line_start);
  size_t end = text.find('\n', line_start);
  std::string_view l = text.substr(line_start, end == std::string_view::npos ? std::string_view::npos : end - line_start);
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  return std::string(l);
}

bool mentions_libtorch(const std::string& header) {
  return header.rfind("torch/", 0) == 0 || header.rfind("ATen/", 0) == 0 || header.rfind("c10/", 0) == 0;
}

std::string compile_failure(const TuResult& r, const CompileCommand& command) {
  std::vector<std::string> missing;
  for (const CompileError& e : r.errors)
    if (!e.missing_header.empty() && mentions_libtorch(e.missing_header)) missing.push_back(e.missing_header);
  std::string first;
  for (size_t i = 0; i < r.errors.size() && i < 3; ++i) {
    const CompileError& e = r.errors[i];
    if (!first.empty()) first += "; ";
    first += e.line ? fmt::format("{}:{}: {}", fs::path(e.file).filename().string(), e.line, e.message) : e.message;
  }
  if (r.errors.size() > 3) first += fmt::format("; and {} more", r.errors.size() - 3);
  if (!missing.empty()) {
    return fmt::format(
        "LibTorch's headers were not found (<{}>: file not found) with {}; {}. Pass the build directory of "
        "a CMake project configured with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (-p BUILD_DIR), set Torch_DIR, "
        "CMAKE_PREFIX_PATH or TORCH_INSTALL_PREFIX to the LibTorch install, or add its include directories "
        "(--extra-arg=-I<libtorch>/include --extra-arg=-I<libtorch>/include/torch/csrc/api/include)",
        missing.front(), command.origin, libtorch_search_description(kEnv));
  }
  if (r.errors.empty()) return fmt::format("the compiler could not run with {}", command.origin);
  return fmt::format(
      "does not compile with {} ({}); torchleak reports nothing from code whose types are not resolved: pass "
      "the project's flags with -p BUILD_DIR or --extra-arg",
      command.origin, first);
}

class CppFrontend final : public LanguageFrontend {
 public:
  std::string_view language() const override { return "cpp"; }

  bool handles(std::string_view path) const override { return is_cpp_source_path(path); }

  // A lexical check, since a fix's text has no compile command of its own:
  // every token lexes (no unterminated literal or comment) and brackets
  // balance. The fixer's re-analysis compiles the fixed file for real.
  bool parses(std::string_view text) const override {
    clang::LangOptions lang;
    lang.CPlusPlus = lang.CPlusPlus11 = lang.CPlusPlus14 = lang.CPlusPlus17 = true;
    clang::Lexer lexer(clang::SourceLocation(), lang, text.data(), text.data(), text.data() + text.size());
    lexer.SetCommentRetentionState(false);
    std::string open;
    clang::Token tok;
    for (;;) {
      lexer.LexFromRawLexer(tok);
      if (tok.is(clang::tok::eof)) break;
      if (tok.is(clang::tok::unknown)) return false;
      switch (tok.getKind()) {
        case clang::tok::l_paren: open += ')'; break;
        case clang::tok::l_square: open += ']'; break;
        case clang::tok::l_brace: open += '}'; break;
        case clang::tok::r_paren:
        case clang::tok::r_square:
        case clang::tok::r_brace: {
          char want = tok.is(clang::tok::r_paren) ? ')' : tok.is(clang::tok::r_square) ? ']' : '}';
          if (open.empty() || open.back() != want) return false;
          open.pop_back();
          break;
        }
        default: break;
      }
    }
    return open.empty();
  }

  void analyze(const SourceFile& file, const Config& config, FileResult& out) const override {
    Settings settings = settings_from(config);
    std::string path = fs::absolute(file.path).lexically_normal().string();
    std::string error;
    std::optional<CompileCommand> command = compile_command_for(path, settings, kEnv, error);
    if (!command) {
      out.error = error;
      return;
    }
    TuRequest request;
    request.path = path;
    request.text = file.text;
    request.directory = command->directory;
    request.args = syntax_only_arguments(command->argv, path, settings.extra_args_before, settings.extra_args);
    request.options = options_from(config);
    const Catalogue& catalogue = Catalogue::builtin();
    for (const RegisteredCheck& c : registered_checks()) {
      const RuleInfo* rule = catalogue.find(c.rule_id);
      if (rule && config.rule_enabled(*rule)) {
        request.checks.push_back(&c);
        out.rules_run.push_back(c.rule_id);
      }
    }
    if (settings.use_pch && includes_libtorch(file.text)) {
      PchCache& cache = cache_in(settings.cache_dir.empty() ? PchCache::default_directory() : settings.cache_dir);
      PchCache::Result pch = cache.get(request.args, path, request.directory);
      if (!pch.path.empty()) request.args.insert(request.args.begin() + 1, {"-include-pch", pch.path});
    }
    TuResult result = analyze_translation_unit(request);
    if (!result.parsed) {
      out.error = compile_failure(result, *command);
      return;
    }
    for (const TuComment& c : result.comments) {
      std::string_view text = std::string_view(file.text).substr(c.start_byte, c.end_byte - c.start_byte);
      if (!may_hold_directive(text)) continue;
      uint32_t line = 0, column = 0;
      line_text(file.text, c.start_byte, line, column);
      out.comments.push_back(comment_at(file.text, c.start_byte, c.end_byte, line, column));
    }
    out.first_statement_line = result.first_declaration_line;
    for (TuFinding& f : result.findings) out.diagnostics.push_back(to_diagnostic(f, file, catalogue));
  }

 private:
  static Settings settings_from(const Config& config) {
    Settings s;
    s.database_dir = config.cpp_database_dir;
    s.extra_args = config.cpp_extra_args;
    s.extra_args_before = config.cpp_extra_args_before;
    s.cache_dir = config.cpp_cache_dir;
    return s;
  }

  static Options options_from(const Config& config) {
    Options o;
    o.oversized_layer_bytes = config.oversized_layer_bytes;
    o.extra_models = config.extra_models;
    o.extra_losses = config.extra_losses;
    o.extra_optimizers = config.extra_optimizers;
    o.extra_data_parallel = config.extra_data_parallel;
    return o;
  }

  static Diagnostic to_diagnostic(TuFinding& f, const SourceFile& file, const Catalogue& catalogue) {
    Diagnostic d;
    d.rule_id = f.rule_id;
    d.path = file.path;
    d.start_byte = f.start_byte;
    d.end_byte = f.end_byte;
    d.source_line = line_text(file.text, f.start_byte, d.start.line, d.start.column);
    line_text(file.text, f.end_byte, d.end.line, d.end.column);
    d.message = std::move(f.message);
    const RuleInfo* rule = catalogue.find(f.rule_id);
    d.help = !f.help.empty() ? std::move(f.help) : rule ? rule->fix : std::string();
    d.context = f.context.empty() ? std::string("<file>") : std::move(f.context);
    if (!f.edits.empty()) {
      Fix fix;
      fix.title = std::move(f.fix_title);
      fix.safety = f.fix_safety;
      for (TuEdit& e : f.edits) fix.edits.push_back({e.start_byte, e.end_byte, std::move(e.replacement)});
      d.fix = std::move(fix);
    }
    return d;
  }

  // One cache per directory for the whole process: a precompiled header is
  // checked or built once, then shared by every thread.
  static PchCache& cache_in(const std::string& dir) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<PchCache>> caches;
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = caches[dir];
    if (!slot) slot = std::make_unique<PchCache>(dir);
    return *slot;
  }
};

}  // namespace

[[maybe_unused]] const bool frontend_registered = [] {
  register_frontend(std::make_unique<CppFrontend>());
  return true;
}();

}  // namespace torchleak::cpp
