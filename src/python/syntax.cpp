#include "python/syntax.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <cstring>
#include <vector>

extern "C" const TSLanguage* tree_sitter_python();

namespace torchleak::python {

namespace {

struct KindName {
  const char* name;
  Kind kind;
};

constexpr KindName kKindNames[] = {
    {"module", Kind::Module},
    {"ERROR", Kind::Error},
    {"function_definition", Kind::FunctionDefinition},
    {"class_definition", Kind::ClassDefinition},
    {"decorated_definition", Kind::DecoratedDefinition},
    {"decorator", Kind::Decorator},
    {"lambda", Kind::Lambda},
    {"for_statement", Kind::ForStatement},
    {"while_statement", Kind::WhileStatement},
    {"list_comprehension", Kind::ListComprehension},
    {"set_comprehension", Kind::SetComprehension},
    {"dictionary_comprehension", Kind::DictionaryComprehension},
    {"generator_expression", Kind::GeneratorExpression},
    {"for_in_clause", Kind::ForInClause},
    {"if_statement", Kind::IfStatement},
    {"assert_statement", Kind::AssertStatement},
    {"if_clause", Kind::IfClause},
    {"else_clause", Kind::ElseClause},
    {"elif_clause", Kind::ElifClause},
    {"try_statement", Kind::TryStatement},
    {"with_statement", Kind::WithStatement},
    {"with_item", Kind::WithItem},
    {"as_pattern", Kind::AsPattern},
    {"block", Kind::Block},
    {"expression_statement", Kind::ExpressionStatement},
    {"assignment", Kind::Assignment},
    {"augmented_assignment", Kind::AugmentedAssignment},
    {"named_expression", Kind::NamedExpression},
    {"return_statement", Kind::ReturnStatement},
    {"global_statement", Kind::GlobalStatement},
    {"import_statement", Kind::ImportStatement},
    {"import_from_statement", Kind::ImportFromStatement},
    {"aliased_import", Kind::AliasedImport},
    {"dotted_name", Kind::DottedName},
    {"relative_import", Kind::RelativeImport},
    {"call", Kind::Call},
    {"argument_list", Kind::ArgumentList},
    {"keyword_argument", Kind::KeywordArgument},
    {"attribute", Kind::Attribute},
    {"identifier", Kind::Identifier},
    {"subscript", Kind::Subscript},
    {"binary_operator", Kind::BinaryOperator},
    {"unary_operator", Kind::UnaryOperator},
    {"boolean_operator", Kind::BooleanOperator},
    {"comparison_operator", Kind::ComparisonOperator},
    {"not_operator", Kind::NotOperator},
    {"conditional_expression", Kind::ConditionalExpression},
    {"parenthesized_expression", Kind::ParenthesizedExpression},
    {"tuple", Kind::Tuple},
    {"list", Kind::List},
    {"set", Kind::Set},
    {"dictionary", Kind::Dictionary},
    {"pattern_list", Kind::PatternList},
    {"tuple_pattern", Kind::TuplePattern},
    {"list_pattern", Kind::ListPattern},
    {"expression_list", Kind::ExpressionList},
    {"parameters", Kind::Parameters},
    {"default_parameter", Kind::DefaultParameter},
    {"typed_parameter", Kind::TypedParameter},
    {"typed_default_parameter", Kind::TypedDefaultParameter},
    {"list_splat", Kind::ListSplat},
    {"dictionary_splat", Kind::DictionarySplat},
    {"integer", Kind::Integer},
    {"float", Kind::Float},
    {"string", Kind::String},
    {"true", Kind::True},
    {"false", Kind::False},
    {"none", Kind::None},
    {"comment", Kind::Comment},
    {"await", Kind::Await},
};

std::vector<Kind> kinds_by_symbol() {
  const TSLanguage* lang = tree_sitter_python();
  uint32_t n = ts_language_symbol_count(lang);
  std::vector<Kind> by_symbol(n, Kind::Other);
  for (uint32_t sym = 0; sym < n; ++sym) {
    // Only named symbols: the anonymous "lambda" keyword is not a lambda node.
    if (ts_language_symbol_type(lang, static_cast<TSSymbol>(sym)) != TSSymbolTypeRegular) continue;
    const char* name = ts_language_symbol_name(lang, static_cast<TSSymbol>(sym));
    for (const auto& kn : kKindNames) {
      if (std::strcmp(kn.name, name) == 0) {
        by_symbol[sym] = kn.kind;
        break;
      }
    }
  }
  return by_symbol;
}

std::vector<bool> named_by_symbol() {
  const TSLanguage* lang = tree_sitter_python();
  uint32_t n = ts_language_symbol_count(lang);
  std::vector<bool> named(n, false);
  for (uint32_t sym = 0; sym < n; ++sym)
    named[sym] = ts_language_symbol_type(lang, static_cast<TSSymbol>(sym)) == TSSymbolTypeRegular;
  return named;
}

std::array<TSFieldId, kFieldCount> field_ids() {
  std::array<TSFieldId, kFieldCount> ids{};
  const TSLanguage* lang = tree_sitter_python();
  for (size_t i = 0; i < kFieldCount; ++i)
    ids[i] = ts_language_field_id_for_name(lang, kFieldNames[i].data(), static_cast<uint32_t>(kFieldNames[i].size()));
  return ids;
}

}  // namespace

const TSLanguage* language() { return tree_sitter_python(); }

// Built before any other namespace-scope object of the program (the lowest
// priority GCC and Clang leave to programs): nothing can ask a node's kind or
// field while these tables are still empty.
__attribute__((init_priority(101))) const std::vector<Kind> kKindBySymbol = kinds_by_symbol();
__attribute__((init_priority(101))) const std::vector<bool> kNamedBySymbol = named_by_symbol();

// Id 0 (a name the grammar lacks) makes ts_node_child_by_field_id give a null
// node; a test checks that every name is the grammar's.
__attribute__((init_priority(101))) const std::array<TSFieldId, kFieldCount> kFieldIds = field_ids();

bool plain_dotted_name(std::string_view t) {
  if (t.empty()) return false;
  bool component_start = true;
  for (char c : t) {
    if (c == '.') {
      if (component_start) return false;
      component_start = true;
      continue;
    }
    if (!word_byte(c) || (component_start && c >= '0' && c <= '9')) return false;
    component_start = false;
  }
  if (component_start) return false;
  std::string_view head = t.substr(0, t.find('.'));
  return head != "None" && head != "True" && head != "False";
}

namespace {

TSNode first_child(TSNode n) {
  TSNode c = ts_node_child(n, 0);
  return kind_of(c) == Kind::Comment ? TSNode{} : c;
}

TSNode last_child(TSNode n) {
  uint32_t count = ts_node_child_count(n);
  TSNode c = count ? ts_node_child(n, count - 1) : TSNode{};
  return kind_of(c) == Kind::Comment ? TSNode{} : c;
}

}  // namespace

TSNode call_function(TSNode call) {
  TSNode c = first_child(call);
  return is_null(c) ? field(call, "function") : c;
}

TSNode call_arguments(TSNode call) {
  TSNode c = last_child(call);
  Kind k = kind_of(c);
  return k == Kind::ArgumentList || k == Kind::GeneratorExpression ? c : field(call, "arguments");
}

TSNode keyword_name(TSNode keyword) {
  TSNode c = first_child(keyword);
  return kind_of(c) == Kind::Identifier ? c : field(keyword, "name");
}

TSNode keyword_value(TSNode keyword) {
  TSNode c = last_child(keyword);
  return is_null(c) || !ts_node_is_named(c) ? field(keyword, "value") : c;
}

TSNode attribute_object(TSNode attribute) {
  TSNode c = first_child(attribute);
  return is_null(c) || !ts_node_is_named(c) ? field(attribute, "object") : c;
}

TSNode attribute_name(TSNode attribute) {
  TSNode c = last_child(attribute);
  return kind_of(c) == Kind::Identifier && ts_node_child_count(attribute) >= 3 ? c : field(attribute, "attribute");
}

TSNode child_of_kind(TSNode n, Kind k) {
  TSNode found{};
  for_each_named_child(n, [&](TSNode c) {
    if (ts_node_is_null(found) && kind_of(c) == k) found = c;
  });
  return found;
}

void push_named_children(TSNode n, std::vector<TSNode>& work) {
  size_t first = work.size();
  for_each_named_child(n, [&](TSNode c) { work.push_back(c); });
  std::reverse(work.begin() + static_cast<std::ptrdiff_t>(first), work.end());
}

TSNode unparenthesize(TSNode n) {
  while (!ts_node_is_null(n) && kind_of(n) == Kind::ParenthesizedExpression &&
         ts_node_named_child_count(n) == 1) {
    n = ts_node_named_child(n, 0);
  }
  return n;
}

bool unconditional_within(TSNode node, TSNode ancestor) {
  for (TSNode n = ts_node_parent(node); !is_null(n) && !ts_node_eq(n, ancestor); n = ts_node_parent(n)) {
    switch (kind_of(n)) {
      case Kind::IfStatement:
      case Kind::ConditionalExpression:
      case Kind::BooleanOperator:
      case Kind::ForStatement:
      case Kind::WhileStatement:
      case Kind::TryStatement:
      case Kind::FunctionDefinition: return false;
      default: break;
    }
  }
  return true;
}

std::string_view SourceText::line_at(uint32_t byte) const {
  size_t pos = std::min<size_t>(byte, text_.size());
  size_t begin = pos == 0 ? std::string_view::npos : text_.rfind('\n', pos - 1);
  begin = begin == std::string_view::npos ? 0 : begin + 1;
  size_t end = text_.find('\n', pos);
  if (end == std::string_view::npos) end = text_.size();
  std::string_view line = text_.substr(begin, end - begin);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace torchleak::python

namespace torchleak::python {

namespace {

// The `*` tokens in the parts of the tree with errors that star a
// parenthesized, bracketed or braced element after a comma, an `=` or
// `return`/`yield` (the recovery puts them in an ERROR node, or in a
// list_splat over one).
void starred_gaps(TSNode n, std::string_view text, std::vector<uint32_t>& out) {
  uint32_t count = ts_node_child_count(n);
  if (count == 0) {
    if (std::string_view(ts_node_type(n)) != "*") return;
    uint32_t s = ts_node_start_byte(n), e = ts_node_end_byte(n);
    size_t next = e;
    while (next < text.size() && (text[next] == ' ' || text[next] == '\t')) ++next;
    if (next >= text.size() || std::string_view("([{").find(text[next]) == std::string_view::npos) return;
    size_t prev = s;
    while (prev > 0 && (text[prev - 1] == ' ' || text[prev - 1] == '\t')) --prev;
    if (prev == 0) return;
    char p = text[prev - 1];
    auto ends_with_word = [&](std::string_view w) {
      return prev >= w.size() && text.substr(prev - w.size(), w.size()) == w &&
             (prev == w.size() || !(std::isalnum(static_cast<unsigned char>(text[prev - w.size() - 1])) ||
                                    text[prev - w.size() - 1] == '_'));
    };
    if (p == ',' || (p == '=' && (prev < 2 || std::string_view("=!<>+-*/%&|^@:").find(text[prev - 2]) ==
                                                  std::string_view::npos)) ||
        ends_with_word("return") || ends_with_word("yield"))
      out.push_back(s);
    return;
  }
  if (!ts_node_has_error(n)) return;
  for (uint32_t i = 0; i < count; ++i) starred_gaps(ts_node_child(n, i), text, out);
}

}  // namespace

TSTree* parse_python(TSParser* parser, std::string_view text) {
  TSTree* tree = ts_parser_parse_string(parser, nullptr, text.data(), static_cast<uint32_t>(text.size()));
  if (!tree || !ts_node_has_error(ts_tree_root_node(tree))) return tree;
  std::vector<uint32_t> gaps;
  starred_gaps(ts_tree_root_node(tree), text, gaps);
  if (gaps.empty()) return tree;
  std::string bridged(text);
  for (uint32_t at : gaps) bridged[at] = ' ';
  TSTree* second = ts_parser_parse_string(parser, nullptr, bridged.data(), static_cast<uint32_t>(bridged.size()));
  if (!second || ts_node_has_error(ts_tree_root_node(second))) {
    if (second) ts_tree_delete(second);
    return tree;
  }
  ts_tree_delete(tree);
  return second;
}

}  // namespace torchleak::python
