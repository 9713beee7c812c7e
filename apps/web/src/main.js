// The MCP Apps of jupyter-collab-mcp, one bundle for the three views: the sidecar serves it in
// three documents (ui://jupyter/outputs, ui://jupyter/notebook, ui://jupyter/suggestion) whose
// root element names the view (data-app).

import './style.css'
import { connect, showError } from './host.js'
import { outputsView } from './outputs.js'
import { notebookView } from './notebook.js'
import { suggestionView } from './suggestion.js'

const views = { outputs: outputsView, notebook: notebookView, suggestion: suggestionView }
const name = document.documentElement.dataset.app
const root = document.getElementById('app')
if (views[name]) connect(name, root, views[name]).catch((e) => showError(root, e))
else showError(root, new Error(`unknown view ${name}`))
