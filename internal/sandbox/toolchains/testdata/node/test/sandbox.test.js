'use strict';

// The sandbox layout a Node toolchain relies on: native modules and
// test helpers write executables under os.tmpdir() and run them, and npm
// keeps its cache and logs under HOME.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

test('an executable under TMPDIR runs', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'roman-'));
  const script = path.join(dir, 'hello.sh');
  fs.writeFileSync(script, '#!/bin/sh\necho executable-tmp\n', { mode: 0o755 });
  assert.equal(execFileSync(script, { encoding: 'utf8' }), 'executable-tmp\n');
  fs.rmSync(dir, { recursive: true });
});

test('HOME and the XDG directories are writable', () => {
  for (const name of ['HOME', 'XDG_CACHE_HOME', 'XDG_CONFIG_HOME']) {
    const dir = process.env[name];
    assert.ok(dir, `${name} is set`);
    const probe = path.join(dir, `probe-${process.pid}`);
    fs.writeFileSync(probe, 'x');
    fs.rmSync(probe);
  }
});
