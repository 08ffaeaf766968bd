package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDocuments(t *testing.T) {
	cases := map[string]struct {
		in        string
		want      []string
		wantError string
	}{
		"nothing":             {in: ""},
		"only comments":       {in: "# a header\n\n  # indented\n---\n---\n"},
		"one":                 {in: "a: 1\n", want: []string{"a: 1\n"}},
		"no final newline":    {in: "a: 1", want: []string{"a: 1\n"}},
		"leading separator":   {in: "---\na: 1\n", want: []string{"---\na: 1\n"}},
		"empty between":       {in: "a: 1\n---\n---\n# b\n---\nc: 3\n", want: []string{"a: 1\n", "c: 3\n"}},
		"several":             {in: "a: 1\n---\nb: 2\n---\nc: 3\n", want: []string{"a: 1\n", "b: 2\n", "c: 3\n"}},
		"comment kept inside": {in: "# Source: x.yaml\na: 1\n", want: []string{"# Source: x.yaml\na: 1\n"}},
		"commented-out object": {
			in:   "a: 1\n---\n# b: 2\n#   c: 3\n---\nd: 4\n",
			want: []string{"a: 1\n", "d: 4\n"},
		},
		"separator with a comment": {in: "a: 1\n--- # next\nb: 2\n", want: []string{"a: 1\n", "b: 2\n"}},
		"hash inside a block scalar": {
			in:   "script: |\n  # not a comment\n",
			want: []string{"script: |\n  # not a comment\n"},
		},
		"null and empty objects are documents": {in: "null\n---\n{}\n", want: []string{"null\n", "{}\n"}},
		"json":                                 {in: "{\n  \"a\": 1\n}\n", want: []string{"{\n  \"a\": 1\n}\n"}},
		"separator not at line start":          {in: "a: |\n  ---\n", want: []string{"a: |\n  ---\n"}},
		"content after a separator":            {in: "a: 1\n--- b: 2\n", wantError: "invalid Yaml document separator: b: 2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			docs, err := Documents(strings.NewReader(tc.in))
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("Documents() error = %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatalf("Documents() error: %v", err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, string(d))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Documents() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The documents are independent: appending to one does not change the next.
func TestDocumentsDoNotShareMemory(t *testing.T) {
	docs, err := Documents(strings.NewReader("a: 1\n---\nb: 2\n"))
	if err != nil {
		t.Fatalf("Documents() error: %v", err)
	}
	_ = append(docs[0], "c: 3\n"...)
	if diff := cmp.Diff("b: 2\n", string(docs[1])); diff != "" {
		t.Errorf("second document changed (-want +got):\n%s", diff)
	}
}
