// Independent Yjs peer for the integration tests: the real yjs + y-protocols from npm, joining a
// Jupyter collaboration room exactly as JupyterLab's provider does (PUT the document session, or
// on jupyter-server-documents POST /api/fileid/index; open
// /api/collaboration/room/{format:type:fileId}[?sessionId=...], y-protocols sync and awareness).
// It is deliberately not our Go code: it checks what the sidecar writes.
//
// Protocol: one JSON request per stdin line {"id": n, "op": "...", ...}; one JSON reply per
// request {"id": n, "ok": true, ...} or {"id": n, "ok": false, "error": "..."}. Unsolicited
// events are lines {"event": "..."}.

import * as Y from 'yjs'
import * as syncProtocol from 'y-protocols/sync'
import * as awarenessProtocol from 'y-protocols/awareness'
import * as encoding from 'lib0/encoding'
import * as decoding from 'lib0/decoding'
import WebSocket from 'ws'
import readline from 'node:readline'

const MSG_SYNC = 0
const MSG_AWARENESS = 1
const MSG_RAW = 2

let doc = null
let awareness = null
let ws = null
let room = null // the room's websocket URL and token (reconnect)
let synced = false
let kind = 'notebook'
let watchers = []
let awarenessFrames = 0
const globals = []
const remote = Symbol('remote')

function out (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

function send (bytes) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(bytes)
}

// --- reading the document -------------------------------------------------------------------

function typeName (v) {
  if (v instanceof Y.Text) return 'Text'
  if (v instanceof Y.Map) return 'Map'
  if (v instanceof Y.Array) return 'Array'
  if (v === null) return 'null'
  return typeof v
}

function plain (v) {
  if (v instanceof Y.Text) return v.toString()
  if (v instanceof Y.Map || v instanceof Y.Array) return v.toJSON()
  return v
}

// snapshot returns the document as plain JSON plus the Yjs type of every schema-relevant field,
// so tests can check that the sidecar wrote Y.Text / Y.Map / Y.Array exactly where JupyterLab does.
function snapshot () {
  const state = doc.getMap('state').toJSON()
  if (kind === 'file') {
    return { kind, text: doc.getText('source').toString(), state }
  }
  const meta = doc.getMap('meta')
  const cells = doc.getArray('cells').toArray().map(c => {
    if (!(c instanceof Y.Map)) return { invalid: typeName(c) }
    const cell = {}
    const types = {}
    for (const [k, v] of c.entries()) {
      cell[k] = plain(v)
      types[k] = typeName(v)
    }
    const outs = c.get('outputs')
    if (outs instanceof Y.Array) {
      types.outputItems = outs.toArray().map(o => {
        if (!(o instanceof Y.Map)) return { self: typeName(o) }
        const t = { self: 'Map' }
        for (const [k, v] of o.entries()) t[k] = typeName(v)
        return t
      })
    }
    cell._types = types
    return cell
  })
  return {
    kind,
    nbformat: meta.get('nbformat'),
    nbformat_minor: meta.get('nbformat_minor'),
    metadata: plain(meta.get('metadata')),
    metadataType: typeName(meta.get('metadata')),
    cells,
    state
  }
}

// --- connecting -----------------------------------------------------------------------------

async function connect (req) {
  disconnect()
  kind = req.kind || 'notebook'
  const [format, type] = kind === 'file' ? ['text', 'file'] : ['json', 'notebook']
  const base = req.url.replace(/\/$/, '')
  const headers = { Authorization: 'token ' + req.token, 'Content-Type': 'application/json' }
  const session = await findRoom(base, headers, req, format, type)
  const roomId = `${format}:${type}:${session.fileId}`
  doc = new Y.Doc()
  awareness = new awarenessProtocol.Awareness(doc)
  awareness.setLocalState(req.awareness ?? { user: { username: 'peer-' + doc.clientID, name: 'Peer', display_name: 'Independent Peer', initials: 'IP', color: '#ff8800' } })
  synced = false
  doc.on('update', (update, origin) => {
    if (origin !== remote) {
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, MSG_SYNC)
      syncProtocol.writeUpdate(e, update)
      send(encoding.toUint8Array(e))
    }
    for (const w of watchers) w()
  })
  awareness.on('update', ({ added, updated, removed }, origin) => {
    if (origin === 'local') {
      const changed = added.concat(updated).concat(removed)
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, MSG_AWARENESS)
      encoding.writeVarUint8Array(e, awarenessProtocol.encodeAwarenessUpdate(awareness, changed))
      send(encoding.toUint8Array(e))
    }
  })
  const wsBase = base.replace(/^http/, 'ws')
  const query = session.sessionId ? `?sessionId=${encodeURIComponent(session.sessionId)}` : ''
  room = { url: `${wsBase}/api/collaboration/room/${roomId}${query}`, token: req.token }
  await openSocket(req.timeoutMs ?? 20000)
  return { clientID: doc.clientID, roomId, sessionId: session.sessionId, fileId: session.fileId }
}

// reconnect opens the room again with the document the peer already holds, under the same URL
// and session id, without asking the server for a new session: what JupyterLab's provider
// (y-websocket's WebsocketProvider) does by itself after its socket closed, e.g. when
// jupyter-server restarted. The sync then sends the server everything this copy holds that the
// server lacks — all of it, if the server rebuilt the room from the file. A server that refuses
// the old session closes with 1003 (the tab then asks the person to reload): the error says so.
async function reconnect (req) {
  if (!doc || !room) throw new Error('reconnect: never connected')
  if (ws) {
    ws.removeAllListeners('close')
    ws.close()
    ws = null
  }
  await openSocket(req.timeoutMs ?? 20000)
  return { clientID: doc.clientID }
}

// openSocket connects the current document to the room and resolves after the server's sync step 2.
function openSocket (timeoutMs) {
  synced = false
  const sock = new WebSocket(room.url, { headers: { Authorization: 'token ' + room.token }, maxPayload: 1 << 30 })
  ws = sock
  sock.binaryType = 'arraybuffer'
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`peer: no sync step 2 within ${timeoutMs} ms`))
      sock.removeAllListeners('close')
      sock.terminate()
    }, timeoutMs)
    sock.on('open', () => {
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, MSG_SYNC)
      syncProtocol.writeSyncStep1(e, doc)
      send(encoding.toUint8Array(e))
      const a = encoding.createEncoder()
      encoding.writeVarUint(a, MSG_AWARENESS)
      encoding.writeVarUint8Array(a, awarenessProtocol.encodeAwarenessUpdate(awareness, [doc.clientID]))
      send(encoding.toUint8Array(a))
    })
    sock.on('message', (data) => {
      if (sock !== ws) return
      const decoder = decoding.createDecoder(new Uint8Array(data))
      const t = decoding.readVarUint(decoder)
      if (t === MSG_SYNC) {
        const e = encoding.createEncoder()
        encoding.writeVarUint(e, MSG_SYNC)
        const st = syncProtocol.readSyncMessage(decoder, e, doc, remote)
        if (encoding.length(e) > 1) send(encoding.toUint8Array(e))
        if (st === syncProtocol.messageYjsSyncStep2 && !synced) {
          synced = true
          clearTimeout(timer)
          resolve()
        }
      } else if (t === MSG_AWARENESS) {
        awarenessFrames++
        awarenessProtocol.applyAwarenessUpdate(awareness, decoding.readVarUint8Array(decoder), remote)
      } else if (t === MSG_RAW) {
        out({ event: 'raw', text: decoding.readVarString(decoder) })
      }
    })
    sock.on('close', (code, reason) => {
      out({ event: 'close', code, reason: reason.toString() })
      if (!synced) { clearTimeout(timer); reject(new Error(`closed ${code} ${reason}`)) }
    })
    sock.on('error', (err) => { if (!synced) { clearTimeout(timer); reject(err) } })
  })
}

// findRoom asks the server for the document's file id the way each engine's JupyterLab provider
// does: jupyter-collaboration's session PUT (fileId + sessionId), or jupyter-server-documents'
// POST /api/fileid/index (no session id).
async function findRoom (base, headers, req, format, type) {
  if (req.engine === 'jsd') {
    const res = await fetch(`${base}/api/fileid/index?path=${encodeURIComponent(req.path)}`, { method: 'POST', headers })
    if (!res.ok) throw new Error(`fileid index POST ${res.status}: ${await res.text()}`)
    const body = await res.json()
    return { fileId: body.id, sessionId: '' }
  }
  const encPath = req.path.split('/').map(encodeURIComponent).join('/')
  const res = await fetch(`${base}/api/collaboration/session/${encPath}`, {
    method: 'PUT', headers, body: JSON.stringify({ format, type })
  })
  if (!res.ok) throw new Error(`session PUT ${res.status}: ${await res.text()}`)
  return await res.json()
}

function disconnect () {
  if (ws) {
    try {
      awarenessProtocol.removeAwarenessStates(awareness, [doc.clientID], 'local')
    } catch (e) {}
    ws.removeAllListeners('close')
    ws.close()
    ws = null
  }
  if (awareness) awareness.destroy()
  watchers = []
}

// waitFor polls an expression over the snapshot on every document change.
function waitFor (req) {
  const fn = new Function('nb', 'return (' + req.expr + ')')
  return new Promise((resolve, reject) => {
    let done = false
    const check = () => {
      if (done) return
      let ok = false
      try { ok = !!fn(snapshot()) } catch (e) { ok = false }
      if (ok) {
        done = true
        watchers = watchers.filter(w => w !== check)
        clearTimeout(timer)
        resolve({ snapshot: snapshot() })
      }
    }
    const timer = setTimeout(() => {
      done = true
      watchers = watchers.filter(w => w !== check)
      reject(new Error(`waitFor(${req.expr}) timed out after ${req.timeoutMs ?? 10000} ms; last: ${JSON.stringify(snapshot()).slice(0, 2000)}`))
    }, req.timeoutMs ?? 10000)
    watchers.push(check)
    check()
  })
}

// watchText reports each change of one cell's source (notebook) or of the text (file) as an
// event carrying the text's tail: the latency benchmark reads its markers from it.
function watchText (req) {
  const text = () => {
    if (kind === 'file') return doc.getText('source')
    const cell = doc.getArray('cells').toArray().find(c => c.get('id') === req.cellId)
    return cell ? cell.get('source') : null
  }
  const t = text()
  if (!t) throw new Error('no such cell ' + req.cellId)
  let last = t.length
  t.observe(() => {
    if (t.length !== last) {
      last = t.length
      const s = t.toString()
      out({ event: 'text', tail: s.slice(-(req.tail || 16)) })
    }
  })
  return {}
}

// transact runs test-provided code inside one Yjs transaction, with helpers in scope.
function transact (req) {
  const fn = new Function('Y', 'doc', 'cells', 'meta', 'state', 'source', 'args', req.code)
  let result
  doc.transact(() => {
    result = fn(Y, doc, doc.getArray('cells'), doc.getMap('meta'), doc.getMap('state'), doc.getText('source'), req.args ?? {})
  })
  return { result: result === undefined ? null : result }
}

// insertCell builds a cell exactly like @jupyter/ydoc createCell (empty Y.Text, Y.Map metadata).
function insertCell (req) {
  const c = req.cell
  const m = new Y.Map()
  const src = new Y.Text()
  const md = new Y.Map()
  m.set('source', src)
  m.set('metadata', md)
  m.set('cell_type', c.cell_type ?? 'code')
  m.set('id', c.id)
  if ((c.cell_type ?? 'code') === 'code') {
    m.set('outputs', new Y.Array())
    m.set('execution_count', c.execution_count ?? null)
  }
  doc.transact(() => {
    doc.getArray('cells').insert(req.index, [m])
    src.insert(0, c.source ?? '')
    for (const [k, v] of Object.entries(c.metadata ?? {})) md.set(k, v)
    doc.getMap('state').set('dirty', true)
  })
  return {}
}

// --- agent-scoped undo, differential (ydoc/undo.go against yjs's UndoManager) ----------------
// A scenario is a list of steps by an agent and a human on a text file ("source" Y.Text) or a
// notebook ("cells" Y.Array of cell Y.Maps). Ops (JSON): {t:'ins', cell, pos, text},
// {t:'del', cell, pos, len} (cell ignored for text files), {t:'setSource', cell, pos, del, ins}
// (the single edit ydoc's SetSource makes: delete then insert), {t:'insCell', index, id, source},
// {t:'delCell', index, count} (deleted one by one from the last, as ydoc does).

function undoCells (d) {
  return d.getArray('cells').toArray().filter(c => c instanceof Y.Map)
}

function undoContent (d, kind) {
  if (kind === 'file') return { text: d.getText('source').toString() }
  return {
    cells: undoCells(d).map(c => {
      const s = c.get('source')
      const id = c.get('id')
      return { id: typeof id === 'string' ? id : '', source: s instanceof Y.Text ? s.toString() : (typeof s === 'string' ? s : '') }
    })
  }
}

function undoTextOf (d, kind, cell) {
  if (kind === 'file') return d.getText('source')
  const c = undoCells(d)[cell]
  if (!c) throw new Error(`no cell ${cell} (of ${undoCells(d).length})`)
  return c.get('source')
}

// undoApplyOp performs one op; an agent's edit also marks the document dirty once, as ydoc does
// (outside the undo scope, but it keeps both worlds' clocks equal).
function undoApplyOp (d, kind, op, agent) {
  const cells = d.getArray('cells')
  let changed = true
  switch (op.t) {
    case 'ins':
      if (op.text === '') { changed = false; break }
      undoTextOf(d, kind, op.cell).insert(op.pos, op.text)
      break
    case 'del':
      if (op.len === 0) { changed = false; break }
      undoTextOf(d, kind, op.cell).delete(op.pos, op.len)
      break
    case 'setSource': {
      const t = undoTextOf(d, kind, op.cell)
      if (op.del > 0) t.delete(op.pos, op.del)
      if (op.ins !== '') t.insert(op.pos, op.ins)
      changed = op.del > 0 || op.ins !== ''
      break
    }
    case 'insCell': {
      // ydoc's InsertCells + fillCell: the empty map first, then its keys in createCell's order
      const m = new Y.Map()
      cells.insert(op.index, [m])
      m.set('source', new Y.Text(op.source))
      m.set('metadata', new Y.Map())
      m.set('cell_type', 'code')
      m.set('id', op.id)
      m.set('outputs', new Y.Array())
      m.set('execution_count', null)
      m.set('execution_state', 'idle')
      break
    }
    case 'delCell':
      if (op.count === 0) { changed = false; break }
      for (let k = op.count - 1; k >= 0; k--) cells.delete(op.index + k, 1)
      break
    default:
      throw new Error('unknown undo op ' + op.t)
  }
  if (agent && changed) {
    const state = d.getMap('state')
    if (state.get('dirty') !== true) state.set('dirty', true)
  }
}

// the human replicas of the Go-agent world, by key
const undoHumans = new Map()

function undoHumanStep (req) {
  const h = undoHumans.get(req.key)
  if (!h) throw new Error('no undo human ' + req.key)
  for (const u of req.updates ?? []) Y.applyUpdate(h.doc, Buffer.from(u, 'base64'), remote)
  h.out = []
  if (req.ops && req.ops.length > 0) {
    h.doc.transact(() => { for (const op of req.ops) undoApplyOp(h.doc, h.kind, op, false) })
  }
  const updates = h.out.map(u => Buffer.from(u).toString('base64'))
  h.out = []
  return { updates, content: undoContent(h.doc, h.kind) }
}

// undoWorld runs a whole scenario in yjs: the agent's Y.Doc with an UndoManager over the same
// scope (its edits tracked by origin, captureTimeout 0: one step per transaction) and the human's
// Y.Doc, exchanging updates after every step (a held human step reaches the agent only after the
// next agent step: concurrent edits). Returns both contents after every step.
function undoWorld (req) {
  const kind = req.kind
  const agent = new Y.Doc()
  agent.clientID = req.agentID
  const human = new Y.Doc()
  human.clientID = req.humanID
  const tracked = { origin: 'agent' }
  const plainOrigin = { origin: 'agent-plain' }
  const scope = kind === 'file' ? agent.getText('source') : agent.getArray('cells')
  const um = new Y.UndoManager(scope, { trackedOrigins: new Set([tracked]), captureTimeout: 0 })
  const toHuman = []
  const toAgent = []
  agent.on('update', (u, origin) => { if (origin !== remote) toHuman.push(u) })
  human.on('update', (u, origin) => { if (origin !== remote) toAgent.push(u) })
  const flush = (queue, d) => { while (queue.length) Y.applyUpdate(d, queue.shift(), remote) }
  const results = []
  for (const step of req.steps) {
    let performed = null
    if (step.side === 'human') {
      human.transact(() => { for (const op of step.ops ?? []) undoApplyOp(human, kind, op, false) })
      flush(toHuman, human)
      if (!step.hold) flush(toAgent, agent)
    } else {
      if (step.undo) performed = um.undo() !== null
      else if (step.redo) performed = um.redo() !== null
      else agent.transact(() => { for (const op of step.ops ?? []) undoApplyOp(agent, kind, op, true) }, step.undoable ? tracked : plainOrigin)
      flush(toHuman, human)
      flush(toAgent, agent)
    }
    results.push({ agent: undoContent(agent, kind), human: undoContent(human, kind), performed, undo: um.undoStack.length, redo: um.redoStack.length })
  }
  um.destroy()
  return { results }
}

const ops = {
  connect,
  reconnect,
  disconnect: () => { disconnect(); return {} },
  // a local document with no room, for transact/snapshot in differential tests
  connectScratch: (req) => {
    disconnect()
    kind = req.kind || 'notebook'
    doc = new Y.Doc()
    awareness = new awarenessProtocol.Awareness(doc)
    doc.on('update', () => { for (const w of watchers) w() })
    return { clientID: doc.clientID }
  },
  snapshot: () => ({ snapshot: snapshot() }),
  waitFor,
  watchText,
  transact,
  insertCell,
  encodeState: () => ({ update: Buffer.from(Y.encodeStateAsUpdate(doc)).toString('base64') }),
  stateVector: () => ({ sv: Buffer.from(Y.encodeStateVector(doc)).toString('base64') }),
  // decode an update produced elsewhere (base64) into a fresh doc and describe it: used by the
  // differential tests of ydoc's workarounds.
  decode: (req) => {
    const d = new Y.Doc()
    Y.applyUpdate(d, Buffer.from(req.update, 'base64'))
    const r = {}
    for (const name of req.maps ?? []) {
      const m = d.getMap(name)
      const entries = {}
      for (const [k, v] of m.entries()) entries[k] = { value: plain(v), type: typeName(v), isNull: v === null, isUndefined: v === undefined }
      r[name] = entries
    }
    for (const name of req.texts ?? []) r[name] = d.getText(name).toString()
    for (const name of req.arrays ?? []) r[name] = d.getArray(name).toJSON()
    return r
  },
  // produce an update with yjs for Go to apply (differential tests)
  build: (req) => {
    const d = new Y.Doc()
    d.clientID = req.clientID ?? d.clientID
    const fn = new Function('Y', 'doc', req.code)
    d.transact(() => fn(Y, d))
    return { update: Buffer.from(Y.encodeStateAsUpdate(d)).toString('base64') }
  },
  // apply updates (base64, in order) to a fresh doc, recording which cells yjs's own deep
  // observer reports as changed by the last one: the reference for ydoc's change tracking.
  observe: (req) => {
    const d = new Y.Doc()
    const updates = req.updates.map(u => Buffer.from(u, 'base64'))
    for (const u of updates.slice(0, -1)) Y.applyUpdate(d, u)
    const cells = d.getArray('cells')
    const changed = new Set()
    let structure = false
    cells.observeDeep(events => {
      for (const ev of events) {
        if (ev.target === cells) { structure = true; continue }
        let t = ev.target
        while (t && t._item && t._item.parent !== cells) t = t._item.parent
        if (t && t.get) changed.add(t.get('id'))
      }
    })
    Y.applyUpdate(d, updates[updates.length - 1])
    return { changed: [...changed].sort(), structure, ids: cells.toArray().map(c => c.get('id')) }
  },
  // relative positions as yjs makes and resolves them, in a document given as an update:
  // make [{cellId, index}] (cellId null: the text file's "source") and resolve [RelativePosition JSON]
  relpos: (req) => {
    const d = new Y.Doc()
    Y.applyUpdate(d, Buffer.from(req.update, 'base64'))
    const textOf = (cellId) => cellId == null ? d.getText('source') : d.getArray('cells').toArray().find(c => c.get('id') === cellId).get('source')
    const made = (req.make ?? []).map(m => Y.relativePositionToJSON(Y.createRelativePositionFromTypeIndex(textOf(m.cellId), m.index)))
    const cells = req.kind === 'file' ? [] : d.getArray('cells').toArray()
    const resolved = (req.resolve ?? []).map(j => {
      const abs = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(j), d)
      if (!abs) return null
      const cell = cells.find(c => c.get('source') === abs.type)
      return { cellId: cell ? cell.get('id') : null, index: abs.index }
    })
    return { made, resolved }
  },
  // encode an awareness state as y-protocols does, and decode one produced elsewhere
  awarenessEncode: (req) => {
    const d = new Y.Doc()
    d.clientID = req.clientID
    const a = new awarenessProtocol.Awareness(d)
    a.setLocalState(req.state)
    const u = awarenessProtocol.encodeAwarenessUpdate(a, [req.clientID])
    a.destroy()
    return { update: Buffer.from(u).toString('base64') }
  },
  awarenessDecode: (req) => {
    const a = new awarenessProtocol.Awareness(new Y.Doc())
    a.setLocalState(null)
    awarenessProtocol.applyAwarenessUpdate(a, Buffer.from(req.update, 'base64'), 'test')
    const states = {}
    for (const [id, st] of a.getStates()) states[id] = st
    const meta = {}
    for (const [id, m] of a.meta) meta[id] = m.clock
    a.destroy()
    return { states, clocks: meta }
  },
  awareness: () => {
    const states = {}
    for (const [id, st] of awareness.getStates()) states[id] = st
    return { states, clientID: doc.clientID, frames: awarenessFrames }
  },
  setAwareness: (req) => { awareness.setLocalState(req.state); return {} },
  // a cursor as JupyterLab's cursors.ts makes it: RelativePosition objects in "cursors"
  setCursor: (req) => {
    const cell = doc.getArray('cells').toArray().find(c => c.get('id') === req.cellId)
    const t = kind === 'file' ? doc.getText('source') : cell.get('source')
    const anchor = Y.createRelativePositionFromTypeIndex(t, req.anchor)
    const head = Y.createRelativePositionFromTypeIndex(t, req.head ?? req.anchor)
    awareness.setLocalStateField('cursors', [{ anchor, head, primary: true, empty: req.anchor === (req.head ?? req.anchor) }])
    return {}
  },
  // every awareness state's cursors, resolved with yjs: which cell, which index
  cursors: () => {
    const out = []
    const cells = doc.getArray('cells').toArray()
    for (const [id, st] of awareness.getStates()) {
      if (id === doc.clientID || !st || !st.cursors) continue
      for (const c of st.cursors) {
        const abs = Y.createAbsolutePositionFromRelativePosition(Y.createRelativePositionFromJSON(c.head), doc)
        if (!abs) { out.push({ clientID: id, username: st.user?.username, unresolved: true }); continue }
        const cell = cells.find(x => x.get('source') === abs.type)
        out.push({ clientID: id, username: st.user?.username, cellId: cell ? cell.get('id') : null, index: abs.index, empty: c.empty })
      }
    }
    return { cursors: out }
  },
  // a second connection to an awareness-only room (JupyterLab:globalAwareness), as a human
  connectGlobal: async (req) => {
    const gdoc = new Y.Doc()
    const gaw = new awarenessProtocol.Awareness(gdoc)
    gaw.setLocalState(req.state)
    const base = req.url.replace(/\/$/, '').replace(/^http/, 'ws')
    const gws = new WebSocket(`${base}/api/collaboration/room/JupyterLab:globalAwareness`, { headers: { Authorization: 'token ' + req.token } })
    gws.binaryType = 'arraybuffer'
    globals.push({ gdoc, gaw, gws })
    gaw.on('update', ({ added, updated, removed }, origin) => {
      if (origin !== 'local') return
      const e = encoding.createEncoder()
      encoding.writeVarUint(e, MSG_AWARENESS)
      encoding.writeVarUint8Array(e, awarenessProtocol.encodeAwarenessUpdate(gaw, added.concat(updated).concat(removed)))
      if (gws.readyState === WebSocket.OPEN) gws.send(encoding.toUint8Array(e))
    })
    await new Promise((resolve, reject) => {
      gws.on('open', () => {
        const e = encoding.createEncoder()
        encoding.writeVarUint(e, MSG_SYNC)
        syncProtocol.writeSyncStep1(e, gdoc)
        gws.send(encoding.toUint8Array(e))
        const a = encoding.createEncoder()
        encoding.writeVarUint(a, MSG_AWARENESS)
        encoding.writeVarUint8Array(a, awarenessProtocol.encodeAwarenessUpdate(gaw, [gdoc.clientID]))
        gws.send(encoding.toUint8Array(a))
        resolve()
      })
      gws.on('error', reject)
      gws.on('message', (data) => {
        const d = decoding.createDecoder(new Uint8Array(data))
        const t = decoding.readVarUint(d)
        if (t === MSG_SYNC) {
          const e = encoding.createEncoder()
          encoding.writeVarUint(e, MSG_SYNC)
          syncProtocol.readSyncMessage(d, e, gdoc, remote)
          if (encoding.length(e) > 1) gws.send(encoding.toUint8Array(e))
        } else if (t === MSG_AWARENESS) {
          awarenessProtocol.applyAwarenessUpdate(gaw, decoding.readVarUint8Array(d), remote)
        }
      })
    })
    return { clientID: gdoc.clientID }
  },
  // the state of every global awareness connection of this peer (null: the tab is gone)
  setGlobal: (req) => { for (const g of globals) g.gaw.setLocalState(req.state); return {} },
  globalStates: () => {
    const states = {}
    for (const g of globals) for (const [id, st] of g.gaw.getStates()) if (id !== g.gdoc.clientID) states[id] = st
    return { states }
  },
  // vanish: no null awareness state, the sockets just die with the process
  vanish: () => { setTimeout(() => process.kill(process.pid, 'SIGKILL'), 10); return {} },
  // agent-scoped undo differential tests (undoWorld, undoHuman*)
  undoWorld,
  undoHumanNew: (req) => {
    const d = new Y.Doc()
    d.clientID = req.clientID
    const h = { doc: d, kind: req.kind, out: [] }
    d.on('update', (u, origin) => { if (origin !== remote) h.out.push(u) })
    undoHumans.set(req.key, h)
    return {}
  },
  undoHumanStep,
  undoHumanClose: (req) => { const h = undoHumans.get(req.key); if (h) h.doc.destroy(); undoHumans.delete(req.key); return {} },
  exit: () => { disconnect(); setTimeout(() => process.exit(0), 10); return {} }
}

const rl = readline.createInterface({ input: process.stdin })
rl.on('line', async (line) => {
  let req
  try { req = JSON.parse(line) } catch (e) { out({ ok: false, error: 'bad json: ' + e.message }); return }
  try {
    const op = ops[req.op]
    if (!op) throw new Error('unknown op ' + req.op)
    const res = await op(req)
    out({ id: req.id, ok: true, ...res })
  } catch (e) {
    out({ id: req.id, ok: false, error: String(e && e.stack ? e.stack : e) })
  }
})
rl.on('close', () => { disconnect(); process.exit(0) })
