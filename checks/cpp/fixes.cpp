#include "checks/cpp/fixes.h"

#include "checks/cpp/semantics.h"

#include <clang/AST/ExprCXX.h>
#include <clang/Lex/Lexer.h>

namespace torchleak::cpp {

using namespace clang;

bool is_primary(const Expr* e) {
  e = strip(e);  // a call's temporary is still a call: `step(x).detach()`
  if (auto* op = dyn_cast<CXXOperatorCallExpr>(e))
    return op->getOperator() == OO_Call || op->getOperator() == OO_Subscript;
  return isa<DeclRefExpr>(e) || isa<MemberExpr>(e) || isa<CallExpr>(e) || isa<ParenExpr>(e) ||
         isa<ArraySubscriptExpr>(e);
}

std::vector<FixItHint> append_call_fixes(const Expr* e, const ASTContext& ctx, llvm::StringRef suffix) {
  const SourceManager& sm = ctx.getSourceManager();
  SourceLocation begin = e->getBeginLoc(), end = e->getEndLoc();
  if (begin.isMacroID() || end.isMacroID()) return {};
  SourceLocation after = Lexer::getLocForEndOfToken(end, 0, sm, ctx.getLangOpts());
  if (after.isInvalid()) return {};
  if (is_primary(e)) return {FixItHint::CreateInsertion(after, suffix)};
  return {FixItHint::CreateInsertion(begin, "("), FixItHint::CreateInsertion(after, (")" + suffix).str())};
}

std::vector<FixItHint> insert_at_loop_start(const Stmt* loop, const SourceManager& sm, const std::string& statement) {
  const Stmt* body = nullptr;
  if (auto* l = dyn_cast<ForStmt>(loop)) body = l->getBody();
  else if (auto* l = dyn_cast<CXXForRangeStmt>(loop)) body = l->getBody();
  else if (auto* l = dyn_cast<WhileStmt>(loop)) body = l->getBody();
  else if (auto* l = dyn_cast<DoStmt>(loop)) body = l->getBody();
  auto* block = dyn_cast_or_null<CompoundStmt>(body);
  if (!block || block->body_empty()) return {};
  SourceLocation first = block->body_front()->getBeginLoc();
  if (first.isMacroID() || block->getLBracLoc().isMacroID()) return {};
  if (sm.getSpellingLineNumber(first) == sm.getSpellingLineNumber(block->getLBracLoc())) return {};
  unsigned column = sm.getSpellingColumnNumber(first);
  bool invalid = false;
  llvm::StringRef buffer = sm.getBufferData(sm.getFileID(first), &invalid);
  unsigned offset = sm.getFileOffset(first);
  if (invalid || offset < column - 1) return {};
  // The statement starts its line: the text before it is its indentation.
  std::string indent = buffer.substr(offset - (column - 1), column - 1).str();
  for (char c : indent)
    if (c != ' ' && c != '\t') return {};
  SourceLocation line_start = first.getLocWithOffset(-static_cast<int>(column - 1));
  return {FixItHint::CreateInsertion(line_start, indent + statement + "\n")};
}

}  // namespace torchleak::cpp
