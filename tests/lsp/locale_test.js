'use strict';
// The client's locale chooses the language of the rule pages diagnostics
// link to: zh-cn links docs/zh/rules/, anything else docs/rules/.
const assert = require('assert');
const { spawn } = require('child_process');

const binary = process.argv[2];
const TRAIN = 'def fit(model, loader, optimizer, loss_fn):\n    total = 0.0\n    for x, y in loader:\n' +
  '        optimizer.zero_grad()\n        loss = loss_fn(model(x), y)\n        loss.backward()\n' +
  '        optimizer.step()\n        total += loss\n    return total\n';

function session(locale) {
  return new Promise((resolve, reject) => {
    const server = spawn(binary, ['lsp'], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, TORCHLEAK_LANG: '' } });
    let buffer = Buffer.alloc(0);
    const timer = setTimeout(() => { server.kill(); reject(new Error('timed out')); }, 10000);
    server.stdout.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const sep = buffer.indexOf('\r\n\r\n');
        if (sep < 0) return;
        const len = Number(/Content-Length: (\d+)/i.exec(buffer.slice(0, sep).toString())[1]);
        if (buffer.length < sep + 4 + len) return;
        const msg = JSON.parse(buffer.slice(sep + 4, sep + 4 + len).toString('utf8'));
        buffer = buffer.slice(sep + 4 + len);
        if (msg.method === 'textDocument/publishDiagnostics') {
          clearTimeout(timer);
          server.kill();
          resolve(msg.params.diagnostics.map((d) => d.codeDescription.href));
        }
      }
    });
    const send = (m) => {
      const body = Buffer.from(JSON.stringify(m), 'utf8');
      server.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
      server.stdin.write(body);
    };
    const params = { processId: null, rootUri: null, capabilities: {} };
    if (locale) params.locale = locale;
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params });
    send({ jsonrpc: '2.0', method: 'initialized', params: {} });
    send({ jsonrpc: '2.0', method: 'textDocument/didOpen', params: { textDocument: { uri: 'file:///nonexistent-dir/fit.py', languageId: 'python', version: 1, text: TRAIN } } });
  });
}

(async () => {
  const zh = await session('zh-cn');
  assert.deepStrictEqual(zh.map((h) => h.replace(/^.*\/docs\//, 'docs/')), ['docs/zh/rules/TL001-accumulate-undetached.md']);
  const en = await session('de');
  assert.deepStrictEqual(en.map((h) => h.replace(/^.*\/docs\//, 'docs/')), ['docs/rules/TL001-accumulate-undetached.md']);
  console.log('locale: zh-cn links docs/zh/rules/, de links docs/rules/');
})().catch((e) => { console.error(e); process.exit(1); });
