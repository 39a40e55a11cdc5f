#!/usr/bin/env node
// Drives `torchleak lsp` as an editor does and asserts exact messages:
// open -> diagnostics -> code actions -> apply the fix -> change ->
// diagnostics gone; non-ASCII text before a finding; an unsaved buffer that
// differs from the disk; malformed input; shutdown and exit.
'use strict';
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const { pathToFileURL } = require('url');

const binary = process.argv[2];
// --cpp FIXTURE: the build analyzes C++ too; FIXTURE is a LibTorch program
// with one `// expect: TL001` marker.
const cppIndex = process.argv.indexOf('--cpp');
const cppFixture = cppIndex > 0 ? process.argv[cppIndex + 1] : null;
const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'torchleak-lsp-'));
process.on('exit', () => fs.rmSync(workspace, { recursive: true, force: true }));

const TRAIN = [
  'import torch',
  '',
  '',
  'def train(model, loader, optimizer, loss_fn):',
  '    total_loss = 0.0',
  '    for x, y in loader:',
  '        optimizer.zero_grad()',
  '        loss = loss_fn(model(x), y)',
  '        loss.backward()',
  '        optimizer.step()',
  '        total_loss += loss',
  '    return total_loss',
  '',
].join('\n');
const UNICODE = TRAIN.replace('        total_loss += loss', '        tag = "Verlust→Σ𝔏"; total_loss += loss');
fs.writeFileSync(path.join(workspace, 'train.py'), TRAIN);
// On disk clean, in the editor leaking: the buffer must win.
fs.writeFileSync(path.join(workspace, 'unsaved.py'), 'x = 1\n');

let passed = 0, failed = 0;
function check(name, fn) {
  try { fn(); passed++; console.log(`ok   ${name}`); }
  catch (e) { failed++; console.log(`FAIL ${name}\n${e.message}`); }
}

const server = spawn(binary, ['lsp'], { stdio: ['pipe', 'pipe', 'pipe'] });
let stderr = '';
server.stderr.on('data', (d) => { stderr += d; });
let buffer = Buffer.alloc(0);
const inbox = [];
const waiters = [];
server.stdout.on('data', (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  for (;;) {
    const sep = buffer.indexOf('\r\n\r\n');
    if (sep < 0) return;
    const header = buffer.slice(0, sep).toString();
    const m = /Content-Length: (\d+)/i.exec(header);
    if (!m) throw new Error(`bad header from server: ${header}`);
    const len = Number(m[1]);
    if (buffer.length < sep + 4 + len) return;
    const body = buffer.slice(sep + 4, sep + 4 + len).toString('utf8');
    buffer = buffer.slice(sep + 4 + len);
    inbox.push(JSON.parse(body));
    for (const w of waiters.splice(0)) w();
  }
});

function sendRaw(text) { server.stdin.write(text); }
function send(msg) {
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  sendRaw(`Content-Length: ${body.length}\r\n\r\n`);
  server.stdin.write(body);
}
let nextId = 1;
function request(method, params) { const id = nextId++; send({ jsonrpc: '2.0', id, method, params }); return id; }
function notify(method, params) { send({ jsonrpc: '2.0', method, params }); }
async function take(pred, what, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const i = inbox.findIndex(pred);
    if (i >= 0) return inbox.splice(i, 1)[0];
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; stderr: ${stderr}`);
    await new Promise((r) => { waiters.push(r); setTimeout(r, 50); });
  }
}
const response = (id) => (m) => m.id === id && !m.method;
const diagnosticsFor = (uri, version) => (m) => m.method === 'textDocument/publishDiagnostics' &&
  m.params.uri === uri && (version === undefined || m.params.version === version);

function applyEdits(text, edits) {
  // LSP positions (UTF-16) to string offsets: JS strings are UTF-16 already.
  const lines = text.split('\n');
  const offset = (p) => lines.slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
  const sorted = [...edits].sort((a, b) => offset(b.range.start) - offset(a.range.start));
  for (const e of sorted) text = text.slice(0, offset(e.range.start)) + e.newText + text.slice(offset(e.range.end));
  return text;
}

(async () => {
  const rootUri = pathToFileURL(workspace).href;
  const trainUri = pathToFileURL(path.join(workspace, 'train.py')).href;
  const unsavedUri = pathToFileURL(path.join(workspace, 'unsaved.py')).href;

  // Requests before initialize are refused, not crashed on.
  const early = request('textDocument/codeAction', {});
  const earlyReply = await take(response(early), 'early reply');
  check('a request before initialize gets ServerNotInitialized', () => assert.strictEqual(earlyReply.error.code, -32002));

  const init = request('initialize', { processId: process.pid, rootUri, capabilities: {}, workspaceFolders: [{ uri: rootUri, name: 'ws' }] });
  const initReply = await take(response(init), 'initialize');
  check('initialize announces sync, code actions and UTF-16', () => {
    assert.deepStrictEqual(initReply.result.capabilities, {
      positionEncoding: 'utf-16',
      textDocumentSync: { openClose: true, change: 2, save: { includeText: false } },
      codeActionProvider: { codeActionKinds: ['quickfix', 'source.fixAll.torchleak'] },
      notebookDocumentSync: { notebookSelector: [{ notebook: { notebookType: 'jupyter-notebook' }, cells: [{ language: 'python' }] }] },
    });
    assert.strictEqual(initReply.result.serverInfo.name, 'torchleak');
  });
  notify('initialized', {});

  notify('textDocument/didOpen', { textDocument: { uri: trainUri, languageId: 'python', version: 1, text: TRAIN } });
  const open = await take(diagnosticsFor(trainUri, 1), 'diagnostics after didOpen');
  const diag = open.params.diagnostics[0];
  check('didOpen publishes exactly the TL001 finding, 0-based, for the URI sent', () => {
    assert.strictEqual(open.params.diagnostics.length, 1);
    assert.deepStrictEqual(diag.range, { start: { line: 10, character: 8 }, end: { line: 10, character: 26 } });
    assert.strictEqual(diag.code, 'TL001');
    assert.strictEqual(diag.source, 'torchleak');
    assert.strictEqual(diag.severity, 2);
    assert.match(diag.codeDescription.href, /docs\/rules\/TL001-accumulate-undetached\.md$/);
    assert.match(diag.message, /^`total_loss` accumulates `loss`/);
  });

  const ca = request('textDocument/codeAction', { textDocument: { uri: trainUri }, range: diag.range, context: { diagnostics: [diag] } });
  const actions = (await take(response(ca), 'code actions')).result;
  check('code actions: the fix first, then suppress-on-this-line', () => {
    assert.deepStrictEqual(actions.map((a) => [a.title, a.kind]), [
      ['Replace `loss` with `loss.item()` (TL001)', 'quickfix'],
      ['Suppress TL001 on this line', 'quickfix'],
    ]);
    assert.deepStrictEqual(actions[0].edit.changes[trainUri], [
      { range: { start: { line: 10, character: 26 }, end: { line: 10, character: 26 } }, newText: '.item()' },
    ]);
    assert.deepStrictEqual(actions[1].edit.changes[trainUri], [
      { range: { start: { line: 10, character: 26 }, end: { line: 10, character: 26 } }, newText: '  # noqa: TL001' },
    ]);
  });

  // source.fixAll (VS Code's "fix all on save"): the safe fixes as one action, nothing else.
  const all = request('textDocument/codeAction', { textDocument: { uri: trainUri }, range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, context: { diagnostics: [], only: ['source.fixAll'] } });
  const allActions = (await take(response(all), 'fix-all action')).result;
  check('source.fixAll: one source.fixAll.torchleak action with every safe fix', () => {
    assert.deepStrictEqual(allActions.map((a) => [a.title, a.kind]), [
      ['Fix all torchleak problems that have a safe fix', 'source.fixAll.torchleak'],
    ]);
    assert.deepStrictEqual(allActions[0].edit.changes[trainUri], [
      { range: { start: { line: 10, character: 26 }, end: { line: 10, character: 26 } }, newText: '.item()' },
    ]);
  });
  const other = request('textDocument/codeAction', { textDocument: { uri: trainUri }, range: diag.range, context: { diagnostics: [diag], only: ['source.organizeImports'] } });
  const otherActions = (await take(response(other), 'organize imports')).result;
  check('source.organizeImports: nothing', () => assert.deepStrictEqual(otherActions, []));

  // Apply the fix as an incremental change, as the editor would.
  const edit = actions[0].edit.changes[trainUri][0];
  notify('textDocument/didChange', { textDocument: { uri: trainUri, version: 2 }, contentChanges: [{ range: edit.range, text: edit.newText }] });
  const afterFix = await take(diagnosticsFor(trainUri, 2), 'diagnostics after the fix');
  check('after the incremental fix the diagnostic is gone', () => assert.deepStrictEqual(afterFix.params.diagnostics, []));

  // Full-text sync back to the leaking code with non-ASCII text (one char
  // outside the BMP) before the finding on the same line.
  notify('textDocument/didChange', { textDocument: { uri: trainUri, version: 3 }, contentChanges: [{ text: UNICODE }] });
  const uni = await take(diagnosticsFor(trainUri, 3), 'diagnostics after a full change');
  check('columns are UTF-16 code units after non-ASCII text', () => {
    assert.strictEqual(uni.params.diagnostics.length, 1);
    const col = '        tag = "Verlust→Σ𝔏"; '.length;  // JS length is UTF-16 units
    assert.deepStrictEqual(uni.params.diagnostics[0].range.start, { line: 10, character: col });
  });
  const ca2 = request('textDocument/codeAction', { textDocument: { uri: trainUri }, range: uni.params.diagnostics[0].range, context: { diagnostics: uni.params.diagnostics } });
  const fixed = applyEdits(UNICODE, (await take(response(ca2), 'code actions 2')).result[0].edit.changes[trainUri]);
  check('the fix lands after the non-ASCII text', () => assert.ok(fixed.includes('tag = "Verlust→Σ𝔏"; total_loss += loss.item()')));

  // An unsaved buffer takes precedence over the file on disk.
  notify('textDocument/didOpen', { textDocument: { uri: unsavedUri, languageId: 'python', version: 7, text: TRAIN } });
  const unsaved = await take(diagnosticsFor(unsavedUri, 7), 'diagnostics for the unsaved buffer');
  check('the unsaved buffer is analyzed, not the disk', () => assert.strictEqual(unsaved.params.diagnostics.length, 1));

  // A notebook (LSP 3.17 notebook documents): the findings on their cells, in cell coordinates;
  // magics masked; a cell edit re-analyzes; closing clears the cells.
  const nbUri = pathToFileURL(path.join(workspace, 'train.ipynb')).href;
  const cell = (n) => `vscode-notebook-cell:${path.join(workspace, 'train.ipynb')}#W${n}sZmlsZQ%3D%3D`;
  const CELL1 = '%matplotlib inline\n!nvidia-smi\nimport torch';
  const CELL3 = TRAIN.split('\n').slice(3).join('\n');
  notify('notebookDocument/didOpen', {
    notebookDocument: { uri: nbUri, notebookType: 'jupyter-notebook', version: 1,
      cells: [{ kind: 2, document: cell(0) }, { kind: 1, document: cell(1) }, { kind: 2, document: cell(2) }] },
    cellTextDocuments: [
      { uri: cell(0), languageId: 'python', version: 1, text: CELL1 },
      { uri: cell(1), languageId: 'markdown', version: 1, text: '# Training' },
      { uri: cell(2), languageId: 'python', version: 1, text: CELL3 },
    ],
  });
  const onCell = await take(diagnosticsFor(cell(2), 1), 'diagnostics on the notebook cell');
  const quietCell = await take(diagnosticsFor(cell(0), 1), 'diagnostics on the magic cell');
  check('a notebook: the finding on its cell, at the line and column in the cell; the magics cell is clean', () => {
    assert.strictEqual(onCell.params.diagnostics.length, 1);
    assert.strictEqual(onCell.params.diagnostics[0].code, 'TL001');
    assert.deepStrictEqual(onCell.params.diagnostics[0].range, { start: { line: 7, character: 8 }, end: { line: 7, character: 26 } });
    assert.deepStrictEqual(quietCell.params.diagnostics, []);
  });
  const nbActions = (await take(response(request('textDocument/codeAction', {
    textDocument: { uri: cell(2) }, range: onCell.params.diagnostics[0].range, context: { diagnostics: onCell.params.diagnostics } })), 'cell code actions')).result;
  check('the fix of a cell finding is an edit of the cell', () => {
    assert.deepStrictEqual(nbActions[0].edit.changes[cell(2)], [
      { range: { start: { line: 7, character: 26 }, end: { line: 7, character: 26 } }, newText: '.item()' },
    ]);
  });
  notify('notebookDocument/didChange', { notebookDocument: { uri: nbUri, version: 2 }, change: { cells: {
    textContent: [{ document: { uri: cell(2), version: 2 }, changes: [{ range: nbActions[0].edit.changes[cell(2)][0].range, text: '.item()' }] }] } } });
  const nbFixed = await take(diagnosticsFor(cell(2), 2), 'diagnostics after the cell edit');
  check('after the cell edit the finding is gone', () => assert.deepStrictEqual(nbFixed.params.diagnostics, []));
  notify('notebookDocument/didChange', { notebookDocument: { uri: nbUri, version: 3 }, change: { cells: {
    structure: { array: { start: 3, deleteCount: 0, cells: [{ kind: 2, document: cell(3) }] },
      didOpen: [{ uri: cell(3), languageId: 'python', version: 1, text: 'for x in loader:\n    acc += model(x).sum()\n    model(x).sum().backward()\n    optimizer.step()\n' }] } } } });
  const added = await take(diagnosticsFor(cell(3), 1), 'diagnostics on the added cell');
  check('an added cell is analyzed after the others (names from earlier cells count)', () => {
    assert.deepStrictEqual(added.params.diagnostics.map((d) => [d.code, d.range.start.line]), [['TL010', 2]]);
  });
  notify('notebookDocument/didClose', { notebookDocument: { uri: nbUri }, cellTextDocuments: [{ uri: cell(0) }, { uri: cell(1) }, { uri: cell(2) }, { uri: cell(3) }] });
  const nbCleared = await take(diagnosticsFor(cell(3)), 'cleared on close');
  check('closing the notebook clears its cells', () => assert.deepStrictEqual(nbCleared.params.diagnostics, []));
  inbox.length = 0;  // the notebook's rounds republished the other documents: all of them are in by now

  // Malformed input: each gets an error (or is ignored) and the server keeps serving.
  sendRaw('Content-Length: 9\r\n\r\n{not json');
  const parseErr = await take((m) => m.error && m.error.code === -32700, 'parse error');
  check('invalid JSON gets a parse error with id null', () => assert.strictEqual(parseErr.id, null));
  send({ jsonrpc: '2.0', id: 99, method: 'textDocument/codeAction', params: { textDocument: 42 } });
  const badParams = await take(response(99), 'invalid params');
  check('wrong parameter types get InvalidParams', () => assert.strictEqual(badParams.error.code, -32602));
  send({ jsonrpc: '2.0', id: 100, method: 'workspace/symbol', params: { query: '' } });
  const unknown = await take(response(100), 'unknown method');
  check('an unknown request gets MethodNotFound', () => assert.strictEqual(unknown.error.code, -32601));
  sendRaw('Content-Type: text/plain\r\n\r\n');
  await take((m) => m.error && m.error.code === -32700 && /Content-Length/.test(m.error.message), 'header error');
  send([1, 2, 3]);
  const notObject = await take((m) => m.error && m.error.code === -32600, 'invalid request');
  check('a non-object message gets InvalidRequest', () => assert.strictEqual(notObject.id, null));
  notify('textDocument/didChange', { textDocument: { uri: trainUri, version: 4 }, contentChanges: [{ text: TRAIN.replace('+= loss', '+= loss.item()') }] });
  const still = await take(diagnosticsFor(trainUri, 4), 'diagnostics after malformed input');
  check('the server still serves after malformed input', () => assert.deepStrictEqual(still.params.diagnostics, []));

  // Every analysis republishes every open document: wait for this round's
  // unsaved.py publication (sent right after train.py's), then forget the rest.
  await take(diagnosticsFor(unsavedUri, 7), 'this round of unsaved.py diagnostics');
  inbox.length = 0;
  notify('textDocument/didClose', { textDocument: { uri: unsavedUri } });
  const cleared = await take(diagnosticsFor(unsavedUri), 'cleared diagnostics');
  check('didClose clears the document\'s diagnostics', () => assert.deepStrictEqual(cleared.params.diagnostics, []));

  // The workspace's configuration files apply, the nearest one per file, as
  // for `torchleak check`: one ignores TL001, one is malformed (shown to the
  // user, and its files analyzed with the defaults).
  fs.mkdirSync(path.join(workspace, 'quiet'));
  fs.writeFileSync(path.join(workspace, 'quiet', 'torchleak.toml'), 'ignore = ["TL001"]\n');
  fs.writeFileSync(path.join(workspace, 'quiet', 'train.py'), TRAIN);
  const quietUri = pathToFileURL(path.join(workspace, 'quiet', 'train.py')).href;
  notify('textDocument/didOpen', { textDocument: { uri: quietUri, languageId: 'python', version: 1, text: TRAIN } });
  const quiet = await take(diagnosticsFor(quietUri, 1), 'diagnostics under a configuration file');
  check('the nearest configuration file applies (ignore = ["TL001"])', () => assert.deepStrictEqual(quiet.params.diagnostics, []));
  fs.mkdirSync(path.join(workspace, 'bad'));
  fs.writeFileSync(path.join(workspace, 'bad', 'torchleak.toml'), 'select = 3\n');
  const badUri = pathToFileURL(path.join(workspace, 'bad', 'train.py')).href;
  notify('textDocument/didOpen', { textDocument: { uri: badUri, languageId: 'python', version: 1, text: TRAIN } });
  const shown = await take((m) => m.method === 'window/showMessage', 'the bad configuration shown');
  const bad = await take(diagnosticsFor(badUri, 1), 'diagnostics under a bad configuration file');
  check('a bad configuration file is shown as an error naming the file and the key', () => {
    assert.strictEqual(shown.params.type, 1);
    assert.match(shown.params.message, /^torchleak: .*bad\/torchleak\.toml.*select/);
  });
  check('files under a bad configuration file are analyzed with the defaults', () => assert.strictEqual(bad.params.diagnostics.length, 1));

  // An open file is analyzed in the context of the workspace: a wrap in DataParallel in a file on
  // disk makes the open model's pad_packed_sequence a finding (TL005); the other files' facts are
  // kept in the workspace's facts cache.
  fs.mkdirSync(path.join(workspace, 'tagger'));
  fs.writeFileSync(path.join(workspace, 'tagger', 'wrap.py'),
    'import torch.nn as nn\nfrom model import Tagger\n\nmodel = nn.DataParallel(Tagger())\n');
  const MODEL = [
    'import torch.nn as nn',
    'from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence',
    '',
    '',
    'class Tagger(nn.Module):',
    '    def __init__(self):',
    '        super().__init__()',
    '        self.rnn = nn.LSTM(8, 8, batch_first=True)',
    '',
    '    def forward(self, x, lengths):',
    '        out, _ = self.rnn(pack_padded_sequence(x, lengths, batch_first=True))',
    '        out, _ = pad_packed_sequence(out, batch_first=True)',
    '        return out',
    ''].join('\n');
  const modelUri = pathToFileURL(path.join(workspace, 'tagger', 'model.py')).href;
  notify('textDocument/didOpen', { textDocument: { uri: modelUri, languageId: 'python', version: 1, text: MODEL } });
  const wrapped = await take(diagnosticsFor(modelUri, 1), 'diagnostics of a model wrapped in another file');
  check('a wrap in a file on disk makes the open model a TL005 finding', () => {
    assert.deepStrictEqual(wrapped.params.diagnostics.map((d) => [d.code, d.range.start]),
      [['TL005', { line: 11, character: 17 }]]);
  });
  check('the workspace\'s facts are cached in .torchleak_cache', () => {
    assert.ok(fs.existsSync(path.join(workspace, '.torchleak_cache', '.gitignore')));
    assert.ok(fs.readdirSync(path.join(workspace, '.torchleak_cache', 'facts')).length > 0);
  });

  if (cppFixture) {
    // A LibTorch file: on disk without the leak, in the editor with it.
    const text = fs.readFileSync(cppFixture, 'utf8');
    const lines = text.split('\n');
    const line = lines.findIndex((l) => l.includes('// expect: TL001'));
    const character = lines[line].search(/\S/);
    const cppPath = path.join(workspace, 'train.cpp');
    fs.writeFileSync(cppPath, '// nothing here yet\n');
    const cppUri = pathToFileURL(cppPath).href;
    inbox.length = 0;
    notify('textDocument/didOpen', { textDocument: { uri: cppUri, languageId: 'cpp', version: 1, text } });
    // The first C++ file builds the LibTorch precompiled header: minutes on a busy machine.
    const cpp = await take(diagnosticsFor(cppUri, 1), 'C++ diagnostics', 600000);
    check('a LibTorch buffer gets its TL001 finding where the marker is', () => {
      assert.deepStrictEqual(cpp.params.diagnostics.map((d) => [d.code, d.range.start]),
        [['TL001', { line, character }]]);
      assert.strictEqual(cpp.params.diagnostics[0].source, 'torchleak');
    });
  }

  const sd = request('shutdown', null);
  const sdReply = await take(response(sd), 'shutdown');
  check('shutdown answers with result null', () => assert.strictEqual(sdReply.result, null));
  notify('exit');
  const code = await new Promise((r) => server.on('exit', (c) => r(c)));
  check('the server exits with status 0 after shutdown and exit', () => assert.strictEqual(code, 0));
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.log(`FAIL ${e.message}`); console.log(`${passed} passed, ${failed + 1} failed`); server.kill(); process.exit(1); });
