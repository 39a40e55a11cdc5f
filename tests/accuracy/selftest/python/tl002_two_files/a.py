# rule: TL002
# source: https://example.org/four
# year: 2019
# expected: none
# note: A negative of two files; the false positive is in the other one.
import b
