// Thin, allocation-free helpers over tree-sitter's Python syntax tree.
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <string>
#include <string_view>

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
