// Which torchleak executable the extension starts, in order: the
// `torchleak.path` setting; the one installed in the Python environment the
// Python extension has selected (pip or pipx put it in the environment's
// bin/ or Scripts/); the first on the PATH. Pure logic: the file system and
// the environment come in as arguments, so the tests need no editor.
'use strict';

const path = require('path');

/**
 * @param {object} o
 * @param {string} [o.setting]          the torchleak.path setting ("" when unset)
 * @param {string} [o.home]            for a setting starting with ~/
 * @param {string} [o.workspaceFolder]  for a relative setting and ${workspaceFolder}
 * @param {string} [o.pythonExecutable] the selected interpreter (sys.executable), if any
 * @param {string} [o.pathEnv]          the PATH
 * @param {string} [o.platform]         process.platform
 * @param {(p: string) => boolean} o.isExecutable
 * @returns {{command: string, source: string} | {error: string}}
 */
function resolveServer(o) {
  const win = o.platform === 'win32';
  const p = win ? path.win32 : path.posix;
  const exe = win ? 'torchleak.exe' : 'torchleak';
  if (o.setting) {
    let s = o.setting.replace(/\$\{workspaceFolder\}/g, o.workspaceFolder || '');
    if (s.startsWith('~/') && o.home) s = p.join(o.home, s.slice(2));
    if (!p.isAbsolute(s) && s.includes(p.sep) && o.workspaceFolder) s = p.join(o.workspaceFolder, s);
    if (!s.includes(p.sep)) {
      const found = searchPath(s, o, p);
      if (found) return { command: found, source: 'torchleak.path' };
      return { error: `torchleak.path names "${o.setting}", which is not on the PATH` };
    }
    if (o.isExecutable(s)) return { command: s, source: 'torchleak.path' };
    return { error: `torchleak.path names "${o.setting}", which is not an executable file` };
  }
  if (o.pythonExecutable) {
    const dir = p.dirname(o.pythonExecutable);
    const candidate = p.join(dir, exe);
    if (o.isExecutable(candidate)) return { command: candidate, source: 'the selected Python environment' };
  }
  const found = searchPath(exe, o, p);
  if (found) return { command: found, source: 'the PATH' };
  return {
    error:
      'torchleak is not installed: install it in the selected Python environment (pip install torchleak), ' +
      'put it on the PATH, or set torchleak.path',
  };
}

function searchPath(name, o, p) {
  const sep = o.platform === 'win32' ? ';' : ':';
  for (const dir of (o.pathEnv || '').split(sep)) {
    if (!dir) continue;
    const candidate = p.join(dir, name);
    if (o.isExecutable(candidate)) return candidate;
  }
  return undefined;
}

module.exports = { resolveServer };
