// The suggestion view: what a fork changes, cell by cell (app_review_fork), with Accept and
// Reject. Each cell starts accepted; a person may reject some. Accept merges the fork
// (merge_document_fork) after taking the rejected cells out of it (app_reject_fork_cells);
// Reject all discards it (discard_document_fork). Every call goes through the host to the
// sidecar's tools, with the caller's permissions.

import { h, outputs, linkify } from './render.js'

export const suggestionView = {
  async start (ctx, args, result) {
    const sc = result.structuredContent ?? {}
    const path = args.path ?? sc.path
    const fork = args.fork_id ?? sc.fork_id
    if (result.isError || !path || !fork) {
      ctx.root.replaceChildren(h('p', { class: 'muted' }, 'No fork to review.'))
      return
    }
    linkify(ctx.root, ctx)
    const state = { review: await ctx.call('app_review_fork', { path, fork_id: fork }), rejected: new Set(), done: null, busy: false, error: '' }
    const draw = () => ctx.root.replaceChildren(render(ctx, state, path, fork, act))
    const act = async (what) => {
      state.busy = true
      state.error = ''
      draw()
      try {
        if (what === 'refresh') {
          state.review = await ctx.call('app_review_fork', { path, fork_id: fork })
          const ids = new Set((state.review.cells ?? []).map((c) => c.id))
          for (const id of state.rejected) if (!ids.has(id)) state.rejected.delete(id)
        } else if (what === 'reject-all' || (what === 'accept' && allRejected(state))) {
          await ctx.call('discard_document_fork', { path, fork_id: fork })
          state.done = 'Rejected: the fork was discarded and the notebook was not changed.'
        } else if (what === 'accept') {
          if (state.rejected.size) await ctx.call('app_reject_fork_cells', { path, fork_id: fork, cell_ids: [...state.rejected] })
          const merged = await ctx.call('merge_document_fork', { path, fork_id: fork })
          state.done = `Accepted: merged into the notebook (${merged.merged ?? 'done'}).`
        }
      } catch (e) {
        state.error = e.message ?? String(e)
      }
      state.busy = false
      draw()
    }
    draw()
  }
}

function allRejected (state) {
  const cells = state.review.cells ?? []
  return cells.length > 0 && cells.every((c) => state.rejected.has(c.id))
}

function render (ctx, state, path, fork, act) {
  const r = state.review
  const cells = r.cells ?? []
  const n = cells.length
  const rejected = cells.filter((c) => state.rejected.has(c.id)).length
  const off = state.busy || !!state.done
  const accept = rejected === 0 ? 'Accept all' : rejected === n ? 'Reject all' : `Accept ${n - rejected}, reject ${rejected}`
  const head = h('header', { class: 'bar' },
    h('span', { class: 'title', title: path }, `Suggested changes to ${path}`),
    h('span', { class: 'muted' }, r.summary ?? ''),
    h('span', { class: 'actions' },
      h('button', { type: 'button', class: 'ghost', dataset: { action: 'refresh' }, disabled: off, onclick: () => act('refresh') }, 'Refresh'),
      h('button', { type: 'button', class: 'danger', dataset: { action: 'reject-all' }, disabled: off, onclick: () => act('reject-all') }, 'Reject all'),
      h('button', { type: 'button', class: 'primary', dataset: { action: 'accept' }, disabled: off || (r.kind === 'notebook' && n === 0), onclick: () => act('accept') }, accept)))
  const banner = state.done
    ? h('p', { class: 'done-banner', role: 'status' }, state.done)
    : state.error ? h('p', { class: 'error-banner', role: 'alert' }, state.error) : null
  let body
  if (r.kind === 'text') body = [diffBlock(r.diff ?? '')]
  else if (n === 0) body = [h('p', { class: 'muted' }, 'The fork changes nothing yet.')]
  else body = cells.map((c) => card(c, state, off, () => { toggle(state, c.id); ctx.root.replaceChildren(render(ctx, state, path, fork, act)) }))
  return h('div', { class: 'view suggestion-view' + (state.done ? ' finished' : '') }, head, banner, body)
}

function toggle (state, id) {
  if (state.rejected.has(id)) state.rejected.delete(id)
  else state.rejected.add(id)
}

function card (c, state, off, flip) {
  const rejected = state.rejected.has(c.id)
  const what = c.status === 'edited' && c.fields?.length ? `edited (${c.fields.join(', ')})` : c.status
  let diff
  if (c.status === 'added') diff = lines(c.after ?? '', '+')
  else if (c.status === 'removed') diff = lines(c.before ?? '', '-')
  else if (c.diff) diff = diffBlock(c.diff)
  else diff = h('pre', { class: 'diff' }, h('span', { class: 'ctx' }, c.after ?? c.before ?? ''))
  return h('section', { class: 'change' + (rejected ? ' rejected' : ''), dataset: { cellId: c.id, status: c.status } },
    h('div', { class: 'change-head' },
      h('span', { class: 'badge ' + c.status }, what + (c.moved && c.status !== 'moved' ? ', moved' : '')),
      h('span', { class: 'muted' }, `${c.cell_type} cell #${c.index + 1}`),
      h('span', { class: 'actions' },
        h('button', { type: 'button', class: rejected ? 'ghost' : 'ghost pressed', 'aria-pressed': String(!rejected), dataset: { action: 'accept-cell' }, disabled: off, onclick: () => { if (rejected) flip() } }, 'Accept'),
        h('button', { type: 'button', class: rejected ? 'ghost pressed' : 'ghost', 'aria-pressed': String(rejected), dataset: { action: 'reject-cell' }, disabled: off, onclick: () => { if (!rejected) flip() } }, 'Reject'))),
    diff,
    (c.outputs ?? []).length ? h('div', { class: 'fork-outputs' }, h('div', { class: 'muted small' }, 'Output in the fork'), outputs(c)) : null)
}

function lines (src, sign) {
  const cls = sign === '+' ? 'ins' : 'del'
  return h('pre', { class: 'diff' }, src.split('\n').map((l) => h('span', { class: cls }, sign + l)))
}

// diffBlock renders a unified diff.
function diffBlock (diff) {
  const shown = diff.split('\n').filter((l, i, all) => (l !== '' || i < all.length - 1) && !l.startsWith('\\'))
  return h('pre', { class: 'diff' }, shown.map((l) => {
    const cls = l.startsWith('@@') ? 'hunk' : l.startsWith('+') ? 'ins' : l.startsWith('-') ? 'del' : 'ctx'
    return h('span', { class: cls }, l)
  }))
}
