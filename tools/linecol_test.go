package tools

import "testing"

// Windows line ends: "\r" is not a column, so a line's end column is before "\r\n" both ways.
func TestLineColCRLF(t *testing.T) {
	text := "ab\r\ncd\r\n"
	off, err := lineColToUTF16(text, lineColPos{Line: 1, Column: 3}, nil)
	if err != nil || off != 2 {
		t.Fatalf("line 1 column 3 (its end) = %d %v, want 2", off, err)
	}
	if _, err := lineColToUTF16(text, lineColPos{Line: 1, Column: 4}, nil); err == nil {
		t.Error("column 4 of a two-character CRLF line was accepted")
	}
	if l, c := utf16ToLineCol(text, 2); l != 1 || c != 3 {
		t.Errorf("offset 2 = %d:%d, want 1:3", l, c)
	}
	if l, c := utf16ToLineCol(text, 4); l != 2 || c != 1 {
		t.Errorf("offset 4 = %d:%d, want 2:1", l, c)
	}
	if off, _ := lineColToUTF16(text, lineColPos{Line: 2, Column: 2}, nil); off != 5 {
		t.Errorf("line 2 column 2 = %d, want 5", off)
	}
}
