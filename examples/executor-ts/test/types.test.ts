// What README.md promises about the types: tsconfig.json is strict, and no
// source escapes the type checker with `any`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { member, parseJSON } from '../lib/canonical.js'

// dist/test/ when compiled: the package is two levels up.
const pkg = new URL('../../', import.meta.url)

test('tsconfig.json is strict, and stricter', () => {
  const options = member(parseJSON(readFileSync(new URL('tsconfig.json', pkg))), 'compilerOptions')
  for (const flag of ['strict', 'noUncheckedIndexedAccess', 'exactOptionalPropertyTypes', 'useUnknownInCatchVariables', 'noImplicitReturns']) {
    assert.equal(member(options, flag), true, flag)
  }
})

test('no source uses any', () => {
  const sources = ['main.ts', ...readdirSync(new URL('lib/', pkg)).map((f) => 'lib/' + f), ...readdirSync(new URL('test/', pkg)).map((f) => 'test/' + f)]
    .filter((f) => f.endsWith('.ts'))
  assert.ok(sources.length >= 10, sources.join(' '))
  // any as a type: after a colon, as, <, |, & or =, or before [] , > ) | or
  // =; not AbortSignal.any( or the word in a comment.
  const anyType = /(?:[:<|&=]\s*|\bas\s+)any\b|\bany\s*(?:\[\]|[,>)|=])/
  for (const f of sources) {
    readFileSync(new URL(f, pkg), 'utf8').split('\n').forEach((line, i) => {
      const code = line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '').replace(/'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`/g, "''")
      assert.ok(!anyType.test(code), `${f}:${i + 1}: ${line.trim()}`)
    })
  }
})
