// The VS Code extension: starts `torchleak lsp` (found by resolve.js) with
// vscode-languageclient for Python files, Python cells of notebooks and C++
// files, restarts it when its settings change, and says plainly when it
// cannot find the executable. Code actions (the fixes, "Suppress TLnnn on
// this line", and source.fixAll.torchleak for "editor.codeActionsOnSave")
// come from the server.
'use strict';

const fs = require('fs');
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');
const { resolveServer } = require('./resolve');

let client;
let output;

function isExecutable(p) {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

// The interpreter the Python extension has selected for `folder`, if it is installed.
async function selectedPython(folder) {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) return undefined;
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    const env = api && api.environments;
    if (!env) return undefined;
    const active = env.getActiveEnvironmentPath(folder && folder.uri);
    const resolved = active && (await env.resolveEnvironment(active));
    return resolved && resolved.executable && resolved.executable.uri ? resolved.executable.uri.fsPath : undefined;
  } catch {
    return undefined;
  }
}

async function start() {
  const config = vscode.workspace.getConfiguration('torchleak');
  if (!config.get('enable', true)) return;
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  const found = resolveServer({
    setting: config.get('path', ''),
    workspaceFolder: folder ? folder.uri.fsPath : undefined,
    home: process.env.HOME,
    pythonExecutable: await selectedPython(folder),
    pathEnv: process.env.PATH,
    platform: process.platform,
    isExecutable,
  });
  if (found.error) {
    output.appendLine(found.error);
    vscode.window.showErrorMessage(found.error);
    return;
  }
  output.appendLine(`starting ${found.command} lsp (from ${found.source})`);
  const serverOptions = { command: found.command, args: ['lsp', ...config.get('args', [])] };
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'python' },
      { scheme: 'untitled', language: 'python' },
      { scheme: 'file', language: 'cpp' },
      { notebook: '*', language: 'python' },
    ],
    outputChannel: output,
  };
  client = new LanguageClient('torchleak', 'torchleak', serverOptions, clientOptions);
  await client.start();
}

async function stop() {
  if (!client) return;
  const c = client;
  client = undefined;
  await c.stop();
}

async function activate(context) {
  output = vscode.window.createOutputChannel('torchleak');
  context.subscriptions.push(output);
  context.subscriptions.push(
    vscode.commands.registerCommand('torchleak.restart', async () => {
      await stop();
      await start();
    }),
    vscode.commands.registerCommand('torchleak.showOutput', () => output.show()),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration('torchleak')) return;
      await stop();
      await start();
    }),
  );
  await start();
}

async function deactivate() {
  await stop();
}

module.exports = { activate, deactivate };
