"""Train the tagger on every visible GPU."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from data import TaggingDataset, collate
from model import Tagger


def evaluate(model, loader, criterion, device):
    model.eval()
    total, batches = 0.0, 0
    with torch.no_grad():
        for tokens, tags, lengths in loader:
            logits = model(tokens.to(device), lengths)
            total += criterion(logits.flatten(0, 1), tags.to(device).flatten()).item()
            batches += 1
    return total / max(batches, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.DataParallel(Tagger(vocab_size=30000, num_tags=17)).to(device)
    criterion = nn.CrossEntropyLoss(ignore_index=-100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    train_set = TaggingDataset(size=50000, vocab_size=30000, num_tags=17)
    val_set = TaggingDataset(size=2000, vocab_size=30000, num_tags=17)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=args.workers,
                              collate_fn=collate)
    val_loader = DataLoader(val_set, batch_size=128, collate_fn=collate)

    for epoch in range(args.epochs):
        model.train()
        epoch_loss = 0.0
        losses = []
        for tokens, tags, lengths in train_loader:
            optimizer.zero_grad()
            logits = model(tokens.to(device), lengths)
            loss = criterion(logits.flatten(0, 1), tags.to(device).flatten())
            loss.backward()
            optimizer.step()
            epoch_loss += loss
            losses.append(loss)
        val_loss = evaluate(model, val_loader, criterion, device)
        print(f"epoch {epoch}: train {epoch_loss / len(train_loader):.4f} val {val_loss:.4f}")


if __name__ == "__main__":
    main()
