// Package console is `kiln console`: where Kiln's web console is, and whether it answers.
package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Options are what `kiln console` was asked.
type Options struct {
	Factory *factory.Factory
	Check   bool
}

// NewCmdConsole returns the command; runF replaces its run in tests.
func NewCmdConsole(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Print the URL of Kiln's web console (the API server serves it); --check loads it",
		Long: "Print the URL of Kiln's web console: the API server this configuration talks to serves it at /. Open it " +
			"in a browser and sign in with a bearer token (the one of this configuration, or `kubectl create token " +
			"<service-account>`). With --check, load the page and its script as a browser would and say what is wrong.",
		Args: cobra.NoArgs,
		RunE: factory.RunE(o, runF, run),
	}
	cmd.Flags().BoolVar(&o.Check, "check", false, "load the console's page and script, and fail unless they are served as they should be")
	return cmd
}

var script = regexp.MustCompile(`<script type="module" src="(/assets/[^"]+\.js)"></script>`)

func run(ctx context.Context, o *Options) error {
	kc, err := o.Factory.ResolveContext()
	if err != nil {
		return err
	}
	url := strings.TrimSuffix(kc.Server, "/") + "/"
	out := o.Factory.IO.Out
	if !o.Check {
		_, err := fmt.Fprintf(out, "Kiln's web console: %s\nSign in with a bearer token: this configuration's, or `kubectl create token <service-account>`.\n", url)
		return err
	}
	hc, err := kc.HTTPClient()
	if err != nil {
		return err
	}
	page, h, err := get(ctx, hc, url, "text/html")
	if err != nil {
		return err
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		return fmt.Errorf("%s is served without the console's Content-Security-Policy (got %q): is it Kiln's API server?", url, csp)
	}
	m := script.FindSubmatch(page)
	if m == nil {
		return fmt.Errorf("%s is not Kiln's console: no <script type=\"module\" src=\"/assets/...\"> in the page", url)
	}
	asset := strings.TrimSuffix(kc.Server, "/") + string(m[1])
	js, _, err := get(ctx, hc, asset, "javascript")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Kiln's web console answers at %s (page and script, %d KiB).\n", url, (len(js)+1023)/1024)
	return err
}

// get fetches url and checks it answered 200 with a Content-Type containing kind.
func get(ctx context.Context, hc *http.Client, url, kind string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the console: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", url, err)
	}
	switch {
	case res.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "not built"):
		return nil, nil, fmt.Errorf("%s: the API server was built without its console (make console, then build it again)", url)
	case res.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("loading %s: %s", url, res.Status)
	case !strings.Contains(res.Header.Get("Content-Type"), kind):
		return nil, nil, fmt.Errorf("loading %s: Content-Type %q, want %s", url, res.Header.Get("Content-Type"), kind)
	}
	return body, res.Header, nil
}
