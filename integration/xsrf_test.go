//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/ydoc"
)

// A server without token auth checks XSRF on writes (the session PUT): the client's self-minted
// _xsrf cookie plus X-XSRFToken header must pass, and the room must work.
func TestTokenlessServerUsesXSRF(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	srv, err := StartJupyter(ctx, ServerOptions{ExtraArgs: []string{"--IdentityProvider.token=", "--ServerApp.password="}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.WriteFile("open.ipynb", fixture(t, "jupyter_ydoc--nb0.ipynb")); err != nil {
		t.Fatal(err)
	}
	open := &JupyterServer{URL: srv.URL, Token: ""}
	sc := newSidecar(t, open, nil)
	room, err := sc.manager.Open(ctx, "open.ipynb", ydoc.KindNotebook)
	if err != nil {
		t.Fatalf("open a room on a token-less server: %v\n%s", err, tail(srv.Log(), 2000))
	}
	if _, err := room.Apply(ctx, ydoc.EditFunc(func(tx *ydoc.Txn, _ bool) error {
		return tx.InsertCells(0, []ydoc.Cell{{ID: "xsrf-ok", Type: "markdown", Source: "written without a token"}})
	})); err != nil {
		t.Fatal(err)
	}
	waitDisk(t, srv, "open.ipynb", "the edit", func(nb ydoc.Notebook) bool { return len(nb.Cells) > 0 && nb.Cells[0].ID == "xsrf-ok" })
}
