// Compares ./tokenize's ids with the reference's, document by document (one line each), and
// reports the first mismatches with where the document came from.
// Usage: node tests/text/compare_ids.js EXPECTED GOT NAMES_JSON
'use strict';
const fs = require('fs');

const [expectedPath, gotPath, namesPath] = process.argv.slice(2);
const lines = (p) => fs.readFileSync(p, 'utf8').replace(/\n$/, '').split('\n');
const expected = lines(expectedPath);
const got = lines(gotPath);
const names = JSON.parse(fs.readFileSync(namesPath, 'utf8'));

let sameDocs = 0;
let sameTokens = 0;
let mismatches = 0;
for (let d = 0; d < expected.length; d++) {
  const want = expected[d] === '' ? [] : expected[d].split(' ');
  const have = d < got.length && got[d] !== '' ? got[d].split(' ') : [];
  if (expected[d] === got[d]) {
    sameDocs++;
    sameTokens += want.length;
    continue;
  }
  if (++mismatches <= 5) {
    let i = 0;
    while (i < want.length && want[i] === have[i]) i++;
    console.log(`MISMATCH ${names[d]}: first difference at token ${i}: ` +
                `expected ...${want.slice(Math.max(0, i - 3), i + 5).join(' ')}... ` +
                `got ...${have.slice(Math.max(0, i - 3), i + 5).join(' ')}...`);
  }
}
if (got.length !== expected.length) console.log(`MISMATCH: ${got.length} lines of ids for ${expected.length} documents`);
console.log(`${sameDocs}/${expected.length} documents, ${sameTokens} tokens identical`);
process.exit(mismatches === 0 && got.length === expected.length ? 0 : 1);
