package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// Prompts: ready-made requests that embed fresh content (a guide, an outline, the notebook, what
// changed) so a client's user can start a piece of work with one selection. Prompt arguments and
// resource template variables complete (file ids, cell ids, job ids, modes, template names, paths).

// extractTypes are extract_essentials' kinds.
var extractTypes = []string{"facts", "code", "decisions", "questions", "all"}

var extractAsk = map[string]string{
	"facts":     "the facts the notebook establishes (numbers, results, observations), each with the cell id that shows it",
	"code":      "the code someone needs to reproduce the results: the essential cells, cleaned of exploration dead ends, in running order, with the cell ids they come from",
	"decisions": "the decisions taken (choices of data, methods, parameters, thresholds) and the reasons given for them, with cell ids",
	"questions": "the open questions: what is unresolved, contradictory, untested or marked TODO, with cell ids",
	"all":       "facts (with cell ids), essential code, decisions with their reasons, and open questions, as four sections",
}

func (s *Server) registerPrompts() {
	s.mcp.AddPrompt(mcp.NewPrompt("interleaved-thinking",
		mcp.WithPromptDescription("Work on a task in a live shared notebook in the reason–act–observe style: the guide for the mode, and a fresh outline of the notebook when a path is given."),
		mcp.WithArgument("task", mcp.RequiredArgument(), mcp.ArgumentDescription("What to do.")),
		mcp.WithArgument("mode", mcp.RequiredArgument(), mcp.ArgumentDescription("research, analysis or development.")),
		mcp.WithArgument("path", mcp.ArgumentDescription("The notebook (or text file) to work in, relative to the Jupyter root.")),
	), s.promptInterleaved)
	s.mcp.AddPrompt(mcp.NewPrompt("summarize_notebook",
		mcp.WithPromptDescription("Summarise a live notebook (its current content is embedded), optionally with a focus and a length limit."),
		mcp.WithArgument("path", mcp.RequiredArgument(), mcp.ArgumentDescription("The notebook, relative to the Jupyter root.")),
		mcp.WithArgument("focus", mcp.ArgumentDescription("What the summary should concentrate on (e.g. results, methods, problems).")),
		mcp.WithArgument("max_summary_tokens", mcp.ArgumentDescription("Length limit of the summary in tokens (default 500).")),
	), s.promptSummarize)
	s.mcp.AddPrompt(mcp.NewPrompt("extract_essentials",
		mcp.WithPromptDescription("Extract facts, essential code, decisions or open questions from a live notebook (its current content is embedded)."),
		mcp.WithArgument("path", mcp.RequiredArgument(), mcp.ArgumentDescription("The notebook, relative to the Jupyter root.")),
		mcp.WithArgument("extract_type", mcp.RequiredArgument(), mcp.ArgumentDescription("facts, code, decisions, questions or all.")),
	), s.promptExtract)
	s.mcp.AddPrompt(mcp.NewPrompt("review_changes",
		mcp.WithPromptDescription("Review what changed in a live notebook or text file since a version (from get_notebook, get_document or get_document_history): only the changes are embedded."),
		mcp.WithArgument("path", mcp.RequiredArgument(), mcp.ArgumentDescription("The notebook or text file, relative to the Jupyter root.")),
		mcp.WithArgument("since_version", mcp.RequiredArgument(), mcp.ArgumentDescription("The version to review from.")),
	), s.promptReview)
}

// promptArg returns a prompt argument, or a clear error when a required one is missing.
func promptArg(req mcp.GetPromptRequest, name string, required bool) (string, error) {
	v := strings.TrimSpace(req.Params.Arguments[name])
	if v == "" && required {
		return "", fmt.Errorf("prompt %s: argument %q is required", req.Params.Name, name)
	}
	return v, nil
}

func userText(text string) mcp.PromptMessage {
	return mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text))
}

func userResource(uri, mime, text string) mcp.PromptMessage {
	return mcp.NewPromptMessage(mcp.RoleUser, mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: uri, MIMEType: mime, Text: text}))
}

// notebookURI is a notebook's resource URI (its path when the id is not known).
func (s *Server) docURI(ctx context.Context, p string, kind ydoc.Kind) string {
	prefix := uriNotebooks
	if kind == ydoc.KindText {
		prefix = uriDocuments
	}
	if id, err := s.fileID(ctx, p, kind); err == nil {
		return prefix + "/" + id
	}
	return prefix
}

func (s *Server) promptInterleaved(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	task, err := promptArg(req, "task", true)
	if err != nil {
		return nil, err
	}
	mode, err := promptArg(req, "mode", true)
	if err != nil {
		return nil, err
	}
	guide, err := guideText(mode)
	if err != nil {
		return nil, fmt.Errorf("prompt interleaved-thinking: %w", err)
	}
	p, _ := promptArg(req, "path", false)
	msgs := []mcp.PromptMessage{
		userResource("jupyter://guides/"+mode, "text/markdown", guide),
	}
	intro := fmt.Sprintf("Task (%s mode): %s\n\nWork as the guide above describes: first take stock of the tools this session offers and check they suffice for the task (say plainly what is missing), then plan with checkpoints, then loop read → edit or run → observe → decide, re-reading what collaborators changed. Never claim a capability you lack. Leave the document clean for the humans.", mode, task)
	if p != "" {
		if extOf(p) == "ipynb" {
			a := s.notebookReadDefaults()
			a.Format, a.IncludeCollab = "outline", false
			res, err := s.promptNotebook(ctx, p, a, 4000)
			if err != nil {
				return nil, fmt.Errorf("prompt interleaved-thinking: outline of %s: %w", p, promptErr(err))
			}
			msgs = append(msgs, userResource(s.docURI(ctx, p, ydoc.KindNotebook)+"/cells", "text/markdown", "Outline of "+p+" (fresh):\n\n"+res.Text))
			intro += fmt.Sprintf("\n\nThe notebook is %s; its outline (index, type, handle, first line, outputs) is above. Read cells with get_notebook before editing them; a handle names a cell wherever a cell id is asked for.", p)
		} else {
			r, err := s.readText(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("prompt interleaved-thinking: %s: %w", p, promptErr(err))
			}
			head, _ := s.capTokens(r.text, 3000)
			msgs = append(msgs, userResource(s.docURI(ctx, p, ydoc.KindText), r.mime, head))
			intro += fmt.Sprintf("\n\nThe document is %s; its beginning is above. Read it with get_document before editing.", p)
		}
	}
	msgs = append(msgs, userText(intro))
	return mcp.NewGetPromptResult("Interleaved reason–act–observe work, "+mode+" mode", msgs), nil
}

// promptNotebook reads a notebook for a prompt, as get_notebook does, through the door.
func (s *Server) promptNotebook(ctx context.Context, p string, a getNotebookArgs, budget int) (result, error) {
	room, err := s.openDoc(ctx, p, ydoc.KindNotebook, "")
	if err != nil {
		return result{}, openError("path", err)
	}
	return s.readNotebook(ctx, room, a, budget)
}

// promptErr unwraps a tool error's message.
func promptErr(err error) error {
	if te, ok := err.(*toolError); ok {
		return fmt.Errorf("%s", te.Message)
	}
	return err
}

// notebookForPrompt is the notebook as markdown within a token budget (cut at a cell boundary,
// saying so), and its version.
func (s *Server) notebookForPrompt(ctx context.Context, name, p string, budget int) (string, string, error) {
	if p == "" {
		return "", "", fmt.Errorf("prompt %s: argument \"path\" is required", name)
	}
	a := s.notebookReadDefaults()
	a.Format, a.IncludeCollab, a.MaxOutputChars = "markdown", false, 1000
	res, err := s.promptNotebook(ctx, p, a, budget)
	if err != nil {
		return "", "", fmt.Errorf("prompt %s: %s: %w", name, p, promptErr(err))
	}
	data, _ := res.Data.(map[string]any)
	v, _ := data["version"].(bridge.Version)
	return res.Text, string(v), nil
}

func (s *Server) promptSummarize(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p, err := promptArg(req, "path", true)
	if err != nil {
		return nil, err
	}
	focus, _ := promptArg(req, "focus", false)
	limit := 500
	if v, _ := promptArg(req, "max_summary_tokens", false); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 20 || n > 20000 {
			return nil, fmt.Errorf("prompt summarize_notebook: max_summary_tokens must be a whole number from 20 to 20000 (got %q)", v)
		}
		limit = n
	}
	text, version, err := s.notebookForPrompt(ctx, "summarize_notebook", p, s.opts.MaxResponseTokens)
	if err != nil {
		return nil, err
	}
	ask := fmt.Sprintf("Summarise the notebook %s above (version %s) in at most %d tokens: its purpose, what it does, its results and its state (cells not run, errors).", p, version, limit)
	if focus != "" {
		ask += " Focus on: " + focus + "."
	}
	ask += " Refer to cells by id when you point at evidence. If the content above says it was truncated, say what you could not see."
	return mcp.NewGetPromptResult("Summary of "+p, []mcp.PromptMessage{
		userResource(s.docURI(ctx, p, ydoc.KindNotebook), "text/markdown", text),
		userText(ask),
	}), nil
}

func (s *Server) promptExtract(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p, err := promptArg(req, "path", true)
	if err != nil {
		return nil, err
	}
	kind, err := promptArg(req, "extract_type", true)
	if err != nil {
		return nil, err
	}
	ask, ok := extractAsk[kind]
	if !ok {
		return nil, fmt.Errorf("prompt extract_essentials: extract_type %q is not one of %s", kind, strings.Join(extractTypes, ", "))
	}
	text, version, err := s.notebookForPrompt(ctx, "extract_essentials", p, s.opts.MaxResponseTokens)
	if err != nil {
		return nil, err
	}
	return mcp.NewGetPromptResult("Essentials of "+p+": "+kind, []mcp.PromptMessage{
		userResource(s.docURI(ctx, p, ydoc.KindNotebook), "text/markdown", text),
		userText(fmt.Sprintf("From the notebook %s above (version %s), extract %s. Only what the notebook supports; say \"none\" for an empty section rather than inventing.", p, version, ask)),
	}), nil
}

func (s *Server) promptReview(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p, err := promptArg(req, "path", true)
	if err != nil {
		return nil, err
	}
	since, err := promptArg(req, "since_version", true)
	if err != nil {
		return nil, err
	}
	ask := fmt.Sprintf("Review the changes to %s since version %s shown above: what changed and why it matters, mistakes or risks (broken code, results that no longer match the text, outputs now stale), and what should be done next. Refer to cells by id.", p, since)
	if extOf(p) == "ipynb" {
		a := s.notebookReadDefaults()
		a.Format, a.IncludeCollab, a.MaxOutputChars, a.SinceVersion = "markdown", false, 1000, since
		res, err := s.promptNotebook(ctx, p, a, s.opts.MaxResponseTokens)
		if err != nil {
			return nil, fmt.Errorf("prompt review_changes: %s: %w", p, promptErr(err))
		}
		text := res.Text
		if data, ok := res.Data.(map[string]any); ok {
			if removed, ok := data["removed_cell_ids"].([]string); ok && len(removed) > 0 {
				text += "\nCells removed since " + since + ": " + strings.Join(removed, ", ") + "\n"
			}
			if data["order_changed"] == true {
				text += "\nThe cell order changed.\n"
			}
		}
		return mcp.NewGetPromptResult("Changes to "+p+" since "+since, []mcp.PromptMessage{
			userResource(s.docURI(ctx, p, ydoc.KindNotebook), "text/markdown", text),
			userText(ask + " Only the changed cells are shown, as they are now."),
		}), nil
	}
	room, err := s.openDoc(ctx, p, ydoc.KindText, "")
	if err != nil {
		return nil, fmt.Errorf("prompt review_changes: %s: %w", p, promptErr(err))
	}
	_, old, err := room.VersionContent(ctx, bridge.Version(since))
	if err != nil {
		return nil, fmt.Errorf("prompt review_changes: version %s of %s: %w (list versions with get_document_history)", since, p, err)
	}
	var now string
	if err := room.View(ctx, func(d *ydoc.Doc) error {
		var err error
		now, err = d.Text()
		return err
	}); err != nil {
		return nil, fmt.Errorf("prompt review_changes: %s: %w", p, err)
	}
	diff := ydoc.DiffText(old, now)
	text := "No changes."
	if !diff.Empty() {
		text, _ = s.capTokens(diff.Unified(), s.opts.MaxResponseTokens)
	}
	return mcp.NewGetPromptResult("Changes to "+p+" since "+since, []mcp.PromptMessage{
		userResource(s.docURI(ctx, p, ydoc.KindText), "text/x-diff", text),
		userText(ask + " The changes are shown as a unified diff."),
	}), nil
}
