// Package iostreams is where the CLI reads and writes: standard streams in a terminal or a
// pipe, or buffers in tests. It decides colour and layout: colour and aligned, truncated
// tables on a terminal; plain, tab-separated, complete output in a pipe.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are the CLI's streams and what it knows about them.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	outTTY, errTTY bool
	color          bool
	width          int
}

// System returns the process's streams, with colour on a terminal unless NO_COLOR is set.
func System() *IOStreams {
	s := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, width: 80}
	s.outTTY = term.IsTerminal(int(os.Stdout.Fd()))
	s.errTTY = term.IsTerminal(int(os.Stderr.Fd()))
	_, noColor := os.LookupEnv("NO_COLOR")
	s.color = s.outTTY && !noColor && os.Getenv("TERM") != "dumb"
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
		s.width = w
	}
	return s
}

// Test returns streams on buffers: stdin, stdout, stderr.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut, width: 80}, in, out, errOut
}

// SetTTY makes test streams behave as a terminal (with colour) or a pipe.
func (s *IOStreams) SetTTY(tty bool) {
	s.outTTY, s.errTTY, s.color = tty, tty, tty
}

// SetWidth sets the terminal width test streams report.
func (s *IOStreams) SetWidth(width int) {
	s.width = width
}

// IsTTY reports whether standard output is a terminal.
func (s *IOStreams) IsTTY() bool { return s.outTTY }

// IsErrTTY reports whether standard error is a terminal (progress lines go there).
func (s *IOStreams) IsErrTTY() bool { return s.errTTY }

// Color reports whether output may be coloured.
func (s *IOStreams) Color() bool { return s.color }

// Width is the terminal's width (80 when unknown).
func (s *IOStreams) Width() int { return s.width }

// ANSI colours.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	blue   = "\x1b[34m"
	gray   = "\x1b[90m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

func (s *IOStreams) paint(code, text string) string {
	if !s.color || text == "" {
		return text
	}
	return code + text + reset
}

// Red, Green, Yellow, Blue, Gray and Bold colour text when colour is on.
func (s *IOStreams) Red(t string) string    { return s.paint(red, t) }
func (s *IOStreams) Green(t string) string  { return s.paint(green, t) }
func (s *IOStreams) Yellow(t string) string { return s.paint(yellow, t) }
func (s *IOStreams) Blue(t string) string   { return s.paint(blue, t) }
func (s *IOStreams) Gray(t string) string   { return s.paint(gray, t) }
func (s *IOStreams) Bold(t string) string   { return s.paint(bold, t) }
