// What the C++ checks ask of a LibTorch program, answered from Clang's
// resolved types rather than from spellings: which types are tensors,
// modules, optimizers and grad-mode guards; whether autograd is enabled at a
// statement; which values carry autograd history; loops, functions, and the
// definitions that reach a use. The C++ counterpart of src/python/model.h.
#pragma once

#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/Stmt.h>

#include <optional>
#include <string>
#include <vector>

#include "cpp/check.h"

namespace torchleak::cpp {

using torchleak::Device;
using torchleak::GradState;
using torchleak::Provenance;

// --- types --------------------------------------------------------------------
// at::Tensor (torch::Tensor, torch::autograd::Variable), through references,
// cv-qualifiers and aliases.
bool is_tensor_type(clang::QualType type);
// A class deriving from (or being) torch::nn::Module.
bool is_module_class(const clang::CXXRecordDecl* record);
// A value through which a module is called: a Module subclass, a pointer or
// std::shared_ptr to one, a ModuleHolder (torch::nn::Linear, TORCH_MODULE
// wrappers), torch::nn::AnyModule.
bool is_module_value_type(clang::QualType type, const Options& options);
bool is_optimizer_type(clang::QualType type, const Options& options);
// The record a type names, through references, pointers and aliases.
const clang::CXXRecordDecl* record_of(clang::QualType type);
// Whether `record` is, or derives from, the class named `qualified`.
bool derives_from(const clang::CXXRecordDecl* record, llvm::StringRef qualified);

// The variable a module expression names, also through `modules[i]`.
const clang::ValueDecl* module_variable(const clang::Expr* e);
// A std::tuple, std::pair, std::vector or std::array of tensors (an LSTM's
// (output, (h, c)), a member holding the hidden state).
bool holds_tensors(clang::QualType type);
// Whether a check that walks whole function bodies analyzes `fn`. A
// function template is analyzed through its first instantiation, where types
// are known (in the pattern, a call on a dependent type resolves to
// nothing); one with no instantiation through its pattern. Findings at the
// same place twice (a class template's member, pattern and instance) are
// reported once.
bool analyzed_body(const clang::FunctionDecl* fn);

// Strips parentheses, implicit conversions, temporaries and copies.
const clang::Expr* strip(const clang::Expr* e);
// The variable or field an expression names (`total`, `this->total_`), or null.
const clang::ValueDecl* named_decl(const clang::Expr* e);

class Semantics {
 public:
  Semantics(clang::ASTContext& ctx, const Options& options) : ctx_(ctx), options_(options) {}

  clang::ASTContext& context() const { return ctx_; }
  const clang::SourceManager& sources() const { return ctx_.getSourceManager(); }
  const Options& options() const { return options_; }

  // --- structure ---------------------------------------------------------------
  // The innermost loop (for, range-for, while, do) around `s` within its
  // function, or null.
  const clang::Stmt* enclosing_loop(const clang::Stmt* s) const;
  // The definition a call reaches when it is the program's own function or
  // lambda (not torch's, the standard library's or another system
  // header's), or null: where values, steps and module runs are followed.
  // A call through a callable object or pointer (a `std::function` callback,
  // a function pointer, a lambda kept in a variable or passed as an
  // argument) reaches the one lambda or function it holds: its initializer,
  // the argument bound at a followed call, or what every caller of the file
  // passes for that parameter.
  const clang::FunctionDecl* program_function(const clang::CallExpr* call) const;
  // Whether `loop` is a step loop: it iterates a LibTorch data loader
  // (torch::data::DataLoaderBase) or steps an optimizer, itself, in a loop
  // nested in it, or in a function or lambda it calls (a step helper). Loops over heads, layers or time steps are not.
  bool is_batch_loop(const clang::Stmt* loop) const;
  // Whether `loop` runs the same module on every iteration: a module call
  // (or a per-batch helper that makes one) whose module is not chosen by
  // the loop (`for (auto& head : heads)`, `tables[i]`). With is_batch_loop,
  // what makes a loop a loop over data.
  bool runs_same_module(const clang::Stmt* loop) const;
  // A loop over data: is_batch_loop, or runs_same_module.
  bool is_data_loop(const clang::Stmt* loop) const { return is_batch_loop(loop) || runs_same_module(loop); }
  // Whether a step loop runs once per batch: no loop nested in it is one.
  bool batch_level(const clang::Stmt* loop) const;
  // The body of the function or lambda `s` is in, or null.
  const clang::Stmt* enclosing_body(const clang::Stmt* s) const;
  const clang::FunctionDecl* enclosing_function(const clang::Stmt* s) const;
  // Whether `s` runs only under a condition of its function: in a branch of
  // an if, switch or ?:, or the right operand of && or || (a debug flag).
  // With `within`, only the conditions inside that statement count (a reset
  // under an `if` of the loop body runs periodically, not every iteration).
  bool under_condition(const clang::Stmt* s, const clang::Stmt* within = nullptr) const;
  // Whether `inner` lies within `outer`'s source range.
  bool within(const clang::Stmt* inner, const clang::Stmt* outer) const;
  bool within(const clang::Decl* inner, const clang::Stmt* outer) const;
  bool before(clang::SourceLocation a, clang::SourceLocation b) const;
  // Whether `d` lives across iterations of `loop`: declared before it (a
  // variable of an enclosing scope, a field, a global, a parameter) or in the
  // init statement of a for loop.
  bool outlives_iteration(const clang::ValueDecl* d, const clang::Stmt* loop) const;
  // Whether `loop` starts `container` afresh: clear(), pop_back(), pop_front(),
  // erase(), swap() or resize() on it, or an assignment (other than
  // `except`) of a value that does not read it (`acc = torch::cat({acc, x})`
  // keeps growing; `losses = {}` empties), on every iteration: a reset under
  // a condition of the loop (`if (steps.size() == 2048) steps.clear();`) is
  // periodic and keeps what the iterations in between stored.
  bool emptied_in(const clang::ValueDecl* container, const clang::Stmt* loop,
                  const clang::Stmt* except = nullptr) const;

  // --- autograd ----------------------------------------------------------------
  // Whether autograd records at `s`: NoGradGuard, InferenceMode and
  // AutoGradMode(false) declared earlier in an enclosing block disable it.
  GradState grad_state(const clang::Stmt* s) const;
  // Whether `e` carries autograd history. A call of a function or lambda of
  // the translation unit is followed into its body: the merge of what its
  // return statements give, with each parameter bound to the call's
  // argument (a summary per call site, depth-bounded, recursion Unknown).
  // A structured binding (`auto [out, h] = model->forward(x)`) has the
  // provenance of the value it decomposes. Any other call outside torch is
  // Unknown, which never produces a finding.
  Provenance provenance(const clang::Expr* e) const;
  // A call that runs a module's forward: model->forward(x), model(x), (*model)(x).
  bool is_module_call(const clang::Expr* e) const;
  // A call of a function or method of the translation unit that runs a
  // module with autograd recording (itself, or through the functions it
  // calls, depth-bounded) and calls no backward() on the way: a per-batch
  // evaluation helper. The module call found is stored in `inner`.
  bool runs_module_through(const clang::CallExpr* call, const clang::CallExpr** inner = nullptr,
                           int depth = 0) const;
  // The expression naming the module of a module call.
  const clang::Expr* called_module(const clang::Expr* e) const;
  bool is_loss_call(const clang::Expr* e) const;
  // Whether `d`'s value flows into the receiver of a backward() call (or
  // torch::autograd::backward / grad) anywhere in `body`.
  bool feeds_backward(const clang::ValueDecl* d, const clang::Stmt* body) const;
  // The modules whose parameters `optimizer` was built with
  // (`torch::optim::Adam opt(model->parameters(), ...)`); empty when unknown.
  std::vector<const clang::ValueDecl*> optimizer_modules(const clang::ValueDecl* optimizer) const;
  // Whether a zero_grad() call clears gradients `optimizer` steps: the same
  // optimizer, a module whose parameters it owns, or, when either side is
  // unknown, taken as clearing (never evidence of a missing reset).
  // `generator->zero_grad()` does not clear `discriminator_opt`'s parameters.
  bool clears_gradients_of(const clang::CXXMemberCallExpr* zero_grad, const clang::ValueDecl* optimizer) const;
  // backward() calls (method, or torch::autograd::backward) in `body`.
  std::vector<const clang::CallExpr*> backward_calls(const clang::Stmt* body) const;

  // --- devices -----------------------------------------------------------------
  // Where the tensor `e` lives, as far as the translation unit shows:
  // `.cuda()`, `.to(device)` with a CUDA device (torch::kCUDA, a
  // torch::Device built from it, a variable holding one, or
  // `cuda::is_available() ? kCUDA : kCPU`, taken as the accelerator as in
  // Python), a factory given such a device, the output of a module moved to
  // one (`model->to(device)`, also through the callers of a function that
  // receives the module), and torch operations on such tensors; `.cpu()` and
  // `.to(kCPU)` are the host. Unknown otherwise.
  Device device(const clang::Expr* e) const;
  // Where a device expression (torch::kCUDA, torch::Device(...), a
  // variable, a conditional) points.
  Device device_named(const clang::Expr* e, int depth = 0) const;

  // --- data flow ---------------------------------------------------------------
  // The expressions assigned to `d` in `body` (initializer first, then `d = e`
  // and `d op= e` in source order), with the operator ("=", "+=", "init").
  struct Definition {
    const clang::Expr* value;
    const clang::Stmt* statement;  // the assignment, or the DeclStmt
    std::string op;
  };
  std::vector<Definition> definitions(const clang::ValueDecl* d, const clang::Stmt* body) const;
  // Whether `e` mentions `d`, outside the subexpressions `skip` accepts when
  // it is given.
  static bool mentions(const clang::Stmt* e, const clang::ValueDecl* d,
                       llvm::function_ref<bool(const clang::Stmt*)> skip = {});

  // The source text of `e` as written.
  std::string text(const clang::Expr* e) const;
  std::string text(clang::SourceRange r) const;

 private:
  Provenance provenance_at_depth(const clang::Expr* e, int depth) const;
  Provenance merge_operands(const clang::Expr* e, int depth) const;
  bool steps_optimizer(const clang::Stmt* s, int depth) const;
  Device device_at_depth(const clang::Expr* e, int depth) const;
  Device module_device(const clang::ValueDecl* module, int depth) const;
  // What a call of a function with a body in this translation unit returns.
  Provenance returned_by(const clang::CallExpr* call, int depth) const;
  // A tensor, or an aggregate of tensors (a tuple, a struct built from an
  // initializer list, std::make_tuple): the merge of its tensors.
  Provenance aggregate(const clang::Expr* e, int depth) const;
  // The calls being followed, innermost last: a parameter of the function
  // of a frame is read as that call's argument.
  struct Frame {
    const clang::FunctionDecl* function;
    const clang::CallExpr* call;
  };
  mutable std::vector<Frame> frames_;
  // The program's function or lambda a callable expression holds, or null
  // when it is none or not one only (see program_function).
  const clang::FunctionDecl* held_callable(const clang::Expr* e, int depth) const;
  const clang::FunctionDecl* program_definition(const clang::FunctionDecl* callee) const;
  // Whether a module's field holds one of its parameters (assigned from
  // register_parameter, not with requires_grad false).
  bool registered_parameter(const clang::FieldDecl* field) const;
  // The history of element `index` of a tuple: the element a local's
  // initializer, make_tuple or every return of the file's function it comes
  // from spells; nullopt when some return does not spell its elements.
  std::optional<Provenance> element_provenance(const clang::Expr* tuple, uint64_t index, int depth) const;
  const clang::Stmt* parent_stmt(const clang::Stmt* s, const clang::Decl** decl_parent = nullptr) const;

  clang::ASTContext& ctx_;
  const Options& options_;
};

}  // namespace torchleak::cpp
