// Fix-it helpers shared by the C++ checks.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Expr.h>
#include <clang/Basic/Diagnostic.h>

#include <string>
#include <vector>

namespace torchleak::cpp {

// Edits that append `suffix` to `e`, parenthesizing it when it is not a
// primary expression: `loss` -> `loss.detach()`, `a + b` -> `(a + b).detach()`.
// Empty when `e` is spelled through a macro.
std::vector<clang::FixItHint> append_call_fixes(const clang::Expr* e, const clang::ASTContext& ctx,
                                                llvm::StringRef suffix);

// An edit that inserts `statement` on its own line before the first statement
// of `loop`'s braced body, with that statement's indentation. Empty when the
// body is not a block with a first statement on a line of its own, or is
// spelled through a macro.
std::vector<clang::FixItHint> insert_at_loop_start(const clang::Stmt* loop, const clang::SourceManager& sm,
                                                   const std::string& statement);

// Whether `e` needs no parentheses before a member access.
bool is_primary(const clang::Expr* e);

}  // namespace torchleak::cpp
