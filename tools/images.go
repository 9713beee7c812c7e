package tools

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"strings"

	"golang.org/x/image/draw"
)

// Images from outputs go to the model as MCP image content, downscaled to a pixel budget (a
// 4K plot costs the same tokens as a thumbnail would not): never a raw 100 kB base64 blob.
// Decoding is bounded before it starts: a small PNG can declare a 10000×10000 16-bit canvas
// (a gigabyte once decoded), and the kernel's output is not trusted.

const (
	// defaultMaxImagePixels is about 800×600.
	defaultMaxImagePixels = 800 * 600
	// maxDecodePixels bounds the images decoded for downscaling (at most 8 bytes a pixel:
	// 64 MB); larger ones are described, not attached.
	maxDecodePixels = 8_000_000
	// maxImageBytes bounds one attached image (base64), maxImagesBytes all of one result's.
	maxImageBytes  = 2 << 20
	maxImagesBytes = 8 << 20
)

// fittedImage is an image ready to attach.
type fittedImage struct {
	data       string // base64
	mime       string // from the bytes, not from what the output claimed
	size, orig image.Point
}

// fitImage decodes a base64 PNG or JPEG, downscales it to at most maxPixels pixels (keeping the
// aspect ratio) and re-encodes it in its own format when it had to shrink.
func fitImage(declared, b64 string, maxPixels int) (fittedImage, error) {
	b64 = strings.TrimSpace(b64)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return fittedImage{}, fmt.Errorf("image is not base64: %w", err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return fittedImage{}, fmt.Errorf("decode %s: %w", declared, err)
	}
	mime := "image/" + format // png or jpeg: the decoders registered here
	orig := image.Pt(cfg.Width, cfg.Height)
	pixels := int64(cfg.Width) * int64(cfg.Height)
	if maxPixels <= 0 || pixels <= int64(maxPixels) {
		if len(b64) > maxImageBytes {
			return fittedImage{orig: orig}, fmt.Errorf("%dx%d but %d kB: too large to attach", cfg.Width, cfg.Height, len(b64)>>10)
		}
		return fittedImage{data: b64, mime: mime, size: orig, orig: orig}, nil
	}
	if pixels > maxDecodePixels {
		return fittedImage{orig: orig}, fmt.Errorf("%dx%d is too large to scale (over %d megapixels)", cfg.Width, cfg.Height, maxDecodePixels/1_000_000)
	}
	src, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return fittedImage{orig: orig}, fmt.Errorf("decode %s: %w", mime, err)
	}
	scale := math.Sqrt(float64(maxPixels) / float64(pixels))
	w, h := max(1, int(float64(cfg.Width)*scale)), max(1, int(float64(cfg.Height)*scale))
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
	var out bytes.Buffer
	if format == "jpeg" {
		err = jpeg.Encode(&out, dst, &jpeg.Options{Quality: 85})
	} else {
		err = png.Encode(&out, dst)
	}
	if err != nil {
		return fittedImage{orig: orig}, fmt.Errorf("encode %s: %w", mime, err)
	}
	data := base64.StdEncoding.EncodeToString(out.Bytes())
	if len(data) > maxImageBytes {
		return fittedImage{orig: orig}, fmt.Errorf("%dx%d is still %d kB downscaled: too large to attach", w, h, len(data)>>10)
	}
	return fittedImage{data: data, mime: mime, size: image.Pt(w, h), orig: orig}, nil
}
