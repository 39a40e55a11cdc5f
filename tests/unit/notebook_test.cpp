// Notebooks (core/notebook.h): the program the code cells make, with IPython's
// own syntax masked, and positions mapped back to cells.
#include <gtest/gtest.h>

#include "core/notebook.h"

using namespace torchleak;

namespace {

std::string notebook(const std::string& cells) {
  return R"({"cells": [)" + cells + R"(], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})";
}

std::string program_of(const std::string& text) {
  std::string error, language;
  auto nb = read_notebook(text, error, language);
  EXPECT_TRUE(nb) << error;
  return nb ? nb->program : std::string();
}

TEST(Notebook, CodeCellsInOrderWithMagicsMasked) {
  std::string text = notebook(
      R"J({"cell_type": "markdown", "source": ["# Title"]},)J"
      R"J({"cell_type": "code", "source": ["%load_ext autoreload\n", "import torch\n", "!pip install \\\n", "  x\n", "y = 1"]},)J"
      R"J({"cell_type": "raw", "source": "%not code"},)J"
      R"J({"cell_type": "code", "source": "files = !ls\nout = %time f(x)\nif a != b:\n    model?\nx %= 2\nz = a % b"},)J"
      R"J({"cell_type": "code", "source": ["%%timeit -n 2\n", "f(x)"]},)J"
      R"J({"cell_type": "code", "source": ["%%writefile a.py\n", "import os"]})J");
  EXPECT_EQ(program_of(text),
            "pass\nimport torch\npass\n\ny = 1\n"
            "pass\npass\nif a != b:\n    pass\nx %= 2\nz = a % b\n"
            "\nf(x)\n"
            "\n\n");
}

TEST(Notebook, PositionsInCellsAndInTheFile) {
  std::string text = notebook(
      "\n {\"cell_type\": \"markdown\", \"source\": [\"# A\"]},\n"
      " {\"cell_type\": \"code\", \"source\": [\n  \"a = 1\\n\",\n  \"b = \\\"\\u00e9\\\" + c\"\n ]}");
  std::string error, language;
  auto nb = read_notebook(text, error, language);
  ASSERT_TRUE(nb) << error;
  EXPECT_EQ(nb->program, "a = 1\nb = \"\xC3\xA9\" + c\n");
  // `c` on the second line of cell 2: byte 11 of that line (é is two bytes).
  uint32_t at = static_cast<uint32_t>(nb->program.find('c'));
  NotebookPosition p = locate(*nb, text, at);
  EXPECT_EQ(p.cell, 2u);
  EXPECT_EQ(p.in_cell, (Position{2, 11}));
  EXPECT_EQ(p.file_line, "  \"b = \\\"\\u00e9\\\" + c\"");
  EXPECT_EQ(p.in_file.line, 5u);
  EXPECT_EQ(p.file_line.substr(p.in_file.column, 2), "c\"");
}

TEST(Notebook, EditsGoBackIntoTheirCellOnly) {
  std::string text = notebook(
      "\n {\"cell_type\": \"code\", \"source\": [\n  \"%time x\\n\",\n  \"total += loss\\n\",\n  \"done = 1\"\n ]}");
  std::string error, language;
  auto nb = read_notebook(text, error, language);
  ASSERT_TRUE(nb) << error;
  uint32_t at = static_cast<uint32_t>(nb->program.find("loss") + 4);
  std::string out = apply_to_notebook(*nb, text, {Edit{at, at, ".item()"}}, error);
  EXPECT_EQ(error, "");
  std::string want = text;
  want.replace(want.find("loss\\n"), 4, "loss.item()");
  EXPECT_EQ(out, want);
  // Into a masked magic: refused, nothing changed.
  std::string refused = apply_to_notebook(*nb, text, {Edit{0, 4, "x"}}, error);
  EXPECT_EQ(refused, text);
  EXPECT_EQ(error, "a fix reaches across cells or into an IPython magic");
}

TEST(Notebook, MalformedNotebooksSayWhy) {
  std::string error, language;
  EXPECT_FALSE(read_notebook("[1, 2]", error, language));
  EXPECT_EQ(error, "not a Jupyter notebook: no \"nbformat\" number");
  EXPECT_FALSE(read_notebook(R"({"nbformat": 4, "metadata": {}})", error, language));
  EXPECT_EQ(error, "not a Jupyter notebook: no \"cells\" list");
  error.clear();
  EXPECT_FALSE(read_notebook(R"({"nbformat": 4, "cells": [], "metadata": {"kernelspec": {"language": "julia"}}})",
                             error, language));
  EXPECT_EQ(error, "");
  EXPECT_EQ(language, "julia");
}

}  // namespace
