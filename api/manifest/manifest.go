// Package manifest splits YAML streams, the form manifests are written and exchanged in,
// into their documents. It reads one way for every module, so that a file the chart hooks
// apply, a test's fixture and what `kiln convert` is given are split alike.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Documents reads the documents of a YAML stream separated by "---" lines, as kubectl
// does, in order. Documents holding nothing but blank lines and comments are left out, so
// that a leading "---" or a commented-out object is not a document. JSON is one document.
// The error (a malformed separator line, or a failed read) is utilyaml's or r's.
func Documents(r io.Reader) ([][]byte, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if !empty(doc) {
			docs = append(docs, doc)
		}
	}
}

// empty says whether doc holds only blank lines, comments and a "---" marker (which the
// reader keeps at the start of a document). Content never begins with '#' (a value
// starting with it is quoted), nor at the start of a line with "---" (the reader refuses
// such a line), so this needs no YAML parser.
func empty(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.HasPrefix(line, separator) {
			return false
		}
	}
	return true
}

var separator = []byte("---")
