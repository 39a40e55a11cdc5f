# Writes a C++ source that embeds every *.toml file of a directory: the rule
# catalogue (rules/) or the library models (models/), as (file name, text) pairs
# returned by FUNCTION (default: embedded_catalogue_entries).
# Usage: cmake -DRULES_DIR=... -DOUTPUT=... [-DFUNCTION=...] -P EmbedCatalogue.cmake
if(NOT FUNCTION)
  set(FUNCTION embedded_catalogue_entries)
endif()
file(GLOB entries "${RULES_DIR}/*.toml")
get_filename_component(dir_name "${RULES_DIR}" NAME)
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
set(content "// Generated from ${dir_name}/*.toml by cmake/EmbedCatalogue.cmake. Do not edit.
#include <string>
#include <utility>
#include <vector>

namespace torchleak {
const std::vector<std::pair<std::string, std::string>>& ${FUNCTION}() {
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
