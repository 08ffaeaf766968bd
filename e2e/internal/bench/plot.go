package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"slices"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

type series struct {
	name   string
	color  color.RGBA
	values []time.Duration
}

var palette = []color.RGBA{{0xd9, 0x5f, 0x02, 0xff}, {0x1b, 0x6a, 0xc9, 0xff}}

// cdfPlot draws the cumulative distribution of each series (milliseconds on x, the
// fraction of samples at or below on y) as a PNG.
func cdfPlot(path, title string, ss []series) error {
	const w, h, left, right, top, bottom = 720, 420, 60, 20, 40, 50
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	grey, black := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}, color.RGBA{0, 0, 0, 0xff}

	var xmax float64
	for _, s := range ss {
		xmax = max(xmax, ms(slices.Max(s.values)))
	}
	xmax = niceCeil(xmax)
	px := func(v float64) int { return left + int(v/xmax*float64(w-left-right)) }
	py := func(f float64) int { return h - bottom - int(f*float64(h-top-bottom)) }

	for i := 0; i <= 5; i++ {
		x := xmax * float64(i) / 5
		line(img, px(x), py(0), px(x), py(1), grey)
		text(img, px(x)-12, h-bottom+16, fmt.Sprintf("%g", x), black)
		f := float64(i) / 5
		line(img, px(0), py(f), px(xmax), py(f), grey)
		text(img, 20, py(f)+4, fmt.Sprintf("%.1f", f), black)
	}
	line(img, px(0), py(0), px(xmax), py(0), black)
	line(img, px(0), py(0), px(0), py(1), black)
	text(img, left, 20, title, black)
	text(img, w/2-90, h-12, "lag (ms); y: fraction of samples at or below", black)

	for i, s := range ss {
		v := slices.Clone(s.values)
		slices.Sort(v)
		prevX, prevY := px(0), py(0)
		for j, d := range v {
			x, y := px(ms(d)), py(float64(j+1)/float64(len(v)))
			line(img, prevX, prevY, x, prevY, s.color)
			line(img, x, prevY, x, y, s.color)
			prevX, prevY = x, y
		}
		text(img, w-right-200, h-bottom-12-16*(len(ss)-1-i), fmt.Sprintf("%s (n=%d)", s.name, len(v)), s.color)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// line draws with Bresenham's algorithm, two pixels thick.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		img.SetRGBA(x0+1, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
