// `make apps`: bundles src/ (and the pinned packages of package-lock.json) with the pinned
// esbuild into ../dist/apps.js and ../dist/apps.css, minified, and writes ../dist/manifest.json:
// the hash of the sources they come from and their own hashes. apps/apps_test.go recomputes
// both, so a change of the sources without a rebuild, or an edit of the bundle by hand, fails
// `go test ./...`.
//
// The sources' hash: SHA-256 over, for each file (package.json, package-lock.json, build.mjs and
// everything under src/) in byte order of its slash-separated path, the line "<path>\n" then the
// line "<hex SHA-256 of its content>\n".

import * as esbuild from 'esbuild'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const dist = path.join(here, '..', 'dist')
const sha256 = (b) => createHash('sha256').update(b).digest('hex')

function sourceFiles () {
  const out = ['package.json', 'package-lock.json', 'build.mjs']
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(here, rel), { withFileTypes: true })) {
      const p = rel + '/' + e.name
      if (e.isDirectory()) walk(p)
      else out.push(p)
    }
  }
  walk('src')
  return out.sort((a, b) => (Buffer.from(a) < Buffer.from(b) ? -1 : 1))
}

export function sourcesHash () {
  const h = createHash('sha256')
  for (const f of sourceFiles()) h.update(`${f}\n${sha256(fs.readFileSync(path.join(here, f)))}\n`)
  return h.digest('hex')
}

// zod's error messages in English only: the SDK's schemas never switch locale, and the other
// locales are most of zod's size.
const zodEnglish = {
  name: 'zod-english',
  setup (b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({ contents: 'export { default as en } from "./en.js";', loader: 'js' }))
  }
}

const sources = sourcesHash()
const esbuildVersion = JSON.parse(fs.readFileSync(path.join(here, 'node_modules', 'esbuild', 'package.json'))).version
const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { apps: 'src/main.js' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2022', 'chrome110', 'firefox115', 'safari16'],
  platform: 'browser',
  define: { 'process.env.NODE_ENV': '"production"' },
  legalComments: 'eof',
  charset: 'utf8',
  outdir: 'out',
  write: false,
  plugins: [zodEnglish],
  logLevel: 'warning'
})
const banner = `/* jupyter-collab-mcp MCP Apps: built by make apps from apps/web (sources sha256 ${sources}), do not edit */\n`
fs.mkdirSync(dist, { recursive: true })
const files = {}
for (const f of result.outputFiles) {
  const name = path.basename(f.path) // apps.js, apps.css
  const body = Buffer.concat([Buffer.from(banner), Buffer.from(f.contents)])
  fs.writeFileSync(path.join(dist, name), body)
  files[name] = sha256(body)
}
const manifest = { sources, bundler: `esbuild ${esbuildVersion}`, files }
fs.writeFileSync(path.join(dist, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n')
for (const [name, hash] of Object.entries(files)) {
  console.log(`apps/dist/${name}: ${fs.statSync(path.join(dist, name)).size} bytes, sha256 ${hash.slice(0, 12)}`)
}
