package bridge_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/bridge/bridgetest"
	"github.com/jupyter-collab-mcp/jupyter-collab-mcp/internal/testutil"
)

// A server that frees an idle room (jupyter-server-documents) or restarts without a new
// session id loads the file again under a fresh client id. The replica's history is unknown to
// that document: it must be dropped and the server's state taken, or every cell is duplicated
// (jupyter-server-documents #252, #254, #305). Nothing but the server's state vector tells:
// the session id is the same and the absence short.
func TestNewServerDocumentDropsReplica(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stepTwoFirst bool
	}{
		{"step 1 first (jupyter-collaboration)", false},
		{"step 2 first (jupyter-server-documents)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			srv.StepTwoFirst(tc.stepTwoFirst)
			h := startSynced(t, srv, nil)
			if _, err := h.room.Apply(testutil.Context(t), insertCell("mine")); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if err := srv.SaveFile(nbPath); err != nil {
				t.Fatal(err)
			}
			srv.Restart(bridgetest.RestartOptions{KeepSession: true})
			h.await("reset", kindIs(bridge.EventReset))
			h.await("synced", kindIs(bridge.EventSynced))
			assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "mine")
			if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slices.Equal(got, want) {
				t.Errorf("replica cells %v, server cells %v", got, want)
			}
			if _, err := h.room.Apply(testutil.Context(t), insertCell("after")); err != nil {
				t.Fatalf("Apply after the new document: %v", err)
			}
			assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "mine", "after")
			if n := h.room.Info().Resets; n != 1 {
				t.Errorf("%d resets, want 1", n)
			}
		})
	}
}

// Reconnecting to the same server document is not a new document: no reset.
func TestReconnectSameDocumentKeepsReplica(t *testing.T) {
	srv := newServer(t)
	srv.StepTwoFirst(true)
	h := startSynced(t, srv, nil)
	if _, err := h.room.Apply(testutil.Context(t), insertCell("mine")); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	srv.Restart(bridgetest.RestartOptions{KeepSession: true, KeepDoc: true})
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	h.await("synced", kindIs(bridge.EventSynced))
	if n := h.room.Info().Resets; n != 0 {
		t.Errorf("%d resets on a reconnect to the same document", n)
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "mine")
}

// An engine that saves by itself has no save message: Save says so at once.
func TestSaveRefusedWhereTheServerSavesItself(t *testing.T) {
	srv := newServer(t)
	srv.SetEngine(bridge.EngineInfo{Name: "jupyter-server-documents", SavesItself: true, NoForks: true})
	h := startSynced(t, srv, nil)
	if _, err := h.room.Save(testutil.Context(t)); !errors.Is(err, bridge.ErrSavesItself) {
		t.Fatalf("Save: %v, want ErrSavesItself", err)
	}
}

// jupyter-server-documents restarted (its session id says nothing) and rebuilt the room from
// the file under a fresh client, and an open tab reconnected first with its old copy: the server
// knows every client id of the replica again. The replica must still be taken for lost and
// rescued, not merged as a plain reconnection, which would add every cell a second time
// (TestStormWithCrashes on jupyter-server-documents: no rescue, 2,250 keystrokes doubled).
func TestRebuiltRoomATabMergedIntoIsLost(t *testing.T) {
	srv := newServer(t)
	srv.StepTwoFirst(true)
	h := startSynced(t, srv, nil)
	if _, err := h.room.Apply(testutil.Context(t), insertCell("saved")); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := srv.SaveFile(nbPath); err != nil {
		t.Fatal(err)
	}
	if _, err := h.room.Apply(testutil.Context(t), insertCell("unsaved")); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	tab := srv.RoomState(nbPath) // an open tab's copy
	roomID := h.room.Info().RoomID
	srv.Down()
	h.await("disconnected", kindIs(bridge.EventDisconnected))
	srv.Restart(bridgetest.RestartOptions{KeepSession: true})
	if err := srv.MergeAsPeer(roomID, tab); err != nil {
		t.Fatal(err)
	}
	srv.Up()
	h.await("reset", kindIs(bridge.EventReset))
	h.await("synced", kindIs(bridge.EventSynced))
	if err := srv.Await(testutil.Context(t), func() bool {
		return srv.CountCell(nbPath, "saved") == 1 && srv.CountCell(nbPath, "unsaved") == 1
	}); err != nil {
		t.Fatalf("the room after the rescue: cells %v", srv.CellIDs(nbPath))
	}
	assertCellsOnce(t, srv, nbPath, "cell-a", "cell-b", "saved", "unsaved")
	if got, want := roomCellIDs(t, h.room), srv.CellIDs(nbPath); !slices.Equal(got, want) {
		t.Errorf("replica cells %v, server cells %v", got, want)
	}
}
