// The outputs view: the outputs of the cells a tool read or ran (get_notebook,
// execute_notebook_cell, batch_execute_notebook_cells, get_execution), read live from the
// notebook through app_read_notebook, never from the text the model got. While a run goes on it
// follows the cells: [*], outputs arriving, the count at the end.

import { h, outputs, prompt, linkify } from './render.js'
import { ToolError } from './host.js'

const RUNNING = ['running', 'queued']

export const outputsView = {
  async start (ctx, args, result) {
    const sc = result.structuredContent ?? {}
    const path = args.path ?? sc.path
    if (result.isError || !path) {
      ctx.root.replaceChildren(h('p', { class: 'muted' }, 'No outputs to show: the call did not read or run cells.'))
      return
    }
    const query = { path }
    if (args.fork_id) query.fork_id = args.fork_id
    const ran = Array.isArray(sc.cells) ? sc.cells.map((c) => c.cell_id).filter(Boolean) : []
    const range = args.cell_range ?? {}
    if (ran.length) query.cell_ids = ran
    else if (Array.isArray(args.cell_ids) && args.cell_ids.length) query.cell_ids = args.cell_ids
    else if (args.cell_id) query.cell_ids = [args.cell_id]
    else {
      const start = range.start ?? args.start_index
      const end = range.end ?? args.end_index
      if (start !== undefined) query.start_index = start
      if (end !== undefined) query.end_index = end
    }
    linkify(ctx.root, ctx)
    const onlyWithOutputs = !ran.length && !args.cell_id && !args.cell_ids // a read: the cells that have some
    let view = await ctx.call('app_read_notebook', query)
    const draw = (running) => ctx.root.replaceChildren(render(view, path, query.fork_id, onlyWithOutputs, running))
    const following = sc.job_id && RUNNING.includes(sc.status)
    draw(following)
    if (!following) return
    // Follow the run: the notebook as it changes, until the job says it is over.
    let done = false
    const job = watchJob(ctx, sc.job_id).finally(() => { done = true })
    while (!done && !ctx.stopped) {
      await Promise.race([ctx.whenVisible(), job])
      const next = await Promise.race([
        ctx.call('app_read_notebook', { ...query, since_version: view.version, wait_ms: 20000 }),
        job.then(() => null)
      ])
      if (next && !next.unchanged) { view = next; draw(true) }
    }
    view = await ctx.call('app_read_notebook', query)
    draw(false)
  }
}

// watchJob resolves when the run is over (get_execution waits for it, 20 s at a time).
async function watchJob (ctx, id) {
  for (;;) {
    if (ctx.stopped) return
    try {
      const j = await ctx.call('get_execution', { job_id: id, timeout: 20, include_images: false, max_output_chars: 0 })
      if (!RUNNING.includes(j.status)) return
    } catch (e) {
      if (e instanceof ToolError) return // forgotten, or not ours to follow
      throw e
    }
  }
}

function render (view, path, fork, onlyWithOutputs, running) {
  let cells = (view.cells ?? []).filter((c) => c.cell_type === 'code')
  if (onlyWithOutputs) cells = cells.filter((c) => (c.outputs ?? []).length > 0)
  const head = h('header', { class: 'bar' },
    h('span', { class: 'title', title: path }, path),
    fork && h('span', { class: 'badge' }, 'fork'),
    h('span', { class: 'muted' }, running ? 'running…' : `${cells.length} cell${cells.length === 1 ? '' : 's'}`))
  const body = cells.length
    ? cells.map((c) => h('section', { class: 'cell', dataset: { cellId: c.id, index: c.index } },
      h('div', { class: 'prompt' }, prompt(c)),
      h('div', { class: 'cell-body' },
        h('details', { class: 'source-peek' }, h('summary', null, firstLine(c.source) || '(empty cell)'), h('pre', { class: 'input code' }, c.source)),
        (c.outputs ?? []).length ? outputs(c) : h('p', { class: 'muted' }, c.running ? 'running…' : 'no output'))))
    : [h('p', { class: 'muted' }, 'No outputs in these cells.')]
  if (view.outputs_omitted) body.push(h('p', { class: 'muted' }, `${view.outputs_omitted} output(s) too large for this view.`))
  return h('div', { class: 'view outputs-view' }, head, body)
}

function firstLine (s) {
  const line = (s ?? '').split('\n').find((l) => l.trim() !== '') ?? ''
  return line.length > 120 ? line.slice(0, 119) + '…' : line
}
