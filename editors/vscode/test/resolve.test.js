'use strict';
// Which executable the extension starts (src/resolve.js).
const test = require('node:test');
const assert = require('node:assert');
const { resolveServer } = require('../src/resolve');

const exists = (set) => (p) => set.includes(p);

test('the setting wins: an absolute path', () => {
  assert.deepStrictEqual(
    resolveServer({ setting: '/opt/tl/torchleak', platform: 'linux', isExecutable: exists(['/opt/tl/torchleak', '/usr/bin/torchleak']), pathEnv: '/usr/bin' }),
    { command: '/opt/tl/torchleak', source: 'torchleak.path' },
  );
});

test('the setting: ${workspaceFolder}, a relative path, ~/', () => {
  const isExecutable = exists(['/ws/.venv/bin/torchleak', '/home/u/bin/torchleak']);
  assert.deepStrictEqual(resolveServer({ setting: '${workspaceFolder}/.venv/bin/torchleak', workspaceFolder: '/ws', platform: 'linux', isExecutable }).command, '/ws/.venv/bin/torchleak');
  assert.deepStrictEqual(resolveServer({ setting: '.venv/bin/torchleak', workspaceFolder: '/ws', platform: 'linux', isExecutable }).command, '/ws/.venv/bin/torchleak');
  assert.deepStrictEqual(resolveServer({ setting: '~/bin/torchleak', home: '/home/u', platform: 'linux', isExecutable }).command, '/home/u/bin/torchleak');
});

test('the setting: a bare name is looked up on the PATH', () => {
  assert.deepStrictEqual(
    resolveServer({ setting: 'torchleak-dev', platform: 'linux', pathEnv: '/a:/b', isExecutable: exists(['/b/torchleak-dev']) }),
    { command: '/b/torchleak-dev', source: 'torchleak.path' },
  );
});

test('a setting naming nothing executable is an error that says so, not a fallback', () => {
  assert.deepStrictEqual(
    resolveServer({ setting: '/nope/torchleak', platform: 'linux', pathEnv: '/usr/bin', isExecutable: exists(['/usr/bin/torchleak']) }),
    { error: 'torchleak.path names "/nope/torchleak", which is not an executable file' },
  );
});

test('no setting: the selected Python environment, before the PATH', () => {
  assert.deepStrictEqual(
    resolveServer({ pythonExecutable: '/ws/.venv/bin/python3', platform: 'linux', pathEnv: '/usr/bin', isExecutable: exists(['/ws/.venv/bin/torchleak', '/usr/bin/torchleak']) }),
    { command: '/ws/.venv/bin/torchleak', source: 'the selected Python environment' },
  );
});

test('Windows: Scripts\\torchleak.exe beside python.exe, PATH split on ;', () => {
  assert.deepStrictEqual(
    resolveServer({ pythonExecutable: 'C:\\venv\\Scripts\\python.exe', platform: 'win32', isExecutable: exists(['C:\\venv\\Scripts\\torchleak.exe']) }),
    { command: 'C:\\venv\\Scripts\\torchleak.exe', source: 'the selected Python environment' },
  );
  assert.deepStrictEqual(
    resolveServer({ platform: 'win32', pathEnv: 'C:\\a;C:\\tools', isExecutable: exists(['C:\\tools\\torchleak.exe']) }).command,
    'C:\\tools\\torchleak.exe',
  );
});

test('an environment without torchleak: the PATH; nothing anywhere: an error naming the ways to install', () => {
  assert.deepStrictEqual(
    resolveServer({ pythonExecutable: '/usr/bin/python3', platform: 'linux', pathEnv: '/usr/local/bin:/usr/bin', isExecutable: exists(['/usr/local/bin/torchleak']) }),
    { command: '/usr/local/bin/torchleak', source: 'the PATH' },
  );
  assert.match(resolveServer({ platform: 'linux', pathEnv: '/usr/bin', isExecutable: () => false }).error, /^torchleak is not installed: /);
});
