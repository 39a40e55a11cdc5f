#!/usr/bin/env node
// Validates SARIF logs against the SARIF 2.1.0 JSON schema (sarif-schema-2.1.0.json
// beside this file) with Ajv, as pinned in the repository's package-lock.json.
//
//   node tests/sarif/validate.js LOG.sarif...
//
// Prints one line per schema violation; exit 0 valid, 1 invalid, 2 usage or I/O
// error, 77 when the validator is not installed (`npm ci` at the repository root).
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
let Ajv2020;
let addFormats;
try {
  Ajv2020 = require(path.join(root, 'node_modules', 'ajv', 'dist', '2020')).default;
  addFormats = require(path.join(root, 'node_modules', 'ajv-formats'));
} catch (e) {
  console.log(`ajv is not installed (run \`npm ci\` at the repository root): ${e.message.split('\n')[0]}`);
  process.exit(77);
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node validate.js LOG.sarif...');
  process.exit(2);
}

const schema = JSON.parse(fs.readFileSync(path.join(__dirname, 'sarif-schema-2.1.0.json'), 'utf8'));
// strict: false: the schema uses `definitions` and keywords Ajv's strict mode
// reserves for its own checks; it is the published schema, used as it is.
const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: true });
addFormats(ajv);
const validate = ajv.compile(schema);

let invalid = 0;
for (const file of files) {
  let log;
  try {
    log = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`${file}: cannot read as JSON: ${e.message}`);
    process.exit(2);
  }
  if (validate(log)) {
    console.log(`${file}: valid SARIF 2.1.0`);
    continue;
  }
  invalid++;
  for (const e of validate.errors) {
    const detail = e.params && e.params.additionalProperty ? ` '${e.params.additionalProperty}'` : '';
    console.log(`${file}: ${e.instancePath || '/'}: ${e.message}${detail} (${e.schemaPath})`);
  }
}
process.exit(invalid ? 1 : 0);
