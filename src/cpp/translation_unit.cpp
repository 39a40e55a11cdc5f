#include "cpp/translation_unit.h"

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/Tooling.h>

#include <algorithm>

namespace torchleak::cpp {

namespace {

using namespace clang;
using namespace clang::ast_matchers;

// The innermost function whose body holds an offset of the main file.
class ContextFinder : public RecursiveASTVisitor<ContextFinder> {
 public:
  ContextFinder(const SourceManager& sm, unsigned offset) : sm_(sm), offset_(offset) {}
  bool shouldVisitTemplateInstantiations() const { return false; }
  bool VisitFunctionDecl(FunctionDecl* f) {
    if (!f->hasBody() || f->isImplicit()) return true;
    SourceRange r = f->getSourceRange();
    SourceLocation b = sm_.getFileLoc(r.getBegin()), e = sm_.getFileLoc(r.getEnd());
    if (!sm_.isInMainFile(b) || !sm_.isInMainFile(e)) return true;
    unsigned bo = sm_.getFileOffset(b), eo = sm_.getFileOffset(e);
    if (bo <= offset_ && offset_ <= eo && (!best || eo - bo < best_size_)) {
      best = f;
      best_size_ = eo - bo;
    }
    return true;
  }
  const FunctionDecl* best = nullptr;

 private:
  const SourceManager& sm_;
  unsigned offset_;
  unsigned best_size_ = 0;
};

class FindingSink final : public Sink {
 public:
  FindingSink(std::string rule_id, TuResult& out, const std::vector<Decl*>& scope)
      : rule_id_(std::move(rule_id)), out_(out), scope_(scope) {}

  void report(const MatchFinder::MatchResult& result, Finding finding) override {
    const SourceManager& sm = *result.SourceManager;
    const LangOptions& lang = result.Context->getLangOpts();
    CharSourceRange range = Lexer::makeFileCharRange(CharSourceRange::getTokenRange(finding.range), sm, lang);
    SourceLocation begin = range.isValid() ? range.getBegin() : sm.getFileLoc(finding.range.getBegin());
    if (begin.isInvalid() || !sm.isWrittenInMainFile(begin)) return;
    TuFinding f;
    f.rule_id = rule_id_;
    f.start_byte = sm.getFileOffset(begin);
    f.end_byte = range.isValid() && sm.isWrittenInMainFile(range.getEnd()) ? sm.getFileOffset(range.getEnd())
                                                                            : f.start_byte;
    f.message = std::move(finding.message);
    f.help = std::move(finding.help);
    bool fix_ok = !finding.fixes.empty();
    for (const FixItHint& hint : finding.fixes) {
      CharSourceRange r = hint.RemoveRange;
      if (!hint.InsertFromRange.isInvalid()) fix_ok = false;
      if (r.isTokenRange()) r = Lexer::makeFileCharRange(r, sm, lang);
      if (r.isInvalid() || !sm.isWrittenInMainFile(r.getBegin()) || !sm.isWrittenInMainFile(r.getEnd())) {
        fix_ok = false;
        break;
      }
      f.edits.push_back({sm.getFileOffset(r.getBegin()), sm.getFileOffset(r.getEnd()), hint.CodeToInsert});
    }
    if (fix_ok) {
      f.fix_title = std::move(finding.fix_title);
      f.fix_safety = finding.fix_safety;
    }
    else f.edits.clear();
    // A template's pattern and its instantiation can give the same finding.
    for (const TuFinding& seen : out_.findings)
      if (seen.rule_id == f.rule_id && seen.start_byte == f.start_byte && seen.end_byte == f.end_byte) return;
    ContextFinder finder(sm, f.start_byte);
    for (Decl* d : scope_) finder.TraverseDecl(d);
    if (finder.best) f.context = finder.best->getQualifiedNameAsString();
    out_.findings.push_back(std::move(f));
  }

 private:
  std::string rule_id_;
  TuResult& out_;
  const std::vector<Decl*>& scope_;
};

// Forwards each match of one check to it, with that check's sink.
class CheckCallback final : public MatchFinder::MatchCallback {
 public:
  CheckCallback(const RegisteredCheck& check, const Options& options, TuResult& out, const std::vector<Decl*>& scope)
      : check_(check), options_(options), sink_(check.rule_id, out, scope) {}
  void run(const MatchFinder::MatchResult& result) override { check_.check->run(result, options_, sink_); }

 private:
  const RegisteredCheck& check_;
  const Options& options_;
  FindingSink sink_;
};

class AnalysisConsumer final : public ASTConsumer {
 public:
  AnalysisConsumer(const TuRequest& request, TuResult& out, CompilerInstance& ci)
      : request_(request), out_(out), ci_(ci) {}

  bool HandleTopLevelDecl(DeclGroupRef group) override {
    const SourceManager& sm = ci_.getSourceManager();
    for (Decl* d : group) {
      // An instantiation takes the location of the declaration its call found,
      // which may be a header's forward declaration: what counts is where the
      // body it instantiates is written.
      const Decl* written = d;
      if (auto* f = dyn_cast<FunctionDecl>(d); f && f->isTemplateInstantiation())
        if (const FunctionDecl* pattern = f->getTemplateInstantiationPattern()) written = pattern;
      if (sm.isInMainFile(sm.getExpansionLoc(written->getLocation()))) scope_.push_back(d);
    }
    return true;
  }

  void HandleTranslationUnit(ASTContext& ctx) override {
    if (ctx.getDiagnostics().hasErrorOccurred()) return;
    const SourceManager& sm = ctx.getSourceManager();
    if (!scope_.empty())
      out_.first_declaration_line = sm.getExpansionLineNumber(scope_.front()->getBeginLoc());
    collect_comments(sm, ctx.getLangOpts());
    // Walk the main file's own declarations only: the headers' thousands of
    // declarations would cost seconds per file and can hold no finding.
    ctx.setTraversalScope(scope_);
    MatchFinder finder;
    std::vector<std::unique_ptr<CheckCallback>> callbacks;
    for (const RegisteredCheck* c : request_.checks) {
      callbacks.push_back(std::make_unique<CheckCallback>(*c, request_.options, out_, scope_));
      c->check->register_matchers(finder, callbacks.back().get());
    }
    finder.matchAST(ctx);
    out_.parsed = true;
  }

 private:
  void collect_comments(const SourceManager& sm, const LangOptions& lang) {
    FileID main = sm.getMainFileID();
    llvm::StringRef buffer = sm.getBufferData(main);
    Lexer lexer(sm.getLocForStartOfFile(main), lang, buffer.begin(), buffer.begin(), buffer.end());
    lexer.SetCommentRetentionState(true);
    Token tok;
    while (!lexer.LexFromRawLexer(tok)) {
      if (tok.is(tok::comment))
        out_.comments.push_back({sm.getFileOffset(tok.getLocation()),
                                 sm.getFileOffset(tok.getLocation()) + tok.getLength()});
    }
    if (tok.is(tok::comment))
      out_.comments.push_back({sm.getFileOffset(tok.getLocation()),
                               sm.getFileOffset(tok.getLocation()) + tok.getLength()});
  }

  const TuRequest& request_;
  TuResult& out_;
  CompilerInstance& ci_;
  std::vector<Decl*> scope_;
};

class AnalysisAction final : public ASTFrontendAction {
 public:
  AnalysisAction(const TuRequest& request, TuResult& out) : request_(request), out_(out) {}
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, llvm::StringRef) override {
    return std::make_unique<AnalysisConsumer>(request_, out_, ci);
  }

 private:
  const TuRequest& request_;
  TuResult& out_;
};

}  // namespace

TuResult analyze_translation_unit(const TuRequest& request) {
  TuResult out;
  auto files = file_manager(request.directory, request.path, request.text);
  clang::tooling::ToolInvocation invocation(request.args, std::make_unique<AnalysisAction>(request, out),
                                            files.get());
  ErrorCollector errors;
  invocation.setDiagnosticConsumer(&errors);
  bool ok = invocation.run();
  out.errors = errors.errors();
  if (!ok || !out.errors.empty()) {
    out.parsed = false;
    out.findings.clear();
  }
  std::sort(out.findings.begin(), out.findings.end(),
            [](const TuFinding& a, const TuFinding& b) { return a.start_byte < b.start_byte; });
  return out;
}

}  // namespace torchleak::cpp
