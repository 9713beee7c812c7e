// The live notebook view: a read-only notebook that follows its room (cells edited, inserted,
// deleted and moved by anyone, [*] while a cell runs, outputs arriving, who is in which cell),
// by long-polling app_read_notebook with the version it shows. Cells that did not change keep
// their element, so the view does not flicker or lose what a person unfolded.

import { h, outputs, prompt, source, linkify } from './render.js'
import { sleep } from './host.js'

export const notebookView = {
  async start (ctx, args, result) {
    const sc = result.structuredContent ?? {}
    const path = args.path ?? sc.path
    if (!path) {
      ctx.root.replaceChildren(h('p', { class: 'muted' }, 'No notebook to show.'))
      return
    }
    linkify(ctx.root, ctx)
    let view = await ctx.call('app_read_notebook', { path })
    const ui = layout(ctx, path, view)
    ctx.root.replaceChildren(ui.el)
    ui.update(view)
    let failures = 0
    while (!ctx.stopped) {
      await ctx.whenVisible()
      try {
        const next = await ctx.call('app_read_notebook', { path, since_version: view.version, wait_ms: 20000 })
        if (next.unchanged) view = { ...view, version: next.version, collaborators: next.collaborators }
        else view = next
        ui.update(view)
        ui.status('')
        failures = 0
      } catch (e) {
        failures++
        ui.status(`reconnecting… (${e.message ?? e})`)
        await sleep(Math.min(500 * 2 ** failures, 15000))
      }
    }
  }
}

function layout (ctx, path, first) {
  const peers = h('span', { class: 'peers' })
  const status = h('span', { class: 'muted status' })
  const count = h('span', { class: 'muted' })
  const actions = h('span', { class: 'actions' })
  if (first.lab_url) {
    actions.append(ctx.canOpenLinks()
      ? h('button', { type: 'button', dataset: { action: 'open-lab' }, onclick: () => ctx.openLink(first.lab_url).catch(() => {}) }, 'Open in JupyterLab')
      : h('a', { href: first.lab_url, class: 'lab-link', title: 'Open in JupyterLab' }, 'JupyterLab'))
  }
  if (ctx.canFullscreen()) actions.append(h('button', { type: 'button', class: 'ghost', title: 'Full screen', onclick: () => ctx.fullscreen().catch(() => {}) }, '⤢'))
  const list = h('div', { class: 'cells' })
  const el = h('div', { class: 'view notebook-view' },
    h('header', { class: 'bar' }, h('span', { class: 'title', title: path }, path), count, peers, status, actions),
    list)
  const shown = new Map() // cell id → { key, el }
  let language = ''
  return {
    el,
    status: (s) => { status.textContent = s },
    update (view) {
      if (view.cells) {
        language = view.language ?? language
        count.textContent = `${view.cell_count} cell${view.cell_count === 1 ? '' : 's'}`
        const next = []
        const keep = new Map()
        for (const c of view.cells) {
          const key = JSON.stringify([c.cell_type, c.source, c.execution_count, !!c.running, c.outputs ?? []])
          let item = shown.get(c.id)
          if (!item || item.key !== key) item = { key, el: cellElement(c, language) }
          keep.set(c.id, item)
          next.push(item.el)
        }
        shown.clear()
        for (const [k, v] of keep) shown.set(k, v)
        // Reorder in place: elements already in the right place are not touched.
        next.forEach((node, i) => { if (list.children[i] !== node) list.insertBefore(node, list.children[i] ?? null) })
        while (list.children.length > next.length) list.lastElementChild.remove()
      }
      drawPeers(peers, list, view.collaborators ?? [])
    }
  }
}

function cellElement (c, language) {
  return h('section', { class: `cell ${c.cell_type}${c.running ? ' running' : ''}`, dataset: { cellId: c.id } },
    h('div', { class: 'prompt' }, prompt(c)),
    h('div', { class: 'cell-body' },
      h('div', { class: 'where' }),
      source(c, language),
      c.cell_type === 'code' && (c.outputs ?? []).length ? outputs(c) : null))
}

// drawPeers shows who is there in the header, and each collaborator by the cell they are in.
function drawPeers (header, list, collaborators) {
  header.replaceChildren(...collaborators.map((p) => chip(p, true)))
  for (const w of list.querySelectorAll('.where')) w.replaceChildren()
  for (const cell of list.querySelectorAll('.cell.peer-here')) { cell.classList.remove('peer-here'); cell.style.removeProperty('--peer-color') }
  for (const p of collaborators) {
    if (!p.cell_id) continue
    const cell = list.querySelector(`.cell[data-cell-id="${CSS.escape(p.cell_id)}"]`)
    if (!cell) continue
    cell.classList.add('peer-here')
    cell.style.setProperty('--peer-color', safeColor(p.color))
    cell.querySelector('.where').append(chip(p, false))
  }
}

function chip (p, withInitials) {
  const label = withInitials ? (p.initials || initials(p.name)) : p.name
  return h('span', { class: 'chip' + (p.agent ? ' agent' : ''), title: p.name + (p.agent ? ' (agent)' : ''), style: `--chip-color: ${safeColor(p.color)}` }, label)
}

function initials (name) {
  return (name ?? '?').split(/\s+/).filter(Boolean).slice(0, 2).map((w) => w[0].toUpperCase()).join('') || '?'
}

// safeColor accepts the colours awareness carries (#rgb, #rrggbb, rgb(...), a name) and nothing
// else (the value goes into a style attribute).
function safeColor (c) {
  return /^(#[0-9a-f]{3,8}|rgba?\([0-9., %]+\)|[a-z]+)$/i.test(c ?? '') ? c : 'var(--color-text-secondary, #6b7280)'
}
