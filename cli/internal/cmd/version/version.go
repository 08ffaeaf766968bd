// Package version is `kiln version`: the client's version and the server's.
package version

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kilnversion "github.com/kiln-ml/kiln/api/version"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln version` was asked.
type Options struct {
	Factory *factory.Factory
	Client  bool
	Output  string
}

// NewCmdVersion returns the command; runF replaces its run in tests.
func NewCmdVersion(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the client's and the server's versions, and who you are to the server",
		Args:  cobra.NoArgs,
		RunE:  factory.RunE(o, runF, run),
	}
	cmd.Flags().BoolVar(&o.Client, "client", false, "only the client's version (no server needed)")
	outputs.AddFlag(cmd, &o.Output, "")
	return cmd
}

// outputs are what -o takes.
var outputs = printer.Formats{printer.FormatJSON}

func run(ctx context.Context, o *Options) error {
	format, err := outputs.Parse(o.Output)
	if err != nil {
		return err
	}
	io := o.Factory.IO
	if o.Client {
		if format == printer.FormatJSON {
			return writeJSON(io.Out, nil)
		}
		_, err := fmt.Fprintf(io.Out, "Client: %s\n", kilnversion.Version)
		return err
	}
	c, err := o.Factory.Client()
	if err != nil {
		return err
	}
	res, err := c.Server.GetServerInfo(ctx, connect.NewRequest(&kilnv1.GetServerInfoRequest{}))
	if err != nil {
		return err
	}
	info := res.Msg
	if format == printer.FormatJSON {
		return writeJSON(io.Out, info)
	}
	kueue := "not installed"
	if info.GetKueue() {
		kueue = "installed"
	}
	_, err = fmt.Fprintf(io.Out, "Client:     %s\nServer:     %s (%s)\nKubernetes: %s\nKueue:      %s\nYou are:    %s\n",
		kilnversion.Version, info.GetVersion(), c.ServerURL, info.GetKubernetesVersion(), kueue, info.GetUser())
	return err
}

// writeJSON prints {"client": VERSION, "server": GetServerInfoResponse} (server omitted
// when nil), with the API's field names.
func writeJSON(w io.Writer, info *kilnv1.GetServerInfoResponse) error {
	out := map[string]any{"client": kilnversion.Version}
	if info != nil {
		var b bytes.Buffer
		if _, err := printer.FormatJSON.Print(&b, info); err != nil {
			return err
		}
		out["server"] = json.RawMessage(b.Bytes())
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
