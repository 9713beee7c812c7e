// The "human" of the browser end-to-end tests: Debian's headless Chromium driven by playwright-core,
// showing a real JupyterLab. Driven by the Go tests like integration/node/peer.mjs: one JSON request
// per stdin line {"id", "op", ...}, one JSON reply per line {"id", "ok", ...}. Requests run
// concurrently (a test types in the page while it waits for other things), each with its own id.
//
// Everything the tests assert is read from the DOM, i.e. what a person sees; nothing reaches into
// JupyterLab's JavaScript objects.

import { chromium } from 'playwright-core'
import readline from 'node:readline'
import fs from 'node:fs'
import path from 'node:path'

let context = null
let page = null
const consoleErrors = []

// readCells is evaluated in the page: the active notebook as it is displayed.
const READ_CELLS = `
function readCells () {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)')
  if (!panel) return []
  return [...panel.querySelectorAll('.jp-Notebook .jp-Cell')].map((c) => {
    const content = c.querySelector('.jp-InputArea-editor .cm-content')
    const lines = content ? [...content.querySelectorAll(':scope > .cm-line')].map((l) => l.textContent) : null
    const md = c.querySelector('.jp-MarkdownOutput')
    return {
      type: c.classList.contains('jp-CodeCell') ? 'code' : c.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
      prompt: (c.querySelector('.jp-InputPrompt')?.textContent ?? '').trim(),
      source: lines === null ? null : lines.join('\\n'),
      rendered: c.classList.contains('jp-mod-rendered') && md ? md.innerText.trim() : null,
      outputs: [...c.querySelectorAll('.jp-OutputArea-output')].map((o) => o.innerText),
      active: c.classList.contains('jp-mod-active')
    }
  })
}`

function out (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

function cellEditor (index) {
  return page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').nth(index).locator('.jp-InputArea-editor .cm-content')
}

const ops = {
  // launch starts Chromium with a fresh profile directory (given by the test, deleted by it).
  async launch (req) {
    context = await chromium.launchPersistentContext(req.userDataDir, {
      executablePath: req.executablePath,
      headless: true,
      args: req.args ?? [],
      viewport: { width: 1400, height: 900 },
      timeout: req.timeoutMs ?? 60000
    })
    page = context.pages()[0] ?? await context.newPage()
    page.on('console', (m) => { if (m.type() === 'error' && consoleErrors.length < 200) consoleErrors.push(m.text()) })
    page.on('framenavigated', (f) => { if (f === page.mainFrame()) process.stderr.write(`navigated ${f.url()}\n`) })
    page.on('load', () => process.stderr.write('load\n'))
    return { version: context.browser()?.version() ?? '' }
  },

  // open loads a JupyterLab URL and waits until the notebook's cells are displayed. A marker is
  // left in the page so a later check can prove it was never reloaded.
  async open (req) {
    const timeout = req.timeoutMs ?? 60000
    await page.goto(req.url, { timeout })
    await page.waitForSelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell', { timeout })
    await page.evaluate((m) => { window.__e2eMarker = m }, req.marker ?? 'loaded')
    return {}
  },

  // waitFor waits until a JS expression is truthy in the page and returns its value. In scope:
  // cells (readCells() at that moment), arg.
  async waitFor (req) {
    // A string given to playwright is evaluated as an expression (a function in it is not called),
    // so the argument is embedded as JSON.
    const src = `((arg) => { ${READ_CELLS}; const cells = readCells(); return (${req.expr}) })(${JSON.stringify(req.arg ?? null)})`
    try {
      const handle = await page.waitForFunction(src, null, { timeout: req.timeoutMs ?? 30000, polling: req.pollMs ?? 'raf' })
      return { value: await handle.jsonValue() }
    } catch (e) {
      // Say what the page showed instead, so the failure explains itself.
      const cells = await page.evaluate(`(() => { ${READ_CELLS}; return readCells() })()`).catch(() => null)
      throw new Error(`${e.message.split('\n')[0]}; waiting for ${req.expr}; cells shown: ${JSON.stringify(cells)}`)
    }
  },

  // eval evaluates a function body in the page (async allowed) with arg in scope.
  async eval (req) {
    const src = `(async (arg) => { ${READ_CELLS}; ${req.body} })(${JSON.stringify(req.arg ?? null)})`
    return { value: await page.evaluate(src) }
  },

  async cells () {
    return { cells: await page.evaluate(`(() => { ${READ_CELLS}; return readCells() })()`) }
  },

  async click (req) {
    await page.locator(req.selector).first().click({ timeout: req.timeoutMs ?? 10000 })
    return {}
  },

  // type clicks into a cell's editor, moves to the end of its text and types like a person
  // (one key event per character, delayMs apart).
  async type (req) {
    const ed = cellEditor(req.cell)
    await ed.click({ timeout: req.timeoutMs ?? 10000 })
    await page.keyboard.press('Control+End')
    await page.keyboard.type(req.text, { delay: req.delayMs ?? 0 })
    return {}
  },

  async press (req) {
    await page.keyboard.press(req.key)
    return {}
  },

  async screenshot (req) {
    fs.mkdirSync(path.dirname(req.path), { recursive: true })
    await page.screenshot({ path: req.path, fullPage: false, clip: req.clip ?? undefined })
    return {}
  },

  consoleErrors: async () => ({ errors: consoleErrors }),

  async close () {
    if (context) await context.close()
    context = null
    return {}
  }
}

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', async (line) => {
  let req
  try { req = JSON.parse(line) } catch (e) { out({ ok: false, error: 'bad json' }); return }
  try {
    const op = ops[req.op]
    if (!op) throw new Error('unknown op ' + req.op)
    out({ id: req.id, ok: true, ...(await op(req)) })
  } catch (e) {
    out({ id: req.id, ok: false, error: String(e && e.message ? e.message : e) })
  }
})
rl.on('close', async () => {
  try { if (context) await context.close() } catch (e) {}
  process.exit(0)
})
