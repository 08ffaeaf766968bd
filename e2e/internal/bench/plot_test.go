package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCDFPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lag.png")
	ss := []series{
		{name: "kiln", color: palette[0], values: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 900 * time.Millisecond}},
		{name: "upstream", color: palette[1], values: []time.Duration{2 * time.Second, 3 * time.Second}},
	}
	if err := cdfPlot(path, "lag", ss); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 720 || b.Dy() != 420 {
		t.Fatalf("size %v", b)
	}
	// The kiln curve's colour is drawn somewhere.
	found := false
	for x := 0; x < 720 && !found; x++ {
		for y := 0; y < 420; y++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 == uint32(palette[0].R) && g>>8 == uint32(palette[0].G) && b>>8 == uint32(palette[0].B) {
				found = true
				break
			}
		}
	}
	if !found {
		t.Fatal("no curve drawn")
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.7: 1, 3: 5, 12: 20, 1500: 2000, 900: 1000} {
		if got := niceCeil(in); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
