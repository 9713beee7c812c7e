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

// defaultMaxImagePixels is about 800×600.
const defaultMaxImagePixels = 800 * 600

// fitImage decodes a base64 PNG or JPEG, downscales it to at most maxPixels pixels (keeping the
// aspect ratio) and re-encodes it in the same format when it had to shrink. It returns the
// base64 data, the final size and the original size.
func fitImage(mime, b64 string, maxPixels int) (string, image.Point, image.Point, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return "", image.Point{}, image.Point{}, fmt.Errorf("image is not base64: %w", err)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return "", image.Point{}, image.Point{}, fmt.Errorf("decode %s: %w", mime, err)
	}
	orig := image.Pt(cfg.Width, cfg.Height)
	if maxPixels <= 0 || cfg.Width*cfg.Height <= maxPixels {
		return strings.TrimSpace(b64), orig, orig, nil
	}
	if cfg.Width*cfg.Height > 100_000_000 {
		return "", image.Point{}, orig, fmt.Errorf("%s of %dx%d is too large to scale", mime, cfg.Width, cfg.Height)
	}
	src, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		return "", image.Point{}, orig, fmt.Errorf("decode %s: %w", mime, err)
	}
	scale := math.Sqrt(float64(maxPixels) / float64(cfg.Width*cfg.Height))
	w, h := max(1, int(float64(cfg.Width)*scale)), max(1, int(float64(cfg.Height)*scale))
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
	var out bytes.Buffer
	if mime == "image/jpeg" {
		err = jpeg.Encode(&out, dst, &jpeg.Options{Quality: 85})
	} else {
		err = png.Encode(&out, dst)
	}
	if err != nil {
		return "", image.Point{}, orig, fmt.Errorf("encode %s: %w", mime, err)
	}
	return base64.StdEncoding.EncodeToString(out.Bytes()), image.Pt(w, h), orig, nil
}
