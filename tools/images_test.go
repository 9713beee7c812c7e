package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"
)

// pngHeader is the start of a PNG declaring a w×h 16-bit RGBA canvas: enough for DecodeConfig,
// a decompression bomb for image.Decode (the pixel data is never needed to refuse it).
func pngHeader(w, h uint32) string {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 16, 6 // bit depth 16, RGBA
	chunk := append([]byte("IHDR"), ihdr...)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	b.Write(chunk)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func smallPNG(w, h int) string {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 7, 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestFitImageRefusesDecompressionBombs(t *testing.T) {
	start := time.Now()
	_, err := fitImage("image/png", pngHeader(10000, 10000), defaultMaxImagePixels)
	if err == nil || !strings.Contains(err.Error(), "too large to scale") {
		t.Errorf("a 10000x10000 16-bit canvas: %v, want refused before decoding", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("refusing took %v: it decoded", el)
	}
}

func TestFitImageMimeFromTheBytes(t *testing.T) {
	img, err := fitImage("image/jpeg", smallPNG(20, 10), defaultMaxImagePixels)
	if err != nil || img.mime != "image/png" || img.size != image.Pt(20, 10) {
		t.Errorf("PNG bytes labelled JPEG: %+v %v, want attached as image/png", img, err)
	}
	img, err = fitImage("image/jpeg", smallPNG(200, 100), 5000)
	if err != nil || img.mime != "image/png" || img.size.X*img.size.Y > 5000 || img.orig != image.Pt(200, 100) {
		t.Errorf("downscaled: %+v %v", img.size, err)
	}
	if _, err := fitImage("image/png", "not base64!", 100); err == nil {
		t.Error("garbage accepted")
	}
}
