// rule: TL010
// source: https://example.org/five
// year: 2022
// expected: TL010@11
// note: C++ loops found by their braces; a brace in a comment or a string does not count.
// fake: TL010@9, TL010@13
void train() {
  const char* s = "{";  // }
  for (int i = 0; i < 3; ++i) {
    /* { */
    step(i);
  }
  // (the finding on line 13 is just past the loop)
  while (more()) {
    go();
  }
  done();
}
