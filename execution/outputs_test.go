package execution

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// referenceProcessText is the whole-text terminal model (what the incremental one must match).
func referenceProcessText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var done strings.Builder
	var line []rune
	cursor := 0
	for _, r := range s {
		switch r {
		case '\n':
			done.WriteString(string(line))
			done.WriteRune('\n')
			line, cursor = line[:0], 0
		case '\r':
			cursor = 0
		case '\b':
			if cursor > 0 {
				line = append(line[:cursor-1], line[cursor:]...)
				cursor--
			}
		default:
			if cursor < len(line) {
				line[cursor] = r
			} else {
				line = append(line, r)
			}
			cursor++
		}
	}
	done.WriteString(string(line))
	return done.String()
}

// Streams arrive in arbitrary chunks ("\r" and "\n" of one "\r\n" in different messages): the
// incremental text equals the whole text processed at once.
func TestStreamChunksEqualWholeText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "é", "😀", "\r", "\n", "\b", "\r\n", "xyz"}
	for n := 0; n < 500; n++ {
		m := &outputModel{}
		var whole strings.Builder
		for c := rng.IntN(12); c >= 0; c-- {
			var chunk strings.Builder
			for k := rng.IntN(6); k >= 0; k-- {
				chunk.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			whole.WriteString(chunk.String())
			m.apply(msg("stream", map[string]any{"name": "stdout", "text": chunk.String()}))
		}
		if got, want := m.outputs[0]["text"], referenceProcessText(whole.String()); got != want {
			t.Fatalf("chunks of %q give %q, want %q", whole.String(), got, want)
		}
	}
}

// A progress bar rewriting one line many times costs the line each time, not all it printed:
// 20,000 updates must take well under a second (quadratic processing took minutes).
func TestStreamProgressBarIsLinear(t *testing.T) {
	m := &outputModel{}
	start := time.Now()
	for i := 0; i < 20000; i++ {
		m.apply(msg("stream", map[string]any{"name": "stderr", "text": "\r" + strings.Repeat("█", i%100) + " progress"}))
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("20,000 progress updates took %v", el)
	}
	if got := m.outputs[0]["text"].(string); !strings.HasSuffix(got, " progress") || len([]rune(got)) > 120 {
		t.Errorf("final text %q", got)
	}
}

func TestProcessText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\ntext\n", "plain\ntext\n"},
		{"10%\r20%\r30%", "30%"},
		{"progress 10%\rdone\n", "doneress 10%\n"}, // a terminal overwrites, it does not clear
		{"abc\rX\n", "Xbc\n"},
		{"ab\bc", "ac"},
		{"a\r\nb", "a\nb"},
		{"line1\nxx\ryy\n", "line1\nyy\n"},
		{"trailing\r", "trailing"},
		{"\b\bx", "x"},
		{"é😀\b!", "é!"},
	} {
		if got := processText(tc.in); got != tc.want {
			t.Errorf("processText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func msg(typ string, content map[string]any) KernelMsg {
	b, _ := json.Marshal(content)
	return KernelMsg{Channel: "iopub", Type: typ, Content: b}
}

func TestOutputModel(t *testing.T) {
	m := &outputModel{}
	var ops []outputOp
	apply := func(typ string, c map[string]any) { ops = append(ops, m.apply(msg(typ, c))...) }
	apply("stream", map[string]any{"name": "stdout", "text": "a\n"})
	apply("stream", map[string]any{"name": "stdout", "text": "b\n"})    // merged
	apply("stream", map[string]any{"name": "stderr", "text": "warn\n"}) // new output
	apply("stream", map[string]any{"name": "stdout", "text": "c\n"})    // new: not the last output
	apply("stream", map[string]any{"name": "stdout", "text": "\rC\n"})  // merged, \r rewrites a line start
	apply("display_data", map[string]any{"data": map[string]any{"text/plain": "v1"}, "metadata": map[string]any{}, "transient": map[string]any{"display_id": "d"}})
	apply("update_display_data", map[string]any{"data": map[string]any{"text/plain": "v2"}, "metadata": map[string]any{}, "transient": map[string]any{"display_id": "d"}})
	apply("execute_result", map[string]any{"execution_count": 3, "data": map[string]any{"text/plain": "42"}, "metadata": map[string]any{}})
	apply("error", map[string]any{"ename": "E", "evalue": "v", "traceback": []any{"t"}})
	apply("execute_input", map[string]any{"code": "x"}) // ignored
	want := []string{"stream:a\nb\n", "stream:warn\n", "stream:c\nC\n", "display_data:v2", "execute_result:42", "error:"}
	if len(m.outputs) != len(want) {
		t.Fatalf("%d outputs: %v", len(m.outputs), m.outputs)
	}
	for i, o := range m.outputs {
		got := o["output_type"].(string) + ":"
		if o["output_type"] == "stream" {
			got += o["text"].(string)
		} else if d, ok := o["data"].(map[string]any); ok {
			got += d["text/plain"].(string)
		}
		if got != want[i] {
			t.Errorf("output %d = %q, want %q", i, got, want[i])
		}
		if _, leaked := o["transient"]; leaked {
			t.Errorf("output %d keeps transient data", i)
		}
	}
	kinds := map[opKind]int{}
	for _, op := range ops {
		kinds[op.kind]++
	}
	if kinds[opInsert] != 6 || kinds[opText] != 2 || kinds[opSwap] != 1 || kinds[opClear] != 0 {
		t.Errorf("operations %v", kinds)
	}

	// clear_output(wait) clears at the next output only.
	m = &outputModel{}
	m.apply(msg("stream", map[string]any{"name": "stdout", "text": "old"}))
	if ops := m.apply(msg("clear_output", map[string]any{"wait": true})); len(ops) != 0 {
		t.Errorf("clear_output(wait) acted at once: %v", ops)
	}
	ops = m.apply(msg("stream", map[string]any{"name": "stdout", "text": "new"}))
	if len(ops) != 2 || ops[0].kind != opClear || ops[1].kind != opInsert || len(m.outputs) != 1 || m.outputs[0]["text"] != "new" {
		t.Errorf("after a waiting clear: ops %v outputs %v", ops, m.outputs)
	}
	ops = m.apply(msg("clear_output", map[string]any{"wait": false}))
	if len(ops) != 1 || ops[0].kind != opClear || len(m.outputs) != 0 {
		t.Errorf("clear_output: ops %v outputs %v", ops, m.outputs)
	}
	if ops := m.apply(KernelMsg{Channel: "iopub", Type: "stream", Content: []byte("not json")}); ops != nil {
		t.Errorf("a malformed message produced %v", ops)
	}
}

// A failed reply whose iopub error never came (iopub not up after a restart) still shows the
// error; one that iopub delivered is not added twice; a successful reply adds nothing.
func TestErrorFromReply(t *testing.T) {
	failed := map[string]any{"status": "error", "ename": "NameError", "evalue": "name 'x' is not defined", "traceback": []any{"tb"}}
	m := &outputModel{}
	if ops := m.errorFromReply(failed); len(ops) == 0 || len(m.outputs) != 1 || m.outputs[0]["ename"] != "NameError" {
		t.Fatalf("error not taken from the reply: ops %v, outputs %v", ops, m.outputs)
	}
	if ops := m.errorFromReply(failed); len(ops) != 0 || len(m.outputs) != 1 {
		t.Errorf("the error was added twice: %v", m.outputs)
	}
	ok := &outputModel{}
	if ops := ok.errorFromReply(map[string]any{"status": "ok"}); len(ops) != 0 || len(ok.outputs) != 0 {
		t.Errorf("a successful reply added outputs: %v", ok.outputs)
	}
}
