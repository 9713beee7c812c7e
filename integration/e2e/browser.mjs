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
let typing = null // the startTyping loop
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

  // startTyping types tokens like a person, one after another, into a cell's editor until
  // stopTyping: each token is prefix + a 4-digit number between two '@' ("@t0001@"), typed one key
  // every delayMs, a line break after every tenth. Before each token an open dialog is dismissed
  // (its title recorded) and the editor focused again (click, end of text) when it lost focus;
  // after it, the token counts as typed only if the editor shows it. The loop goes on while the
  // server is down: the page keeps editing its own copy, as it does for a person.
  async startTyping (req) {
    if (typing) throw new Error('already typing')
    const t = { stop: false, tokens: [], dialogs: [], refocus: 0, errors: [] }
    typing = t
    const cell = () => page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').nth(req.cell)
    const focused = () => page.evaluate((i) => {
      const c = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i]
      return !!(c && c.querySelector('.cm-content')?.contains(document.activeElement))
    }, req.cell)
    const shows = (tok) => page.evaluate(([i, tok]) => {
      const c = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i]
      const content = c && c.querySelector('.jp-InputArea-editor .cm-content')
      return !!content && content.textContent.includes(tok)
    }, [req.cell, tok])
    t.done = (async () => {
      for (let n = 1; !t.stop; n++) {
        try {
          // A dialog is answered as a person who wants to go on typing would: its cancel
          // button when it has one ("Continue" keeps the tab), else its only button ("Close",
          // "Reconnect"), else Escape. Each kind of dialog is recorded and photographed once.
          const dialog = page.locator('.jp-Dialog')
          for (let k = 0; k < 5 && await dialog.count() > 0; k++) {
            const d = dialog.first()
            const title = (await d.locator('.jp-Dialog-header').innerText({ timeout: 1000 }).catch(() => '')).trim()
            const body = (await d.locator('.jp-Dialog-body').innerText({ timeout: 1000 }).catch(() => '')).trim()
            const last = t.dialogs[t.dialogs.length - 1]
            if (!last || last.title !== title || Date.now() - last.at > 2000) {
              t.dialogs.push({ at: Date.now(), title, body: body.slice(0, 300) })
              if (req.dialogShots && t.dialogs.length <= 10) await page.screenshot({ path: `${req.dialogShots}-${t.dialogs.length}.png` }).catch(() => {})
            } else {
              last.at = Date.now()
            }
            const reject = d.locator('.jp-Dialog-button.jp-mod-reject')
            const accept = d.locator('.jp-Dialog-button.jp-mod-accept')
            if (await reject.count() > 0) await reject.first().click({ timeout: 2000 }).catch(() => {})
            else if (await accept.count() > 0) await accept.first().click({ timeout: 2000 }).catch(() => {})
            else await page.keyboard.press('Escape')
            await page.waitForTimeout(100)
          }
          if (!(await focused())) {
            t.refocus++
            await cell().locator('.jp-InputArea-editor .cm-content').click({ timeout: 5000 })
            await page.keyboard.press('Control+End')
          }
          const tok = '@' + req.prefix + String(n).padStart(4, '0') + '@'
          await page.keyboard.type(tok, { delay: req.delayMs ?? 15 })
          const at = Date.now()
          t.tokens.push({ tok, at, shown: await shows(tok) })
          if (n % 10 === 0) await page.keyboard.press('Enter')
        } catch (e) {
          if (t.errors.length < 20) t.errors.push(String(e && e.message ? e.message : e).split('\n')[0])
          await page.waitForTimeout(200)
        }
      }
    })()
    return {}
  },

  // typingState: the tokens typed so far (count and the last one).
  typingState: async () => ({ n: typing ? typing.tokens.length : 0, last: typing && typing.tokens.length ? typing.tokens[typing.tokens.length - 1] : null }),

  async stopTyping () {
    const t = typing
    if (!t) throw new Error('not typing')
    t.stop = true
    await t.done
    typing = null
    return { tokens: t.tokens, dialogs: t.dialogs, refocus: t.refocus, errors: t.errors }
  },

  // blank leaves the page (a closed tab): nothing of it reconnects any more.
  async blank () {
    await page.goto('about:blank')
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
