package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// medium holds a log's frames: a file under the store's directory, or memory. Only the store's
// writer goroutine (and a reader holding the log's writer lock) touch it.
type medium interface {
	append(b []byte) error
	readAt(off int64, n int) ([]byte, error)
	all() ([]byte, error)
	sync() error
	// replace swaps the whole content at once (compaction): after a crash either the old or the
	// new content is there, never a mix.
	replace(content []byte) error
	truncate(size int64) error
	size() int64
	remove() error
	close() error
	durable() bool // survives the process
}

// fileMedium is a log file, appended to with O_APPEND.
type fileMedium struct {
	path string
	f    *os.File
	n    int64
}

func openFile(path string) (*fileMedium, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &fileMedium{path: path, f: f, n: fi.Size()}, nil
}

func (m *fileMedium) append(b []byte) error {
	n, err := m.f.Write(b)
	m.n += int64(n)
	if err != nil {
		return fmt.Errorf("append to %s: %w", m.path, err)
	}
	return nil
}

func (m *fileMedium) readAt(off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := m.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("read %s: %w", m.path, err)
	}
	return b, nil
}

func (m *fileMedium) all() ([]byte, error) {
	b := make([]byte, m.n)
	if _, err := m.f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", m.path, err)
	}
	return b, nil
}

func (m *fileMedium) sync() error {
	if err := m.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", m.path, err)
	}
	return nil
}

func (m *fileMedium) replace(content []byte) error {
	tmp := m.path + ".tmp"
	if err := writeSynced(tmp, content); err != nil {
		return err
	}
	if err := os.Rename(tmp, m.path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("compact %s: %w", m.path, err)
	}
	if err := syncDir(filepath.Dir(m.path)); err != nil {
		return err
	}
	_ = m.f.Close()
	f, err := os.OpenFile(m.path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("reopen %s: %w", m.path, err)
	}
	m.f, m.n = f, int64(len(content))
	return nil
}

func (m *fileMedium) truncate(size int64) error {
	if err := m.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %s: %w", m.path, err)
	}
	m.n = size
	return m.sync()
}

func (m *fileMedium) size() int64   { return m.n }
func (m *fileMedium) durable() bool { return true }

func (m *fileMedium) remove() error {
	_ = m.f.Close()
	if err := os.Remove(m.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", m.path, err)
	}
	return syncDir(filepath.Dir(m.path))
}

func (m *fileMedium) close() error { return m.f.Close() }

// writeSynced writes a new file and fsyncs it.
func writeSynced(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(content); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}

// syncDir makes a directory's entries (a new, renamed or removed file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// memMedium keeps the frames in memory (no state directory): the same log, lost with the
// process.
type memMedium struct{ b []byte }

func (m *memMedium) append(b []byte) error { m.b = append(m.b, b...); return nil }

func (m *memMedium) readAt(off int64, n int) ([]byte, error) {
	if off < 0 || off+int64(n) > int64(len(m.b)) {
		return nil, fmt.Errorf("read past the end of a log in memory (%d+%d of %d)", off, n, len(m.b))
	}
	return append([]byte(nil), m.b[off:off+int64(n)]...), nil
}

func (m *memMedium) all() ([]byte, error) { return m.b, nil }
func (m *memMedium) sync() error          { return nil }

func (m *memMedium) replace(content []byte) error {
	m.b = append([]byte(nil), content...)
	return nil
}

func (m *memMedium) truncate(size int64) error { m.b = m.b[:size]; return nil }
func (m *memMedium) size() int64               { return int64(len(m.b)) }
func (m *memMedium) remove() error             { m.b = nil; return nil }
func (m *memMedium) close() error              { return nil }
func (m *memMedium) durable() bool             { return false }
