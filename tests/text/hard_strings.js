// Inputs that stress the corners of GPT-2's pre-tokenizer pattern and of byte-level BPE. Each
// entry is one document. U+0085 and U+FEFF are deliberately absent here: the JavaScript encoder's
// \s differs from GPT-2's on exactly those two (tests/unit/test_tokenizer.cpp covers them).
'use strict';

const scripts = [
  'Hello world', 'The quick brown fox jumps over the lazy dog.',
  '中文字符测试，汉字与标点。', '日本語のテキスト、ひらがなとカタカナ。', '한국어 텍스트 한글 자모',
  'العربية نص تجريبي، مع علامات.', 'हिन्दी पाठ देवनागरी लिपि में।', 'ภาษาไทยไม่มีช่องว่างระหว่างคำ',
  'Ελληνικά κείμενα', 'Русский текст с буквой ё', 'עברית עם ניקוד: שָׁלוֹם', 'ქართული ენა',
  'Tiếng Việt có dấu', 'ᚠᚢᚦᚨᚱᚲ runes', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters 𝟙𝟚𝟛', 'Ⅻ Ⅳ ⅷ roman numerals ½ ¾ ²³',
  '٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits', '१२३ Devanagari digits', '①②③ circled',
];

const contractions = [
  "I'm you're we've they'll she'd it's don't", "I'M YOU'RE WE'VE THEY'LL SHE'D IT'S DON'T",
  "don'T can'T I'M It'S", "'s's'S'''t're 're 've'm'll'd", "rock'n'roll o'clock '90s",
  "it’s don’t ‘quoted’ “double” ʼapostrophe ′prime", "''s '' 's'", "x'", "'",
];

const numbers = [
  '0', '12', '123', '1234567890', '3.14159265358979', '1,000,000', '-42', '+1e10', '2023-01-01T00:00:00Z',
  '9'.repeat(500), 'a1b2c3', '1st 2nd 3rd', '$100.00 €5 ¥10 £3',
];

const whitespace = [
  ' ', '  ', '   ', '\n', '\n\n', '\t', '\r\n', ' \n ', 'a b', 'a  b', 'a   b', 'a\nb', 'a\n\nb', 'a \n b',
  'a\t\tb', 'a \t b', '  leading', 'trailing  ', '\n\nleading newlines', 'trailing newlines\n\n',
  'mixed \t\n \r\n\t  runs \u00a0\u00a0 nbsp\u3000ideographic\u2003em\u2028ls\u2029ps end',
  ' \u00a0x', '\u00a0 x', '\u2003x', 'x\u2003', ' 1', '  1', ' !', '  !', ' \u00e9', '  \u00e9',
  '\v\f\r', 'a\u000bb\u000cc', 'tab\tseparated\tvalues\n1\t2\t3\n',
];

const symbols = [
  '<|endoftext|>', 'text<|endoftext|>more', '<|endoftext|><|endoftext|>', '!!!???...', '-->', '===',
  '{"key": "value", "list": [1, 2, 3]}', '",",",","', "','", '],[', 'a.b,c;d:e', '#include <stdio.h>',
  'https://example.com/path?query=1&x=y#frag', 'email@example.com', '@user #hashtag', '~`^_|\\/',
  '\u0000\u0001\u0002\u001f\u007f control chars', '\u00ad soft hyphen', '\u200b zero width space', '\u200d',
];

const emoji = [
  '😀', '👍🏽', '👨‍👩‍👧‍👦 family', '🏳️‍🌈 flag', '🇺🇸🇫🇷 flags', '❤️ heart', 'emoji😀in😀words', ' 😀', '  😀',
  '1️⃣ keycap', '🤦🏼‍♂️',
];

const combining = [
  'e\u0301', 'cafe\u0301', ' e\u0301', 'a\u0300\u0301\u0302\u0303', '\u0301start', 'Z\u0351\u0352\u0353algo',
  'n\u0303o', 'ก\u0e31', '\u0915\u094d\u0937',
];

const long = [
  'a'.repeat(10000), 'ab'.repeat(5000), ' '.repeat(10000), '\n'.repeat(3000) + 'x', '!'.repeat(10000),
  'supercalifragilisticexpialidocious'.repeat(300), '中'.repeat(5000), '😀'.repeat(2500),
  'x '.repeat(5000), 'word, '.repeat(2000),
];

module.exports = [...scripts, ...contractions, ...numbers, ...whitespace, ...symbols, ...emoji, ...combining, ...long,
                  scripts.join('\n'), [...contractions, ...whitespace, ...symbols].join(' ')];
