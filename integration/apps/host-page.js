// The test's chat host, in the page: each app in a sandboxed frame (scripts only, an opaque
// origin) under the restrictive default CSP of MCP Apps, talking to it through the SDK's host
// bridge (AppBridge). The bridge's MCP requests go to window.__mcp, which host.mjs answers with
// the official MCP client connected to the sidecar. Bundled by host.mjs with esbuild.

import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge'

// The CSP a host applies to an app that declares no domains (MCP Apps 2026-01-26, "Restrictive
// Default"), with frames, objects and base URIs shut too.
const CSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'"

window.__opened = []
window.__logs = []
window.__cspViolations = []
document.addEventListener('securitypolicyviolation', (e) => window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`))

// hostStyles are the host's CSS variables (MCP Apps' standard names) for a theme.
function hostStyles (theme) {
  return theme === 'dark'
    ? { '--color-background-primary': '#18181b', '--color-text-primary': '#fafafa', '--font-sans': 'DejaVu Sans, sans-serif' }
    : { '--color-background-primary': '#fdfcf7', '--color-text-primary': '#18181b', '--font-sans': 'DejaVu Sans, sans-serif' }
}

// hostTheme switches an app's host to another theme (ui/notifications/host-context-changed).
window.hostTheme = ({ id, theme }) => window.__bridges[id].sendHostContextChange({ theme, styles: { variables: hostStyles(theme) } })

// hostShow renders an app for one tool call: the frame, the bridge, then the call's input and
// result once the app has initialized. toolMeta is the tool's listing (for the visibility rule).
window.hostShow = async ({ id, html, args, result, theme, tools }) => {
  const frame = document.createElement('iframe')
  frame.name = id
  frame.title = id
  frame.setAttribute('sandbox', 'allow-scripts')
  frame.style.cssText = 'display:block;width:860px;height:200px;border:1px solid #d0d0d0;border-radius:8px;margin:8px;background:transparent'
  document.body.append(frame)
  frame.scrollIntoView() // the newest result in view, as a chat shows it
  const styles = hostStyles(theme)
  const bridge = new AppBridge(null, { name: 'jupyter-collab-mcp test host', version: '1' },
    { serverTools: {}, serverResources: {}, openLinks: {}, logging: {} },
    { hostContext: { theme, styles: { variables: styles }, displayMode: 'inline', availableDisplayModes: ['inline'], platform: 'web', containerDimensions: { width: 860, maxHeight: 4000 } } })
  // A host lets an app call the tools whose visibility includes "app" (the default), on the
  // app's own server.
  bridge.oncalltool = async (params) => {
    const tool = tools.find((t) => t.name === params.name)
    const vis = tool?._meta?.ui?.visibility ?? ['model', 'app']
    if (!tool || !vis.includes('app')) throw new Error(`tool ${params.name} is not for apps`)
    return window.__mcp('tools/call', params)
  }
  bridge.onreadresource = (params) => window.__mcp('resources/read', params)
  bridge.onopenlink = async ({ url }) => { window.__opened.push(url); return {} }
  bridge.onloggingmessage = (p) => window.__logs.push(p)
  bridge.onsizechange = ({ height }) => { if (height) frame.style.height = `${Math.ceil(height) + 2}px` }
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve })
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow))
  frame.srcdoc = html.replace('<head>', `<head><meta http-equiv="Content-Security-Policy" content="${CSP}">`)
  await initialized
  await bridge.sendToolInput({ arguments: args })
  await bridge.sendToolResult(result)
  window.__bridges = window.__bridges ?? {}
  window.__bridges[id] = bridge
}
