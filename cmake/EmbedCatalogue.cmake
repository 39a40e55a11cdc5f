# Writes a C++ source that embeds every rules/*.toml catalogue entry.
# Usage: cmake -DRULES_DIR=... -DOUTPUT=... -P EmbedCatalogue.cmake
file(GLOB entries "${RULES_DIR}/*.toml")
list(SORT entries)
set(body "")
foreach(entry IN LISTS entries)
  file(READ "${entry}" text)
  get_filename_component(name "${entry}" NAME)
  string(FIND "${text}" ")tlcat\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${entry} contains the raw-string delimiter )tlcat\"")
  endif()
  string(APPEND body "      {\"${name}\", R\"tlcat(${text})tlcat\"},\n")
endforeach()
set(content "// Generated from rules/*.toml by cmake/EmbedCatalogue.cmake. Do not edit.
#include <string>
#include <utility>
#include <vector>

namespace torchleak {
const std::vector<std::pair<std::string, std::string>>& embedded_catalogue_entries() {
  static const std::vector<std::pair<std::string, std::string>> entries = {
${body}  };
  return entries;
}
}  // namespace torchleak
")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${content}")
