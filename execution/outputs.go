package execution

import (
	"encoding/json"
	"strings"
)

// outputModel turns a request's kernel messages into nbformat outputs the way JupyterLab's
// output area does: consecutive stream outputs of the same name merge, \r and \b rewrite the
// current line, clear_output(wait) clears at the next output, update_display_data replaces the
// outputs carrying the same display id. Each message yields room operations that reproduce it.
type outputModel struct {
	outputs      []map[string]any
	streams      map[int]*termText // stream output index → its text as a terminal shows it
	displays     map[string][]int  // display id → output indices
	pendingClear bool
}

type opKind int

const (
	opClear  opKind = iota + 1 // remove every output
	opInsert                   // append out
	opText                     // set the text of stream output index to text
	opSwap                     // replace output index with out
)

type outputOp struct {
	kind  opKind
	index int
	out   map[string]any
	text  string
}

// resize is how many outputs a cell holding n holds after the operation.
func (op outputOp) resize(n int) int {
	switch op.kind {
	case opClear:
		return 0
	case opInsert:
		return n + 1
	}
	return n
}

// KernelMsg is one kernel message for an execution (iopub or shell).
type KernelMsg struct {
	Channel string
	Type    string
	Content json.RawMessage
}

// hasError reports whether an error output is among the outputs.
func (m *outputModel) hasError() bool {
	for _, o := range m.outputs {
		if o["output_type"] == "error" {
			return true
		}
	}
	return false
}

// errorFromReply adds the error a failed execute_reply describes when iopub never delivered it
// (right after a kernel restart the server's iopub link may not be up yet), so the cell shows
// why it failed instead of nothing.
func (m *outputModel) errorFromReply(reply map[string]any) []outputOp {
	if reply["status"] != "error" || m.hasError() {
		return nil
	}
	content, err := json.Marshal(map[string]any{"ename": reply["ename"], "evalue": reply["evalue"], "traceback": reply["traceback"]})
	if err != nil {
		return nil
	}
	return m.apply(KernelMsg{Channel: "iopub", Type: "error", Content: content})
}

// apply folds one iopub message into the model and returns the room operations.
func (m *outputModel) apply(msg KernelMsg) []outputOp {
	var content map[string]any
	if err := json.Unmarshal(msg.Content, &content); err != nil {
		return nil
	}
	var ops []outputOp
	clearIfPending := func() {
		if m.pendingClear {
			m.pendingClear = false
			m.outputs, m.displays, m.streams = nil, nil, nil
			ops = append(ops, outputOp{kind: opClear})
		}
	}
	switch msg.Type {
	case "stream":
		clearIfPending()
		name, _ := content["name"].(string)
		text, _ := content["text"].(string)
		if m.streams == nil {
			m.streams = map[int]*termText{}
		}
		if n := len(m.outputs); n > 0 && m.outputs[n-1]["output_type"] == "stream" && m.outputs[n-1]["name"] == name {
			t := m.streams[n-1]
			t.write(text)
			merged := t.String()
			m.outputs[n-1]["text"] = merged
			ops = append(ops, outputOp{kind: opText, index: n - 1, text: merged})
			break
		}
		t := &termText{}
		t.write(text)
		out := map[string]any{"output_type": "stream", "name": name, "text": t.String()}
		m.outputs = append(m.outputs, out)
		m.streams[len(m.outputs)-1] = t
		ops = append(ops, outputOp{kind: opInsert, out: cloneOutput(out)})
	case "execute_result", "display_data", "error":
		clearIfPending()
		out := nbOutput(msg.Type, content)
		m.outputs = append(m.outputs, out)
		if id := displayID(content); id != "" {
			if m.displays == nil {
				m.displays = map[string][]int{}
			}
			m.displays[id] = append(m.displays[id], len(m.outputs)-1)
		}
		ops = append(ops, outputOp{kind: opInsert, out: cloneOutput(out)})
	case "update_display_data":
		id := displayID(content)
		for _, i := range m.displays[id] {
			old := m.outputs[i]
			out := map[string]any{"output_type": old["output_type"], "data": orMap(content["data"]), "metadata": orMap(content["metadata"])}
			if c, ok := old["execution_count"]; ok {
				out["execution_count"] = c
			}
			m.outputs[i] = out
			ops = append(ops, outputOp{kind: opSwap, index: i, out: cloneOutput(out)})
		}
	case "clear_output":
		if wait, _ := content["wait"].(bool); wait {
			m.pendingClear = true
			break
		}
		m.pendingClear = false
		if len(m.outputs) > 0 {
			m.outputs, m.displays, m.streams = nil, nil, nil
			ops = append(ops, outputOp{kind: opClear})
		}
	}
	return ops
}

// nbOutput builds the nbformat output of an iopub message (transient data dropped, as
// JupyterLab's toJSON does).
func nbOutput(typ string, c map[string]any) map[string]any {
	switch typ {
	case "error":
		tb, _ := c["traceback"].([]any)
		if tb == nil {
			tb = []any{}
		}
		return map[string]any{"output_type": "error", "ename": c["ename"], "evalue": c["evalue"], "traceback": tb}
	case "execute_result":
		return map[string]any{"output_type": "execute_result", "execution_count": c["execution_count"], "data": orMap(c["data"]), "metadata": orMap(c["metadata"])}
	}
	return map[string]any{"output_type": "display_data", "data": orMap(c["data"]), "metadata": orMap(c["metadata"])}
}

func displayID(c map[string]any) string {
	t, _ := c["transient"].(map[string]any)
	id, _ := t["display_id"].(string)
	return id
}

func orMap(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func cloneOutput(o map[string]any) map[string]any {
	b, _ := json.Marshal(o)
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	return c
}

// processText applies terminal control characters as a terminal (and JupyterLab's output area)
// does: \r\n is a newline; a lone \r returns to the start of the line, so what follows
// overwrites it character by character; \b deletes the character before the cursor.
func processText(s string) string {
	if !strings.ContainsAny(s, "\r\b") {
		return s
	}
	var t termText
	t.write(s)
	return t.String()
}

// termText is a stream's text as a terminal shows it, kept incrementally: the lines a newline
// ended (fixed for good) and the current line with its cursor. A progress bar rewriting one
// line ten thousand times costs the line, not everything it ever printed.
type termText struct {
	done   strings.Builder
	line   []rune
	cursor int
}

func (t *termText) write(s string) {
	for _, r := range s {
		switch r {
		case '\n': // "\r\n" needs no special case: \r only moves the cursor
			t.done.WriteString(string(t.line))
			t.done.WriteByte('\n')
			t.line, t.cursor = t.line[:0], 0
		case '\r':
			t.cursor = 0
		case '\b':
			if t.cursor > 0 {
				t.line = append(t.line[:t.cursor-1], t.line[t.cursor:]...)
				t.cursor--
			}
		default:
			if t.cursor < len(t.line) {
				t.line[t.cursor] = r
			} else {
				t.line = append(t.line, r)
			}
			t.cursor++
		}
	}
}

func (t *termText) String() string { return t.done.String() + string(t.line) }
