package ydoc

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/rs/zerolog"
	y "github.com/skyterra/y-crdt"
)

// engine is the one piece of global mutable state in this module, by necessity: y-crdt is not
// goroutine-safe even across separate documents (it has package-level counters), and it prints
// through a package-level Logf. Every call into the library, for every document of every room,
// happens under engine.mu; while a call runs, engine.log is the logger of the document it is
// working on, so library messages are attributed to the right room.
var engine struct {
	mu       sync.Mutex
	log      zerolog.Logger
	hookOnce sync.Once
}

// ErrEnginePanic is wrapped when y-crdt panicked on a document. The document is no longer
// trustworthy (a panic inside a transaction leaves it wedged) and must be rebuilt.
var ErrEnginePanic = errors.New("ydoc: crdt engine panicked")

func installLogHook() {
	engine.hookOnce.Do(func() {
		y.Logf = func(format string, args ...any) {
			// Called only while engine.mu is held (every library call is), so reading log is safe.
			engine.log.Warn().Str("component", "y-crdt").Msgf(format, args...)
		}
		y.Log = func(args ...any) {
			engine.log.Warn().Str("component", "y-crdt").Msg(fmt.Sprint(args...))
		}
	})
}

// withEngine runs fn with the engine lock held and converts a library panic into an error.
func withEngine(log zerolog.Logger, fn func() error) (err error) {
	installLogHook()
	engine.mu.Lock()
	engine.log = log
	defer func() {
		if r := recover(); r != nil {
			log.Error().Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("y-crdt panicked")
			err = fmt.Errorf("%w: %v", ErrEnginePanic, r)
		}
		engine.log = zerolog.Nop()
		engine.mu.Unlock()
	}()
	return fn()
}
