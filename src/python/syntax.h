// Thin, allocation-free helpers over tree-sitter's Python syntax tree.
#pragma once

#include <tree_sitter/api.h>

#include <array>
#include <cstdint>
#include <iterator>
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
  AssertStatement,
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

// Parses Python, bridging the pinned grammar's known gap: a starred
// parenthesized, bracketed or braced element in an unparenthesized tuple
// (`return a, *(x for x in b)`, `y = a, *[c]`) is valid Python (3.8+) that
// tree-sitter-python (0.23 and 0.25 alike) cannot parse. When the tree has
// errors, each such `*` inside an ERROR node is read as a blank in a second
// parse, which keeps every byte offset; that tree is used when it has no
// errors. The source text itself is never changed: nodes read the original.
TSTree* parse_python(TSParser* parser, std::string_view text);

// The Kind of each of the grammar's symbols, filled when the program starts.
extern const std::vector<Kind> kKindBySymbol;

// Whether each of the grammar's symbols names a named node.
extern const std::vector<bool> kNamedBySymbol;

constexpr TSSymbol kErrorSymbol = static_cast<TSSymbol>(-1);  // ts_builtin_sym_error

// The Kind of a symbol as ts_node_symbol gives it.
inline Kind kind_of_symbol(TSSymbol sym) {
  if (sym == kErrorSymbol) return Kind::Error;
  return sym < kKindBySymbol.size() ? kKindBySymbol[sym] : Kind::Other;
}

// What ts_node_is_named answers, from the symbol ts_node_symbol gives (an
// alias's, when the node is aliased): one call into the library for both.
inline bool symbol_is_named(TSSymbol sym) {
  return sym == kErrorSymbol || (sym < kNamedBySymbol.size() && kNamedBySymbol[sym]);
}

// Called for nearly every node the model and the checks look at: inline, and
// a null node (id 0) is told apart without a call into the library.
inline Kind kind_of(TSNode node) {
  if (node.id == nullptr) return Kind::Other;
  return kind_of_symbol(ts_node_symbol(node));
}

inline bool is_null(TSNode n) { return n.id == nullptr; }  // what ts_node_is_null tests, without the call
inline uint32_t start_byte(TSNode n) { return ts_node_start_byte(n); }
inline uint32_t end_byte(TSNode n) { return ts_node_end_byte(n); }
inline bool contains(TSNode outer, uint32_t byte) {
  return start_byte(outer) <= byte && byte < end_byte(outer);
}

// The grammar's field names, sorted. A name passed to field() is looked up in
// this list when the program is compiled (a misspelt field does not compile);
// the grammar's id for each is looked up once, when the program starts.
inline constexpr std::string_view kFieldNames[] = {
    "alias",     "alternative",  "argument",    "arguments",  "attribute",        "body",
    "cause",     "code",         "condition",   "consequence", "definition",      "expression",
    "format_specifier", "function", "guard",    "key",        "left",             "module_name",
    "name",      "object",       "operator",    "operators",  "parameters",       "return_type",
    "right",     "subject",      "subscript",   "superclasses", "type",           "type_conversion",
    "type_parameters", "value",
};
inline constexpr size_t kFieldCount = std::size(kFieldNames);

class FieldName {
 public:
  consteval FieldName(const char* name) : index_(lookup(name)) {}  // NOLINT: implicit from a literal on purpose
  constexpr uint8_t index() const { return index_; }

 private:
  static consteval uint8_t lookup(std::string_view name) {
    for (size_t i = 0; i < kFieldCount; ++i)
      if (kFieldNames[i] == name) return static_cast<uint8_t>(i);
    throw "not a field of the Python grammar";  // a compile error: consteval cannot throw
  }
  uint8_t index_;
};

// The grammar's id of each of kFieldNames, filled when the program starts.
extern const std::array<TSFieldId, kFieldCount> kFieldIds;

inline TSNode field(TSNode n, FieldName name) { return ts_node_child_by_field_id(n, kFieldIds[name.index()]); }

// The fields of the commonest nodes, found faster than field() finds them
// (it searches the node's children and their field map) and always agreeing
// with it: a call's `function` and `arguments`, a keyword argument's `name`
// and `value`, an attribute's `object` and `attribute` are the node's first
// and last children. A comment may sit between them, never before the first
// or after the last; when one does appear there, field() answers.
TSNode call_function(TSNode call);
TSNode call_arguments(TSNode call);
TSNode keyword_name(TSNode keyword);
TSNode keyword_value(TSNode keyword);
TSNode attribute_object(TSNode attribute);
TSNode attribute_name(TSNode attribute);
// The first named child of the given kind, or a null node.
TSNode child_of_kind(TSNode n, Kind k);
// The node with parentheses peeled off.
TSNode unparenthesize(TSNode n);
// Whether `node` runs whenever `ancestor` does: no branch (if, conditional
// expression, boolean short-circuit), loop, try or nested function between
// them.
bool unconditional_within(TSNode node, TSNode ancestor);

// Calls `f(child)` for each named child of `n`, in source order. Asking
// ts_node_named_child(n, i) for each i starts from the first child every
// time, quadratic over a wide node (a module of 2,000 statements, a table
// literal); past a few children one cursor pass visits them all.
template <class F>
void for_each_named_child(TSNode n, F&& f) {
  uint32_t count = n.id == nullptr ? 0 : ts_node_named_child_count(n);
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

// ASCII letters, digits and `_`, without the locale lookups of std::isalnum.
constexpr bool word_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Whether `t` is written as a plain dotted name, `a.b.c` (or a lone name):
// ASCII identifier characters and single dots, no component starting with a
// digit, and a head that is not None, True or False (those are not names).
// An attribute chain written so has no parentheses, call, subscript, comment
// or line break inside it, so its text says all that walking it would.
bool plain_dotted_name(std::string_view t);

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
