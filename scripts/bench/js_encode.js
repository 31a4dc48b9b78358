// Throughput of the JavaScript GPT-2 encoder (data/npm/gpt-3-encoder) over the documents of
// JSON-array files, each string a document, the way ./tokenize bench --json-array reads them.
// Prints one line: "js documents=N tokens=T seconds=S MB/s=X" (MB of UTF-8 input, 10^6 bytes).
// Usage: node scripts/bench/js_encode.js FILE.json...
'use strict';
const fs = require('fs');
const path = require('path');
const { encode } = require(path.join(__dirname, '..', '..', 'data', 'npm', 'gpt-3-encoder', 'Encoder.js'));

const docs = [];
for (const f of process.argv.slice(2)) docs.push(...JSON.parse(fs.readFileSync(f, 'utf8')));
const bytes = docs.reduce((sum, d) => sum + Buffer.byteLength(d, 'utf8'), 0);
const start = process.hrtime.bigint();
let tokens = 0;
for (const d of docs) tokens += encode(d).length;
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(`js documents=${docs.length} tokens=${tokens} seconds=${seconds.toFixed(3)} MB/s=${(bytes / 1e6 / seconds).toFixed(3)}`);
