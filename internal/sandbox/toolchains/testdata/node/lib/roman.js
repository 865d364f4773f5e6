'use strict';

const numerals = [
  [1000, 'M'], [900, 'CM'], [500, 'D'], [400, 'CD'],
  [100, 'C'], [90, 'XC'], [50, 'L'], [40, 'XL'],
  [10, 'X'], [9, 'IX'], [5, 'V'], [4, 'IV'], [1, 'I'],
];

/** toRoman writes an integer from 1 to 3999 in Roman numerals. */
function toRoman(n) {
  if (!Number.isInteger(n) || n < 1 || n > 3999) {
    throw new RangeError(`cannot write ${n} in Roman numerals`);
  }
  let out = '';
  for (const [value, symbol] of numerals) {
    while (n >= value) {
      out += symbol;
      n -= value;
    }
  }
  return out;
}

/** fromRoman reads a canonical Roman numeral. */
function fromRoman(s) {
  let rest = s;
  let n = 0;
  for (const [value, symbol] of numerals) {
    while (rest.startsWith(symbol)) {
      n += value;
      rest = rest.slice(symbol.length);
    }
  }
  if (rest !== '' || n === 0 || toRoman(n) !== s) {
    throw new SyntaxError(`not a canonical Roman numeral: ${s}`);
  }
  return n;
}

module.exports = { toRoman, fromRoman };
