#!/usr/bin/env node
// How long `torchleak lsp` takes to publish diagnostics after a change to a
// large training script: the editor's wait, from the didChange notification
// to the publishDiagnostics for that version, debounce included.
//
//   node bench/lsp/latency.js TORCHLEAK [--lines 2000] [--changes 21] [--workspace DIR]
//
// The script is a realistic training module repeated until it has --lines
// lines (functions renamed per copy), with one leaking accumulation per copy.
// Each change rewrites one line (full-text sync, as many editors send); the
// median, minimum and maximum over --changes changes are printed, with the
// server's debounce (100 ms) included and shown separately.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const { pathToFileURL } = require('url');

const args = process.argv.slice(2);
const binary = args[0];
const option = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
if (!binary) { console.error('usage: latency.js TORCHLEAK [--lines N] [--changes K] [--workspace DIR]'); process.exit(2); }
const wantLines = Number(option('--lines', 2000));
const changes = Number(option('--changes', 21));

function block(i) {
  return [
    `class Encoder${i}(nn.Module):`,
    `    def __init__(self, vocab, dim=256):`,
    `        super().__init__()`,
    `        self.embed = nn.Embedding(vocab, dim)`,
    `        self.rnn = nn.GRU(dim, dim, batch_first=True)`,
    `        self.head = nn.Linear(dim, vocab)`,
    ``,
    `    def forward(self, tokens):`,
    `        out, _ = self.rnn(self.embed(tokens))`,
    `        return self.head(out)`,
    ``,
    ``,
    `def train_epoch_${i}(model, loader, optimizer, criterion, device):`,
    `    model.train()`,
    `    running = 0.0`,
    `    for step, (tokens, targets) in enumerate(loader):`,
    `        tokens, targets = tokens.to(device), targets.to(device)`,
    `        optimizer.zero_grad()`,
    `        logits = model(tokens)`,
    `        loss = criterion(logits.flatten(0, 1), targets.flatten())`,
    `        loss.backward()`,
    `        optimizer.step()`,
    `        running += loss`,
    `    return running / max(1, len(loader))`,
    ``,
    ``,
    `@torch.no_grad()`,
    `def evaluate_${i}(model, loader, criterion, device):`,
    `    model.eval()`,
    `    total, count = 0.0, 0`,
    `    for tokens, targets in loader:`,
    `        logits = model(tokens.to(device))`,
    `        total += criterion(logits.flatten(0, 1), targets.to(device).flatten()).item()`,
    `        count += 1`,
    `    return total / max(1, count)`,
    ``,
    ``,
  ];
}
let lines = ['import torch', 'from torch import nn', '', ''];
for (let i = 0; lines.length < wantLines; i++) lines = lines.concat(block(i));
lines = lines.slice(0, wantLines);
const text = lines.join('\n') + '\n';

const workspace = option('--workspace', fs.mkdtempSync(path.join(os.tmpdir(), 'torchleak-lsp-bench-')));
const file = path.join(workspace, 'train_big.py');
fs.writeFileSync(file, text);
const uri = pathToFileURL(file).href;

const server = spawn(binary, ['lsp'], { stdio: ['pipe', 'pipe', 'inherit'] });
let buffer = Buffer.alloc(0);
const waiters = [];
server.stdout.on('data', (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  for (;;) {
    const sep = buffer.indexOf('\r\n\r\n');
    if (sep < 0) return;
    const len = Number(/Content-Length: (\d+)/i.exec(buffer.slice(0, sep).toString())[1]);
    if (buffer.length < sep + 4 + len) return;
    const msg = JSON.parse(buffer.slice(sep + 4, sep + 4 + len).toString('utf8'));
    buffer = buffer.slice(sep + 4 + len);
    for (const w of waiters.splice(0)) w(msg);
  }
});
function send(msg) {
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  server.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
  server.stdin.write(body);
}
function next(pred) {
  return new Promise((resolve) => {
    const wait = (m) => (pred(m) ? resolve(m) : waiters.push(wait));
    waiters.push(wait);
  });
}

(async () => {
  send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { processId: process.pid, rootUri: pathToFileURL(workspace).href, capabilities: {} } });
  await next((m) => m.id === 1);
  send({ jsonrpc: '2.0', method: 'initialized', params: {} });
  const published = (v) => (m) => m.method === 'textDocument/publishDiagnostics' && m.params.uri === uri && m.params.version === v;
  send({ jsonrpc: '2.0', method: 'textDocument/didOpen', params: { textDocument: { uri, languageId: 'python', version: 1, text } } });
  const first = await next(published(1));
  const times = [];
  for (let k = 0; k < changes; k++) {
    const version = k + 2;
    const edited = lines.slice();
    edited[wantLines - 2] = `# edit ${k}`;
    const t0 = process.hrtime.bigint();
    send({ jsonrpc: '2.0', method: 'textDocument/didChange', params: { textDocument: { uri, version }, contentChanges: [{ text: edited.join('\n') + '\n' }] } });
    await next(published(version));
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(`${wantLines} lines, ${first.params.diagnostics.length} diagnostics; ${changes} changes (full sync)`);
  console.log(`didChange -> publishDiagnostics: median ${median.toFixed(1)} ms, min ${times[0].toFixed(1)} ms, max ${times[times.length - 1].toFixed(1)} ms (debounce 100 ms included)`);
  send({ jsonrpc: '2.0', id: 2, method: 'shutdown', params: null });
  await next((m) => m.id === 2);
  send({ jsonrpc: '2.0', method: 'exit' });
  if (!option('--workspace')) fs.rmSync(workspace, { recursive: true, force: true });
})();
