# expected: none
# fake: TL002@4
losses = []
losses.append(1)
