// Command kiln-docs writes the CLI reference (docs/cli.md) from the commands themselves,
// so the reference never drifts from the CLI. `make generate` runs it.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/cmd/root"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kiln-docs OUTPUT.md")
		os.Exit(2)
	}
	io, _, _, _ := iostreams.Test()
	f := factory.New(io)
	f.ConfigPath = "~/.config/kiln/config.yaml" // not this machine's path
	cmd := root.NewCmdRoot(f, "kiln")
	var b bytes.Buffer
	b.WriteString("# `kiln` CLI reference\n\n")
	b.WriteString("Generated from the commands by `make generate` (`cli/cmd/kiln-docs`); do not edit. ")
	b.WriteString("A walk-through is in [the quickstart](quickstart.md).\n\n")
	b.WriteString(outputFormats)
	write(&b, cmd)
	if err := os.WriteFile(os.Args[1], b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-docs:", err)
		os.Exit(1)
	}
}

func write(b *bytes.Buffer, c *cobra.Command) {
	if c.Hidden || c.Name() == "help" || (c.Name() == "completion" && c.HasSubCommands()) {
		return
	}
	fmt.Fprintf(b, "## %s\n\n%s\n\n", c.CommandPath(), c.Short)
	if c.Long != "" {
		fmt.Fprintf(b, "%s\n\n", c.Long)
	}
	if c.Runnable() {
		fmt.Fprintf(b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Example != "" {
		fmt.Fprintf(b, "Examples:\n\n```sh\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if flags := c.NonInheritedFlags().FlagUsages(); flags != "" && c.Runnable() {
		fmt.Fprintf(b, "Flags:\n\n```\n%s```\n\n", flags)
	}
	if !c.HasParent() {
		fmt.Fprintf(b, "Global flags (every command):\n\n```\n%s```\n\n", c.PersistentFlags().FlagUsages())
	}
	for _, sub := range c.Commands() {
		write(b, sub)
	}
}

const outputFormats = `## Output

- **On a terminal** tables are aligned under a header, coloured (not with NO_COLOR set), and cut to
  the terminal's width; ` + "`--wait`" + ` and ` + "`--follow`" + ` draw a live progress line on standard error.
- **In a pipe** tables have no header and no colour: one line per row, columns separated by tabs,
  never truncated, in a stable order, so ` + "`cut`" + `, ` + "`awk`" + ` and ` + "`while read`" + ` work (new columns
  come after the old ones). ` + "`kiln wait`" + ` and ` + "`--wait`" + ` write a plain line of a reporting job's
  progress to standard error when its state or percent changes (a percent at most every 10 s).
- **-o json / -o yaml** print the API's own messages (` + "`kiln.v1`" + `, see [the API](api.md)) with their
  proto field names (` + "`train_jobs`" + `, ` + "`resource_version`" + `, ` + "`status.state`" + `) and enum names
  (` + "`STATE_RUNNING`" + `), indented the same way every time. Fields are only ever added to them, never
  renamed or removed: ` + "`make verify`" + ` fails on a breaking change to the API.
- **Errors** are one line on standard error, ` + "`kiln: `" + ` and what to fix. Exit codes: 0 ok, 1 error,
  2 wrong usage, 3 the job failed (` + "`kiln wait`" + `, ` + "`kiln submit --wait/--follow`" + `), 4 timed out.

`
