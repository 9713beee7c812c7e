// A real MCP client for the end-to-end tests: the official TypeScript SDK from npm, connecting to
// the sidecar binary over stdio or Streamable HTTP. Driven by the Go tests like peer.mjs: one JSON
// request per stdin line {"id", "op", ...}, one JSON reply per line.

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ResourceUpdatedNotificationSchema, ResourceListChangedNotificationSchema, CreateTaskResultSchema, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import readline from 'node:readline'

let client = null
let transport = null
const progress = []
const notes = [] // resources/updated and resources/list_changed, in arrival order
let noteWaiters = []

function note (n) {
  notes.push({ method: n.method, uri: n.params?.uri, tools: n.tools, at: Date.now() })
  const waiting = noteWaiters
  noteWaiters = []
  for (const w of waiting) w()
}

// waitNotification resolves when a notification for uri (any, when empty) arrives at index >= after.
function waitNotification (req) {
  const match = () => notes.findIndex((n, i) => i >= (req.after ?? 0) && n.method === (req.method ?? 'notifications/resources/updated') && (!req.uri || n.uri === req.uri))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${req.method ?? 'resources/updated'} ${req.uri ?? ''} within ${req.timeoutMs} ms; got ${JSON.stringify(notes.slice(req.after ?? 0))}`)), req.timeoutMs ?? 10000)
    const check = () => {
      const i = match()
      if (i >= 0) { clearTimeout(timer); resolve({ index: i, notification: notes[i] }) } else noteWaiters.push(check)
    }
    check()
  })
}

function out (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

async function connect (req) {
  // listChanged: the SDK lists the tools again when the server says they changed (toolsets turned
  // on inside the session); the new list is recorded as a notification with the tools' names.
  client = new Client({ name: 'jupyter-collab-mcp-e2e', version: '1.0.0' }, {
    listChanged: {
      tools: {
        debounceMs: 0,
        onChanged: (err, tools) => note({ method: 'notifications/tools/list_changed', tools: err ? undefined : (tools ?? []).map(t => t.name) })
      }
    }
  })
  if (req.transport === 'stdio') {
    transport = new StdioClientTransport({ command: req.command, args: req.args ?? [], env: req.env, stderr: 'pipe' })
    const stderr = transport.stderr
    if (stderr) stderr.on('data', () => {}) // keep the pipe drained; the Go side has the logs
  } else {
    transport = new StreamableHTTPClientTransport(new URL(req.url), { requestInit: { headers: req.headers ?? {} } })
  }
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, note)
  client.setNotificationHandler(ResourceListChangedNotificationSchema, note)
  await client.connect(transport)
  return { server: client.getServerVersion(), capabilities: client.getServerCapabilities(), instructions: client.getInstructions() }
}

const ops = {
  connect,
  listTools: async () => ({ tools: (await client.listTools()).tools }),
  call: async (req) => {
    const opts = req.timeoutMs ? { timeout: req.timeoutMs } : undefined
    const onprogress = req.progress ? (p) => progress.push(p) : undefined
    // tookMs: the call as the client library sees it, timed in this process (what an agent host
    // that calls the SDK in its own process waits; the driver's pipe to us is not in it)
    const start = performance.now()
    const res = await client.callTool({ name: req.name, arguments: req.arguments ?? {} }, undefined, { ...opts, onprogress })
    return { result: res, tookMs: performance.now() - start }
  },
  listResources: async () => ({ resources: (await client.listResources()).resources }),
  listTemplates: async () => ({ templates: (await client.listResourceTemplates()).resourceTemplates }),
  readResource: async (req) => {
    try {
      return { contents: (await client.readResource({ uri: req.uri })).contents }
    } catch (e) {
      return { rpcError: { code: e.code, message: e.message } }
    }
  },
  progress: () => ({ progress }),
  subscribe: async (req) => { await client.subscribeResource({ uri: req.uri }); return {} },
  unsubscribe: async (req) => { await client.unsubscribeResource({ uri: req.uri }); return {} },
  notifications: () => ({ notifications: notes }),
  waitNotification,
  listPrompts: async () => ({ prompts: (await client.listPrompts()).prompts }),
  getPrompt: async (req) => {
    try {
      return { prompt: await client.getPrompt({ name: req.name, arguments: req.arguments ?? {} }) }
    } catch (e) {
      return { rpcError: { code: e.code, message: e.message } }
    }
  },
  // MCP tasks (the SDK's experimental task support): start a tool call as a task, follow it
  callTask: async (req) => {
    const res = await client.request({ method: 'tools/call', params: { name: req.name, arguments: req.arguments ?? {} } }, CreateTaskResultSchema, { task: { ttl: req.ttl ?? 60000 } })
    return { task: res.task }
  },
  getTask: async (req) => ({ task: await client.experimental.tasks.getTask(req.taskId) }),
  taskResult: async (req) => ({ result: await client.experimental.tasks.getTaskResult(req.taskId, CallToolResultSchema) }),
  cancelTask: async (req) => ({ task: await client.experimental.tasks.cancelTask(req.taskId) }),
  close: async () => { await client.close(); return {} }
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
    out({ id: req.id, ok: false, error: String(e && e.message ? e.message : e), code: e && e.code })
  }
})
rl.on('close', async () => { try { if (client) await client.close() } catch (e) {} process.exit(0) })
