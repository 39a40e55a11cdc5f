// Jupyter notebooks (nbformat 4): the code cells as one Python program, in
// cell order, with IPython magics and shell escapes masked; positions in that
// program mapped back to a cell and to the notebook file's own text; edits of
// the program written back into the notebook, every byte outside the edited
// source lines left as it was.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnostic.h"

namespace torchleak {

// Whether a path names a notebook (by its extension, .ipynb).
bool is_notebook_path(std::string_view path);

struct NotebookCell {
  uint32_t number = 0;      // 1-based, among all the notebook's cells (markdown ones too)
  std::string source;       // the cell's source as the notebook holds it
  uint32_t first_line = 1;  // the program line of the cell's first line
  uint32_t program_begin = 0, program_end = 0;  // its bytes in the program
  std::vector<uint32_t> line_starts;            // byte offsets of its lines in `source`
  std::vector<bool> masked;                     // per line: a magic or shell escape
  // The "source" value in the notebook's text: [raw_begin, raw_end); when it
  // is a list of strings, each element's literal (quotes included) and where
  // its decoded text starts in `source`.
  size_t raw_begin = 0, raw_end = 0;
  bool list = false;
  struct Piece {
    size_t raw_begin, raw_end;
    uint32_t source_begin;
  };
  std::vector<Piece> pieces;
};

struct Notebook {
  std::string program;              // the code cells, one after the other
  std::vector<NotebookCell> cells;  // the code cells only
  std::vector<uint32_t> raw_line_starts;  // of the notebook's text
};

// Reads a notebook's text. A malformed notebook (not JSON, not nbformat 4,
// cells without sources) sets `error` to why and returns nothing; a notebook
// of another language sets `other_language` to it and returns nothing.
std::optional<Notebook> read_notebook(std::string_view text, std::string& error, std::string& other_language);

// Where a program position is in the notebook: the cell and the position in
// its source, and the position in the notebook's text (with that line's text).
struct NotebookPosition {
  uint32_t cell = 0;
  Position in_cell;
  Position in_file;
  std::string file_line;
};
NotebookPosition locate(const Notebook& notebook, std::string_view raw, uint32_t program_byte);

// The notebook's text with `edits` (byte ranges of the program) applied to the
// cells' sources. An edit that crosses a cell boundary or touches a masked
// line is not applied: `error` says so and the text is returned unchanged.
std::string apply_to_notebook(const Notebook& notebook, std::string_view raw, const std::vector<Edit>& edits,
                              std::string& error);

// An edit of the program as an edit of one cell's source (bytes of the cell).
struct CellEdit {
  uint32_t cell = 0;
  Edit edit;
};
std::optional<CellEdit> cell_edit(const Notebook& notebook, const Edit& edit);

}  // namespace torchleak
