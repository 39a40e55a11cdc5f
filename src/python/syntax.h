// Thin, allocation-free helpers over tree-sitter's Python syntax tree.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace torchleak::python {

// The node kinds the semantic model and the checks care about. Every other
// kind maps to Other. Lookup is a table indexed by tree-sitter symbol.
enum class Kind : uint8_t {
  Other,
  Module,
  Error,
  FunctionDefinition,
  ClassDefinition,
  DecoratedDefinition,
  Decorator,
  Lambda,
  ForStatement,
  WhileStatement,
  ListComprehension,
  SetComprehension,
  DictionaryComprehension,
  GeneratorExpression,
  ForInClause,
  IfStatement,
  IfClause,
  ElseClause,
  ElifClause,
  TryStatement,
  WithStatement,
  WithItem,
  AsPattern,
  Block,
  ExpressionStatement,
  Assignment,
  AugmentedAssignment,
  NamedExpression,
  ReturnStatement,
  GlobalStatement,
  ImportStatement,
  ImportFromStatement,
  AliasedImport,
  DottedName,
  RelativeImport,
  Call,
  ArgumentList,
  KeywordArgument,
  Attribute,
  Identifier,
  Subscript,
  BinaryOperator,
  UnaryOperator,
  BooleanOperator,
  ComparisonOperator,
  NotOperator,
  ConditionalExpression,
  ParenthesizedExpression,
  Tuple,
  List,
  Set,
  Dictionary,
  PatternList,
  TuplePattern,
  ListPattern,
  ExpressionList,
  Parameters,
  DefaultParameter,
  TypedParameter,
  TypedDefaultParameter,
  ListSplat,
  DictionarySplat,
  Integer,
  Float,
  String,
  True,
  False,
  None,
  Comment,
  Await,
  Count
};

const TSLanguage* language();
Kind kind_of(TSNode node);

inline bool is_null(TSNode n) { return ts_node_is_null(n); }
inline uint32_t start_byte(TSNode n) { return ts_node_start_byte(n); }
inline uint32_t end_byte(TSNode n) { return ts_node_end_byte(n); }
inline bool contains(TSNode outer, uint32_t byte) {
  return start_byte(outer) <= byte && byte < end_byte(outer);
}

TSNode field(TSNode n, std::string_view name);
// The first named child of the given kind, or a null node.
TSNode child_of_kind(TSNode n, Kind k);
// The node with parentheses peeled off.
TSNode unparenthesize(TSNode n);

// Calls `f(child)` for each named child of `n`, in source order. Asking
// ts_node_named_child(n, i) for each i starts from the first child every
// time, quadratic over a wide node (a module of 2,000 statements, a table
// literal); past a few children one cursor pass visits them all.
template <class F>
void for_each_named_child(TSNode n, F&& f) {
  uint32_t count = ts_node_is_null(n) ? 0 : ts_node_named_child_count(n);
  if (count <= 4) {
    for (uint32_t i = 0; i < count; ++i) f(ts_node_named_child(n, i));
    return;
  }
  TSTreeCursor cursor = ts_tree_cursor_new(n);
  if (ts_tree_cursor_goto_first_child(&cursor)) {
    do {
      TSNode c = ts_tree_cursor_current_node(&cursor);
      if (ts_node_is_named(c)) f(c);
    } while (ts_tree_cursor_goto_next_sibling(&cursor));
  }
  ts_tree_cursor_delete(&cursor);
}

// Pushes the named children of `n` onto a work stack, last child first, so
// that they are popped in source order.
void push_named_children(TSNode n, std::vector<TSNode>& work);

class SourceText {
 public:
  explicit SourceText(std::string_view text) : text_(text) {}
  std::string_view text() const { return text_; }
  std::string_view of(TSNode n) const {
    uint32_t s = start_byte(n), e = end_byte(n);
    if (s > text_.size() || e > text_.size() || e < s) return {};
    return text_.substr(s, e - s);
  }
  // The line containing `byte`, without its terminator.
  std::string_view line_at(uint32_t byte) const;

 private:
  std::string_view text_;
};

}  // namespace torchleak::python
