# rule: TL006
# source: https://example.org/two
# source: https://example.org/three
# year: 2024
# expected: TL006@11
# note: A loop-level label: the two findings in its loop are one match; the one
#   outside any loop is a false positive.
# fake: TL006@10, TL006@12, TL009@13
def evaluate(model, loader):
    for batch in loader:
        out = model(batch)
        print(out)
    print("done")
