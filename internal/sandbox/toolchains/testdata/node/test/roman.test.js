'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { toRoman, fromRoman } = require('../lib/roman');

test('writes numerals', () => {
  assert.equal(toRoman(1), 'I');
  assert.equal(toRoman(4), 'IV');
  assert.equal(toRoman(1994), 'MCMXCIV');
  assert.equal(toRoman(3999), 'MMMCMXCIX');
});

test('refuses what has no numeral', () => {
  assert.throws(() => toRoman(0), RangeError);
  assert.throws(() => toRoman(4000), RangeError);
  assert.throws(() => toRoman(1.5), RangeError);
});

test('round-trips every numeral', () => {
  for (let n = 1; n <= 3999; n++) {
    assert.equal(fromRoman(toRoman(n)), n);
  }
  assert.throws(() => fromRoman('IIII'), SyntaxError);
  assert.throws(() => fromRoman('MCMZ'), SyntaxError);
});
