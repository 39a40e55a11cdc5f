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

}  // namespace torchleak::cpp
