package ydoc

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/rs/zerolog"
	y "github.com/skyterra/y-crdt"
)

// crdtLock, the y-crdt lock, is the one piece of global mutable state in this module, by
// necessity: y-crdt is not goroutine-safe even across separate documents (it has package-level
// counters), and it prints through a package-level Logf. Every call into the library, for every
// document of every room, happens under crdtLock.mu; while a call runs, crdtLock.log is the
// logger of the document it is working on, so library messages are attributed to the right room.
var crdtLock struct {
	mu       sync.Mutex
	log      zerolog.Logger
	hookOnce sync.Once
}

// ErrCRDTPanic is wrapped when y-crdt panicked on a document. The document is no longer
// trustworthy (a panic inside a transaction leaves it wedged) and must be rebuilt.
var ErrCRDTPanic = errors.New("ydoc: y-crdt panicked")

func installLogHook() {
	crdtLock.hookOnce.Do(func() {
		y.Logf = func(format string, args ...any) {
			// Called only while crdtLock.mu is held (every library call is), so reading log is safe.
			crdtLock.log.Warn().Str("component", "y-crdt").Msgf(format, args...)
		}
		y.Log = func(args ...any) {
			crdtLock.log.Warn().Str("component", "y-crdt").Msg(fmt.Sprint(args...))
		}
	})
}

// withCRDTLock runs fn with the y-crdt lock held and converts a library panic into an error.
func withCRDTLock(log zerolog.Logger, fn func() error) (err error) {
	installLogHook()
	crdtLock.mu.Lock()
	crdtLock.log = log
	defer func() {
		if r := recover(); r != nil {
			log.Error().Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("y-crdt panicked")
			err = fmt.Errorf("%w: %v", ErrCRDTPanic, r)
		}
		crdtLock.log = zerolog.Nop()
		crdtLock.mu.Unlock()
	}()
	return fn()
}
