"""A small sequence tagger: a bidirectional LSTM over padded batches."""
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Tagger(nn.Module):
    def __init__(self, vocab_size: int, num_tags: int, hidden: int = 256):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 128, padding_idx=0)
        self.lstm = nn.LSTM(128, hidden, batch_first=True, bidirectional=True)
        self.proj = nn.Linear(2 * hidden, num_tags)

    def forward(self, tokens, lengths):
        embedded = self.embed(tokens)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(output, batch_first=True)
        # Kept for the attention visualisation in notebooks.
        self.last_hidden = output
        return self.proj(output)
