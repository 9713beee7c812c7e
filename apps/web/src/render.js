// Rendering a notebook's cells and outputs as JupyterLab shows them: the richest mime type of
// each output (HTML sanitised, images at their own size, SVG as an image, markdown), streams and
// tracebacks with their ANSI colours, prompts [n] and [*].

import DOMPurify from 'dompurify'
import { marked } from 'marked'

// h makes an element: h('div', {class: 'x', onclick: f}, child, 'text', ...).
export function h (tag, attrs, ...children) {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v)
    else if (k === 'dataset') Object.assign(el.dataset, v)
    else el.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue
    el.append(c instanceof Node ? c : String(c))
  }
  return el
}

// text is a multiline value of nbformat: a string, or a list of lines.
export function text (v) {
  if (Array.isArray(v)) return v.join('')
  if (typeof v === 'string') return v
  if (v === null || v === undefined) return ''
  return JSON.stringify(v, null, 2)
}

// Nothing a sanitised output holds loads anything: images only from data: URLs, no style that
// names a URL.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.hasAttribute('src') && !/^data:/i.test(node.getAttribute('src'))) node.removeAttribute('src')
  if (/url\s*\(/i.test(node.getAttribute('style') ?? '')) node.removeAttribute('style')
})

// sanitize keeps the markup of a table or a formatted text and drops what could run, load or
// restyle the view (scripts, handlers, frames, forms, style sheets, outside images).
export function sanitize (html) {
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'frame', 'object', 'embed', 'link', 'meta', 'base'],
    FORBID_ATTR: ['srcset'],
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true
  })
}

export function markdown (src) {
  return sanitize(marked.parse(src, { gfm: true, async: false }))
}

// The 16 ANSI colours, as JupyterLab's default theme names them.
const ANSI = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white']

// ansi renders text with SGR colour codes (tracebacks, coloured logs) as spans.
export function ansi (s) {
  const frag = document.createDocumentFragment()
  let fg = null
  let bold = false
  const push = (t) => {
    if (!t) return
    if (!fg && !bold) { frag.append(t); return }
    frag.append(h('span', { class: [fg && 'ansi-' + fg, bold && 'ansi-bold'].filter(Boolean).join(' ') }, t))
  }
  const re = /\x1b\[([0-9;]*)m/g // eslint-disable-line no-control-regex
  let last = 0
  let m
  while ((m = re.exec(s)) !== null) {
    push(s.slice(last, m.index))
    last = re.lastIndex
    const codes = m[1] === '' ? [0] : m[1].split(';').map(Number)
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i]
      if (c === 0) { fg = null; bold = false } else if (c === 1) bold = true
      else if (c === 22) bold = false
      else if (c >= 30 && c <= 37) fg = ANSI[c - 30]
      else if (c >= 90 && c <= 97) fg = ANSI[c - 90] + ' ansi-bright'
      else if (c === 39) fg = null
      else if (c === 38 || c === 48) i += codes[i + 1] === 5 ? 2 : 4 // 256 and true colours: not shown
    }
  }
  push(s.slice(last))
  // Carriage returns overwrite the line (progress bars): keep what the line ends as.
  return frag
}

function stripCR (s) {
  return s.split('\n').map((line) => { const i = line.lastIndexOf('\r'); return i >= 0 ? line.slice(i + 1) : line }).join('\n')
}

// The mime types an output is shown as, richest first.
const ORDER = ['text/html', 'image/svg+xml', 'image/png', 'image/jpeg', 'image/gif', 'image/webp', 'text/markdown', 'text/latex', 'application/json', 'text/plain']

// output renders one nbformat output.
export function output (o) {
  switch (o.output_type) {
    case 'stream':
      return h('pre', { class: 'output stream' + (o.name === 'stderr' ? ' stderr' : '') }, ansi(stripCR(text(o.text))))
    case 'error': {
      const tb = Array.isArray(o.traceback) && o.traceback.length ? o.traceback.join('\n') : `${o.ename}: ${o.evalue}`
      return h('pre', { class: 'output error' }, ansi(tb))
    }
    case 'execute_result':
    case 'display_data':
      return mimeBundle(o.data ?? {}, o.metadata ?? {})
  }
  return h('pre', { class: 'output' }, JSON.stringify(o, null, 2))
}

function mimeBundle (data, metadata) {
  const mime = ORDER.find((m) => data[m] !== undefined) ?? Object.keys(data).find((m) => m.startsWith('image/'))
  if (!mime) {
    const kinds = Object.keys(data).join(', ')
    return h('pre', { class: 'output muted' }, kinds ? `[${kinds}: not shown here]` : '')
  }
  const v = text(data[mime])
  const md = metadata[mime] ?? {}
  switch (mime) {
    case 'text/html':
      return h('div', { class: 'output html' }, sanitize(v))
    case 'text/markdown':
      return h('div', { class: 'output markdown' }, markdown(v))
    case 'text/plain':
    case 'text/latex':
      return h('pre', { class: 'output' }, ansi(v))
    case 'application/json':
      return h('pre', { class: 'output' }, typeof data[mime] === 'string' ? v : JSON.stringify(data[mime], null, 2))
    case 'image/svg+xml':
      // As an image: an SVG shown by <img> runs no script and loads nothing.
      return image('data:image/svg+xml;base64,' + base64(v), md, 'svg')
  }
  return image(`data:${mime};base64,${v.replace(/\s+/g, '')}`, md, mime.slice(6))
}

// image shows an image output fitted to the view; a click shows it pixel for pixel (scrolling).
function image (src, md, kind) {
  const img = h('img', { class: 'output image', src, alt: `${kind} output`, width: md.width, height: md.height, title: 'Click: actual size' })
  img.addEventListener('click', () => img.classList.toggle('actual'))
  return h('div', { class: 'output image-box' }, img)
}

function base64 (s) {
  const bytes = new TextEncoder().encode(s)
  let bin = ''
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(bin)
}

// prompt is a code cell's [n] / [*] / [ ].
export function prompt (cell) {
  if (cell.cell_type !== 'code') return ''
  if (cell.running) return '[*]:'
  return `[${cell.execution_count ?? ' '}]:`
}

// source renders a cell's input: markdown rendered, code as code.
export function source (cell, language) {
  if (cell.cell_type === 'markdown') return h('div', { class: 'input markdown' }, markdown(cell.source))
  return h('pre', { class: 'input code', dataset: { language: language ?? '' } }, h('code', null, cell.source))
}

// outputs renders a cell's outputs.
export function outputs (cell) {
  return h('div', { class: 'outputs' }, (cell.outputs ?? []).map(output))
}

// linkify routes clicks on links in rendered outputs to the host (a sandboxed view cannot
// navigate): only http(s) links, opened by the host when it can.
export function linkify (root, ctx) {
  root.addEventListener('click', (ev) => {
    const a = ev.target.closest?.('a[href]')
    if (!a) return
    ev.preventDefault()
    const href = a.getAttribute('href')
    if (/^https?:\/\//i.test(href) && ctx.canOpenLinks()) ctx.openLink(href).catch(() => {})
  })
}
