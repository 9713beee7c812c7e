// The MCP Apps browser test's host, driven by the Go test like integration/e2e/browser.mjs: one
// JSON request per stdin line {"id", "op", ...}, one JSON reply per line {"id", "ok", ...}.
//
// It is what a chat host does with MCP Apps: the official MCP client (Streamable HTTP, announcing
// the io.modelcontextprotocol/ui extension) calls a tool as the model would, reads the ui://
// resource its listing points at, and shows it in a page built on the SDK's host bridge
// (host-page.js) in Debian's headless Chromium; the app's calls go back to the sidecar through
// the bridge and this client. Every request the page makes is recorded: an app that fetched
// anything from outside would show there.

import { chromium } from 'playwright-core'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import * as esbuild from 'esbuild'
import http from 'node:http'
import readline from 'node:readline'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
let browser = null
let page = null
let server = null
let client = null
let origin = ''
const requests = []
const consoleErrors = []
let toolList = null

function out (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

async function tools () {
  if (!toolList) toolList = (await client.listTools()).tools
  return toolList
}

function frameOf (id) {
  const f = page.frame({ name: id })
  if (!f) throw new Error(`no app frame ${id}`)
  return f
}

const ops = {
  // launch bundles the host page, serves it on loopback, connects the MCP client to the sidecar
  // and opens the page in Chromium.
  async launch (req) {
    const bundle = await esbuild.build({ absWorkingDir: here, entryPoints: ['host-page.js'], bundle: true, format: 'iife', write: false, logLevel: 'warning' })
    const page0 = `<!doctype html><html><head><meta charset="utf-8"><title>MCP Apps test host</title></head>` +
      `<body style="margin:0;background:${req.theme === 'dark' ? '#18181b' : '#f4f4f5'};font-family:sans-serif">` +
      `<script>${bundle.outputFiles[0].text.replaceAll('</script', '<\\/script')}</script></body></html>`
    server = http.createServer((_, res) => { res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }); res.end(page0) })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${server.address().port}`

    client = new Client({ name: 'jupyter-collab-mcp apps test host', version: '1' }, {
      capabilities: { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } }
    })
    await client.connect(new StreamableHTTPClientTransport(new URL(req.mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${req.token}` } } }))

    browser = await chromium.launch({ executablePath: req.executablePath, headless: true, args: req.args ?? [], timeout: req.timeoutMs ?? 60000 })
    page = await browser.newPage({ viewport: { width: 900, height: 900 }, deviceScaleFactor: 1, colorScheme: req.theme === 'dark' ? 'dark' : 'light' })
    page.on('request', (r) => { if (requests.length < 1000) requests.push(r.url()) })
    page.on('console', (m) => { if (m.type() === 'error' && consoleErrors.length < 200) consoleErrors.push(m.text()) })
    await page.exposeFunction('__mcp', async (method, params) => {
      if (method === 'tools/call') return await client.callTool(params, { timeout: 120000 })
      if (method === 'resources/read') return await client.readResource(params)
      throw new Error(`method ${method} is not offered to apps here`)
    })
    await page.goto(origin)
    return { version: browser.version(), origin }
  },

  // show calls a tool as the model would, then shows its app with that call's input and result.
  async show (req) {
    const list = await tools()
    const tool = list.find((t) => t.name === req.tool)
    if (!tool) throw new Error(`tool ${req.tool} not listed`)
    const uri = tool._meta?.ui?.resourceUri
    if (!uri) throw new Error(`tool ${req.tool} has no _meta.ui.resourceUri`)
    const result = await client.callTool({ name: req.tool, arguments: req.args }, { timeout: 120000 })
    const read = await client.readResource({ uri })
    const content = read.contents[0]
    if (content.mimeType !== 'text/html;profile=mcp-app') throw new Error(`${uri}: mime type ${content.mimeType}`)
    const started = Date.now()
    await page.evaluate((a) => window.hostShow(a), { id: req.frame, html: content.text, args: req.args, result, theme: req.theme ?? 'light', tools: list })
    return { uri, result, initMs: Date.now() - started, htmlBytes: content.text.length }
  },

  // call calls a tool as the model would (no app).
  async call (req) {
    return { result: await client.callTool({ name: req.tool, arguments: req.args }, { timeout: 120000 }) }
  },

  // waitFor waits until a JS expression is truthy in an app's frame and returns its value. It
  // polls from here, every 10 ms: playwright's own waitForFunction evaluates the expression with
  // eval inside the page, which the app's CSP forbids (as it should).
  async waitFor (req) {
    const f = frameOf(req.frame)
    const deadline = Date.now() + (req.timeoutMs ?? 30000)
    let last = null
    for (;;) {
      try {
        const v = await f.evaluate(req.expr)
        if (v) return { value: v }
      } catch (e) {
        last = e
      }
      if (Date.now() > deadline) break
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    const shown = await f.evaluate(() => document.body.innerText.slice(0, 2000)).catch(() => null)
    throw new Error(`timed out after ${req.timeoutMs ?? 30000} ms waiting for ${req.expr}${last ? ` (last error: ${last.message.split('\n')[0]})` : ''}; the app shows: ${JSON.stringify(shown)}`)
  },

  // theme switches the host's theme for an app, as a person toggling dark mode would.
  async theme (req) {
    await page.evaluate((a) => window.hostTheme(a), { id: req.frame, theme: req.theme })
    return {}
  },

  async eval (req) {
    return { value: await frameOf(req.frame).evaluate(req.expr) }
  },

  async click (req) {
    await frameOf(req.frame).locator(req.selector).first().click({ timeout: req.timeoutMs ?? 10000 })
    return {}
  },

  async screenshot (req) {
    fs.mkdirSync(path.dirname(req.path), { recursive: true })
    await page.locator(`iframe[name="${req.frame}"]`).screenshot({ path: req.path })
    return {}
  },

  // report is what the page did besides rendering: requests to anywhere but the host page,
  // CSP violations, console errors, links the apps asked the host to open.
  async report () {
    const outside = requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('about:'))
    const host = await page.evaluate(() => ({ opened: window.__opened, csp: window.__cspViolations }))
    return { outside, requests: requests.length, consoleErrors, ...host }
  },

  async close () {
    await browser?.close()
    await client?.close()
    server?.close()
    return {}
  }
}

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', (line) => {
  let req
  try { req = JSON.parse(line) } catch { return }
  const fn = ops[req.op]
  if (!fn) { out({ id: req.id, ok: false, error: `unknown op ${req.op}` }); return }
  fn(req).then((r) => out({ id: req.id, ok: true, ...r }), (e) => out({ id: req.id, ok: false, error: String(e?.stack ?? e) }))
})
rl.on('close', async () => { try { await ops.close() } catch {} process.exit(0) })
