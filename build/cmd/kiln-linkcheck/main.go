// Command kiln-linkcheck fails when a Markdown file of the repository links to a file or a
// heading that does not exist (make verify runs it).
//
//	kiln-linkcheck [-skip dir,dir] [root]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/kiln-ml/kiln/build/internal/linkcheck"
)

func main() {
	skip := flag.String("skip", "bin,charts/kiln/charts", "directories (from the root) whose files are not checked")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	broken, err := linkcheck.Check(root, strings.Split(*skip, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kiln-linkcheck:", err)
		os.Exit(2)
	}
	for _, b := range broken {
		fmt.Println(b)
	}
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "kiln-linkcheck: %d broken links: fix the path or the #heading each names\n", len(broken))
		os.Exit(1)
	}
}
