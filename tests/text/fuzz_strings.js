// Random short strings drawn from many Unicode blocks (letters of several scripts, combining
// marks, digits and other numbers, symbols, emoji with variation selectors and ZWJ, tags, Unicode
// spaces) mixed with ASCII contractions and whitespace, encoded by the JavaScript GPT-2 encoder.
// The generator is seeded, so every run checks the same strings; pass another seed to explore.
// U+0085 and U+FEFF are left out: there the JavaScript encoder departs from GPT-2 (see
// docs/tokenizer.md), and tests/unit/test_tokenizer.cpp pins GPT-2's behaviour instead.
// Usage: node tests/text/fuzz_strings.js OUT_DIR [COUNT] [SEED]
'use strict';
const fs = require('fs');
const path = require('path');

const { encode } = require(path.join(__dirname, '..', '..', 'data', 'npm', 'gpt-3-encoder', 'Encoder.js'));
const [outDir, count = '20000', seedArg = '12345'] = process.argv.slice(2);
if (!outDir) throw new Error('usage: fuzz_strings.js OUT_DIR [COUNT] [SEED]');

const blocks = [[0x20, 0x7e], [0x09, 0x0d], [0xa0, 0x17f], [0x300, 0x36f], [0x391, 0x3c9], [0x400, 0x45f],
  [0x5d0, 0x5ea], [0x600, 0x66f], [0x900, 0x97f], [0xe00, 0xe5b], [0x1680, 0x1680], [0x2000, 0x206f],
  [0x20a0, 0x20bf], [0x2150, 0x218b], [0x2460, 0x24ff], [0x3000, 0x303f], [0x3040, 0x30ff], [0x4e00, 0x4e40],
  [0xac00, 0xac40], [0xfe00, 0xfe0f], [0xff10, 0xff5a], [0x10000, 0x1000b], [0x12000, 0x12010],
  [0x1d400, 0x1d420], [0x1e900, 0x1e95f], [0x1f300, 0x1f64f], [0x1f900, 0x1f9ff], [0xe0020, 0xe007f]];
const pool = [];
for (const [a, b] of blocks) for (let c = a; c <= b; c++) pool.push(c);
const ascii = "'s't're've'm'll'd ' S 0123 ab\n\t  ";

// A 31-bit linear congruential generator: reproducible across node versions.
let seed = Number(seedArg);
const random = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x80000000; };

const docs = [];
for (let i = 0; i < Number(count); i++) {
  let s = '';
  const n = 1 + Math.floor(random() * 40);
  for (let j = 0; j < n; j++) {
    s += random() < 0.3 ? ascii[Math.floor(random() * ascii.length)]
                        : String.fromCodePoint(pool[Math.floor(random() * pool.length)]);
  }
  docs.push(s);
}
fs.writeFileSync(path.join(outDir, 'fuzz_docs.json'), JSON.stringify(docs));
fs.writeFileSync(path.join(outDir, 'fuzz_expected.txt'), docs.map((d) => encode(d).join(' ')).join('\n') + '\n');
