// The link to the host: connect with the SDK's App class, follow the host's theme, hand the view
// the tool call it was opened for, and call the sidecar's tools through the host.

import { App, applyDocumentTheme, applyHostFonts, applyHostStyleVariables } from '@modelcontextprotocol/ext-apps'

// ToolError is a tool's failure (isError), with the message the sidecar gave.
export class ToolError extends Error {}

// connect starts a view: view.start(ctx, args, result) runs once the host has sent the tool's
// input and result. ctx offers call(name, args) → structuredContent, openLink(url), stopped
// (true once the host tears the view down: long loops end) and whenVisible() (resolves while
// the view is on screen: a view that follows the notebook waits for it before each long poll,
// so views scrolled away in a chat hold no request open; a session has a few at most).
export async function connect (name, root, view) {
  const app = new App({ name: 'jupyter-collab-mcp ' + name, version: '1' }, {})
  const ctx = {
    app,
    root,
    stopped: false,
    call: async (tool, args) => {
      const res = await app.callServerTool({ name: tool, arguments: args })
      if (res.isError) throw new ToolError(errorText(res))
      return res.structuredContent ?? {}
    },
    canOpenLinks: () => !!app.getHostCapabilities()?.openLinks,
    openLink: (url) => app.openLink({ url }),
    canFullscreen: () => (app.getHostContext()?.availableDisplayModes ?? []).includes('fullscreen'),
    fullscreen: () => app.requestDisplayMode({ mode: 'fullscreen' })
  }
  let visible = true
  const waiting = []
  if (typeof IntersectionObserver === 'function') {
    new IntersectionObserver((entries) => {
      visible = entries.some((e) => e.isIntersecting)
      if (visible) waiting.splice(0).forEach((resolve) => resolve())
    }).observe(document.documentElement)
  }
  ctx.whenVisible = () => (visible ? Promise.resolve() : new Promise((resolve) => waiting.push(resolve)))
  let args = null
  let result = null
  let started = false
  const start = () => {
    if (started || args === null || result === null) return
    started = true
    Promise.resolve(view.start(ctx, args, result)).catch((e) => showError(root, e))
  }
  app.ontoolinput = (p) => { args = p.arguments ?? {}; start() }
  app.ontoolresult = (r) => {
    if (started) { view.result?.(ctx, r); return }
    result = r
    start()
  }
  app.ontoolcancelled = (p) => { if (!started) showError(root, new Error('the tool call was cancelled' + (p.reason ? ': ' + p.reason : ''))) }
  app.onhostcontextchanged = (c) => theme(c)
  app.onteardown = async () => { ctx.stopped = true; return {} }
  root.textContent = 'Loading…'
  await app.connect()
  theme(app.getHostContext())
  return ctx
}

// theme applies what the host says of its look: light or dark, its CSS variables, its fonts.
function theme (c) {
  if (!c) return
  if (c.theme) applyDocumentTheme(c.theme)
  if (c.styles?.variables) applyHostStyleVariables(c.styles.variables)
  if (c.styles?.css?.fonts) applyHostFonts(c.styles.css.fonts)
}

// errorText is what a failed tool result says: the sidecar's {"error": ...} or the plain text.
export function errorText (res) {
  const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n')
  try {
    const body = JSON.parse(text)
    if (body && typeof body.error === 'string') return body.error
  } catch {}
  return text || 'the tool failed'
}

export function showError (root, e) {
  const p = document.createElement('p')
  p.className = 'error-banner'
  p.textContent = e?.message ?? String(e)
  root.replaceChildren(p)
}

// sleep waits ms, or less once the view is torn down.
export function sleep (ms) { return new Promise((resolve) => setTimeout(resolve, ms)) }
