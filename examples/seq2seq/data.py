"""Synthetic tagging data with on-the-fly token dropout augmentation."""
import numpy as np
import torch
from torch.utils.data import Dataset


class TokenDropout:
    def __init__(self, p: float, seed: int = 0):
        self.p = p
        self.rng = np.random.default_rng(seed)

    def __call__(self, tokens: np.ndarray) -> np.ndarray:
        keep = self.rng.random(len(tokens)) >= self.p
        return np.where(keep, tokens, 1)


class TaggingDataset(Dataset):
    def __init__(self, size: int, vocab_size: int, num_tags: int, max_len: int = 64):
        self.size = size
        self.vocab_size = vocab_size
        self.num_tags = num_tags
        self.max_len = max_len
        self.augment = TokenDropout(p=0.1)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        length = 8 + index % (self.max_len - 8)
        tokens = np.random.randint(2, self.vocab_size, size=length)
        tags = tokens % self.num_tags
        return torch.from_numpy(self.augment(tokens)), torch.from_numpy(tags)


def collate(batch):
    tokens, tags = zip(*batch)
    lengths = torch.tensor([len(t) for t in tokens])
    tokens = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True)
    tags = torch.nn.utils.rnn.pad_sequence(tags, batch_first=True, padding_value=-100)
    return tokens, tags, lengths
