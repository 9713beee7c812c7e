package tools

import (
	"fmt"
	"strings"
)

// The server instructions: sent once, at initialize. Clients that defer tool schemas (Claude
// Code lists only tool names until the model searches) read them to know what the server is for
// and which tools exist; every client gets here, once, the option groups that tools/list names
// without describing (schema.go's Listing).

func (s *Server) instructions() string {
	var b strings.Builder
	b.WriteString("jupyter-collab-mcp: live Jupyter notebooks and text files, shared with the people editing them in " +
		"JupyterLab. You read a document as it is now; your edits appear in their browsers, and return once " +
		"jupyter-server has confirmed them. Paths are relative to the Jupyter root.\n\n")
	b.WriteString("Cells: name them by the handle a read shows (a short prefix of the cell id, after @index; alone on its line in a read without outputs) or by " +
		"the full id; indexes shift when others edit. Pass the version of your last read or edit as expected_version and an edit " +
		"changes nothing if someone changed those cells since.\n\n")
	b.WriteString("Toolsets. The default offers the loop of work in a notebook: read, search, edit, run, see who is " +
		"there. Turn more on with enable_toolset, or configure them (--toolsets, MCP_TOOLSETS, or the " + ToolsetHeader +
		" header over HTTP):\n")
	for _, t := range toolsets {
		var names []string
		for _, op := range s.ops {
			if op.Category == t.Name {
				n := op.Name
				if op.Default {
					n += "*"
				}
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			fmt.Fprintf(&b, "- %s (%s): %s\n", t.Name, t.About, strings.Join(names, ", "))
		}
	}
	b.WriteString("(* on by default)\n\n")
	fmt.Fprintf(&b, "Options several tools share (named, not described, in their schemas):\n"+
		"- Runs: edits run the code cells they insert or change unless exec is false. timeout (seconds, default %d) "+
		"bounds the wait, not the run: a longer run goes on and returns a job_id for get_execution; wait: false "+
		"returns it at once; stop_on_error (default true); kernel_name.\n"+
		"- Outputs: max_output_chars per output (default %d); images come as image content unless "+
		"include_images is false, downscaled to max_image_pixels.\n"+
		"- Guards: expected_version; expected_source_hashes (cell → source hash, from get_notebook with hashes: true); "+
		"avoid_busy_cells: true refuses, instead of warning, when someone's cursor is in a cell the edit touches.\n"+
		"- Content tools take max_tokens (default %d; a cut result says how to read on); the notebook, text and "+
		"history tools take fork_id (the forks toolset); every tool takes includeSchema. A failed call carries "+
		"the tool's full schema.\n\n", defaultRunWait, defaultOutputChars, s.opts.MaxResponseTokens)
	b.WriteString("Scripts: run_script runs a Starlark script (Python without imports, try, while, f-strings) that " +
		"calls notebooks(prefix), cells(path) (dicts: index, handle, type, source, execution_count, outputs: type, " +
		"text, traceback lines) and search(pattern, prefix, path, regex); its last expression is the result. One " +
		"call for chores that take many reads.\n\n")
	b.WriteString("Full schemas and examples: jupyter://operations/{tool}. How to work in a shared notebook: " +
		"jupyter://guides/{research|analysis|development}.")
	return b.String()
}
