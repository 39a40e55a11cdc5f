# rule: TL001
# source: https://example.org/one
# year: 2020
# expected: TL001@9, TL002@10
# note: One label matched on its line, one missed.
# fake: TL001@9
total = 0
for batch in range(3):
    total += batch
    kept.append(batch)
