// A real MCP client for the end-to-end tests: the official TypeScript SDK from npm, connecting to
// the sidecar binary over stdio or Streamable HTTP. Driven by the Go tests like peer.mjs: one JSON
// request per stdin line {"id", "op", ...}, one JSON reply per line.

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import readline from 'node:readline'

let client = null
let transport = null
const progress = []

function out (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

async function connect (req) {
  client = new Client({ name: 'jupyter-collab-mcp-e2e', version: '1.0.0' })
  if (req.transport === 'stdio') {
    transport = new StdioClientTransport({ command: req.command, args: req.args ?? [], env: req.env, stderr: 'pipe' })
    const stderr = transport.stderr
    if (stderr) stderr.on('data', () => {}) // keep the pipe drained; the Go side has the logs
  } else {
    transport = new StreamableHTTPClientTransport(new URL(req.url), { requestInit: { headers: req.headers ?? {} } })
  }
  await client.connect(transport)
  return { server: client.getServerVersion(), capabilities: client.getServerCapabilities(), instructions: client.getInstructions() }
}

const ops = {
  connect,
  listTools: async () => ({ tools: (await client.listTools()).tools }),
  call: async (req) => {
    const opts = req.timeoutMs ? { timeout: req.timeoutMs } : undefined
    const onprogress = req.progress ? (p) => progress.push(p) : undefined
    const res = await client.callTool({ name: req.name, arguments: req.arguments ?? {} }, undefined, { ...opts, onprogress })
    return { result: res }
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
