package ydoc

import (
	"fmt"
	"unicode/utf8"
)

// The text-file model (jupyter_ydoc YUnicode/YFile): roots source (Y.Text) and state.
// Positions here are UTF-16 code units, as in Yjs; CodePointsToUTF16 converts from the code
// point positions users think in.

// Text returns the whole text of a text document.
func (d *Doc) Text() (string, error) {
	if d.kind != KindText {
		return "", ErrWrongKind
	}
	var s string
	err := d.run(func() error {
		s = textString(d.source)
		return nil
	})
	return s, err
}

// Text returns the text inside the transaction.
func (tx *Txn) Text() (string, error) {
	if tx.d.kind != KindText {
		return "", ErrWrongKind
	}
	return textString(tx.d.source), nil
}

// TextLength is the text length in UTF-16 code units.
func (tx *Txn) TextLength() int {
	if tx.d.kind != KindText {
		return 0
	}
	return tx.d.source.GetLength()
}

// InsertText inserts s at UTF-16 position pos.
func (tx *Txn) InsertText(pos int, s string) error {
	if tx.d.kind != KindText {
		return ErrWrongKind
	}
	if n := tx.d.source.GetLength(); pos < 0 || pos > n {
		return fmt.Errorf("insert at %d of %d: %w", pos, n, ErrOutOfRange)
	}
	if s == "" {
		return nil
	}
	tx.d.source.Insert(pos, s, nil)
	return tx.markDirty()
}

// DeleteText deletes n UTF-16 units at pos.
func (tx *Txn) DeleteText(pos, n int) error {
	if tx.d.kind != KindText {
		return ErrWrongKind
	}
	if l := tx.d.source.GetLength(); pos < 0 || n < 0 || pos+n > l {
		return fmt.Errorf("delete %d at %d of %d: %w", n, pos, l, ErrOutOfRange)
	}
	if n == 0 {
		return nil
	}
	tx.d.source.Delete(pos, n)
	return tx.markDirty()
}

// SetText replaces the whole text with a minimal diff.
func (tx *Txn) SetText(s string) error {
	if tx.d.kind != KindText {
		return ErrWrongKind
	}
	if tx.applyTextDiff(tx.d.source, textString(tx.d.source), s) {
		return tx.markDirty()
	}
	return nil
}

// CodePointsToUTF16 converts a code point offset in s to a UTF-16 offset. Offsets past the end
// are an error.
func CodePointsToUTF16(s string, cp int) (int, error) {
	if cp < 0 {
		return 0, fmt.Errorf("position %d: %w", cp, ErrOutOfRange)
	}
	units, n := 0, 0
	for _, r := range s {
		if n == cp {
			return units, nil
		}
		if r >= 0x10000 {
			units += 2
		} else {
			units++
		}
		n++
	}
	if n == cp {
		return units, nil
	}
	return 0, fmt.Errorf("position %d beyond the %d code points of the text: %w", cp, n, ErrOutOfRange)
}

// CodePointLen is the length of s in code points.
func CodePointLen(s string) int { return utf8.RuneCountInString(s) }
