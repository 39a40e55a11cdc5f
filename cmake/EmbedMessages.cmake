# Writes the header of message templates that both frontends' checks format
# (one specification per rule): each rules/*.toml's [messages] table, one
# `name = "template"` per line, becomes
#   namespace torchleak::messages::TL001 { inline constexpr std::string_view name = "template"; }
# Slots are named, `{total}`, and filled with fmt::arg. Header-only, so the
# clang-tidy module (which carries no core library) uses the same texts.
# Usage: cmake -DRULES_DIR=... -DOUTPUT=... -P EmbedMessages.cmake
file(GLOB entries "${RULES_DIR}/*.toml")
list(SORT entries)
set(body "")
set(all "")
foreach(entry IN LISTS entries)
  file(STRINGS "${entry}" lines ENCODING UTF-8)
  set(id "")
  set(in_messages FALSE)
  set(rule_body "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^id = \"(TL[0-9]+)\"")
      set(id "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^\\[messages\\]")
      set(in_messages TRUE)
    elseif(line MATCHES "^\\[")
      set(in_messages FALSE)
    elseif(in_messages AND NOT line STREQUAL "" AND NOT line MATCHES "^#")
      if(NOT line MATCHES "^([a-z_][a-z0-9_]*) = (\"([^\"\\\\]|\\\\.)*\")$")
        message(FATAL_ERROR "${entry}: a [messages] line must be name = \"template\" on one line: ${line}")
      endif()
      string(APPEND rule_body "inline constexpr std::string_view ${CMAKE_MATCH_1} = ${CMAKE_MATCH_2};\n")
      string(APPEND all "    {\"${id}\", \"${CMAKE_MATCH_1}\", ${id}::${CMAKE_MATCH_1}},\n")
    endif()
  endforeach()
  if(NOT rule_body STREQUAL "")
    if(id STREQUAL "")
      message(FATAL_ERROR "${entry}: [messages] in an entry without an id")
    endif()
    string(APPEND body "namespace ${id} {\n${rule_body}}  // namespace ${id}\n")
  endif()
endforeach()
set(content "// Generated from rules/*.toml ([messages]) by cmake/EmbedMessages.cmake. Do not edit.
#pragma once

#include <string_view>

namespace torchleak::messages {
${body}
// Every template, for the test that checks this header against the catalogue.
struct Entry {
  std::string_view rule, name, text;
};
inline constexpr Entry kAll[] = {
${all}};
}  // namespace torchleak::messages
")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${content}")
