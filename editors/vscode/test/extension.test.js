'use strict';
// The extension's client logic against a stand-in of the vscode API and of
// vscode-languageclient: what it starts, with which documents, and what it
// does on a settings change, a restart, and a missing executable.
const test = require('node:test');
const assert = require('node:assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const Module = require('module');

function standIn({ settings = {}, python } = {}) {
  const log = { clients: [], errors: [], lines: [], commands: {}, onConfig: [] };
  const vscode = {
    workspace: {
      workspaceFolders: [{ uri: { fsPath: '/ws' } }],
      getConfiguration: () => ({ get: (k, d) => (k in settings ? settings[k] : d) }),
      onDidChangeConfiguration: (f) => (log.onConfig.push(f), { dispose() {} }),
    },
    window: {
      createOutputChannel: () => ({ appendLine: (l) => log.lines.push(l), show() {}, dispose() {} }),
      showErrorMessage: (m) => log.errors.push(m),
    },
    commands: { registerCommand: (name, f) => ((log.commands[name] = f), { dispose() {} }) },
    extensions: {
      getExtension: (id) =>
        id === 'ms-python.python' && python
          ? {
              isActive: true,
              exports: {
                environments: {
                  getActiveEnvironmentPath: () => ({ path: python }),
                  resolveEnvironment: async () => ({ executable: { uri: { fsPath: python } } }),
                },
              },
            }
          : undefined,
    },
  };
  class LanguageClient {
    constructor(id, name, server, client) {
      Object.assign(this, { id, name, server, client, started: false, stopped: false });
      log.clients.push(this);
    }
    async start() { this.started = true; }
    async stop() { this.stopped = true; }
  }
  return { vscode, languageclient: { LanguageClient }, log };
}

function load(stand) {
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    if (request === 'vscode' || request === 'vscode-languageclient/node') return request;
    return resolve.call(this, request, ...rest);
  };
  require.cache.vscode = { id: 'vscode', filename: 'vscode', loaded: true, exports: stand.vscode };
  require.cache['vscode-languageclient/node'] = { id: 'lc', filename: 'lc', loaded: true, exports: stand.languageclient };
  const file = require.resolve('../src/extension');
  delete require.cache[file];
  const ext = require(file);
  Module._resolveFilename = resolve;
  return ext;
}

function executable(dir, name) {
  const p = path.join(dir, name);
  fs.writeFileSync(p, '#!/bin/sh\n');
  fs.chmodSync(p, 0o755);
  return p;
}

const context = () => ({ subscriptions: [] });

test('starts `torchleak lsp` from the setting, for Python files, notebook cells and C++', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-ext-'));
  const exe = executable(dir, 'torchleak');
  const s = standIn({ settings: { path: exe, args: ['--verbose'] } });
  await load(s).activate(context());
  assert.strictEqual(s.log.clients.length, 1);
  const c = s.log.clients[0];
  assert.deepStrictEqual(c.server, { command: exe, args: ['lsp', '--verbose'] });
  assert.deepStrictEqual(c.client.documentSelector, [
    { scheme: 'file', language: 'python' },
    { scheme: 'untitled', language: 'python' },
    { scheme: 'file', language: 'cpp' },
    { notebook: '*', language: 'python' },
  ]);
  assert.ok(c.started);
  assert.deepStrictEqual(s.log.lines, [`starting ${exe} lsp (from torchleak.path)`]);
});

test('no setting: the executable of the selected Python environment', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-env-'));
  const python = executable(dir, 'python3');
  const exe = executable(dir, 'torchleak');
  const s = standIn({ python });
  await load(s).activate(context());
  assert.strictEqual(s.log.clients[0].server.command, exe);
  assert.deepStrictEqual(s.log.lines, [`starting ${exe} lsp (from the selected Python environment)`]);
});

test('a settings change restarts the server; an unrelated one does not', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tl-cfg-'));
  const exe = executable(dir, 'torchleak');
  const s = standIn({ settings: { path: exe } });
  await load(s).activate(context());
  await s.log.onConfig[0]({ affectsConfiguration: (k) => k === 'editor' });
  assert.strictEqual(s.log.clients.length, 1);
  await s.log.onConfig[0]({ affectsConfiguration: (k) => k === 'torchleak' });
  assert.strictEqual(s.log.clients.length, 2);
  assert.ok(s.log.clients[0].stopped);
  assert.ok(s.log.clients[1].started);
  await s.log.commands['torchleak.restart']();
  assert.strictEqual(s.log.clients.length, 3);
  assert.ok(s.log.clients[1].stopped);
});

test('a missing executable: an error message, no client', async () => {
  const s = standIn({ settings: { path: '/nonexistent/torchleak' } });
  await load(s).activate(context());
  assert.strictEqual(s.log.clients.length, 0);
  assert.deepStrictEqual(s.log.errors, ['torchleak.path names "/nonexistent/torchleak", which is not an executable file']);
});

test('torchleak.enable false: nothing started', async () => {
  const s = standIn({ settings: { enable: false } });
  await load(s).activate(context());
  assert.strictEqual(s.log.clients.length, 0);
  assert.deepStrictEqual(s.log.errors, []);
});
