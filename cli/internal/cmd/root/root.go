// Package root assembles the kiln command.
package root

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	kilnversion "github.com/kiln-ml/kiln/api/version"
	"github.com/kiln-ml/kiln/cli/internal/cmd/completion"
	configcmd "github.com/kiln-ml/kiln/cli/internal/cmd/config"
	consolecmd "github.com/kiln-ml/kiln/cli/internal/cmd/console"
	"github.com/kiln-ml/kiln/cli/internal/cmd/convert"
	deletecmd "github.com/kiln-ml/kiln/cli/internal/cmd/delete"
	"github.com/kiln-ml/kiln/cli/internal/cmd/describe"
	"github.com/kiln-ml/kiln/cli/internal/cmd/get"
	"github.com/kiln-ml/kiln/cli/internal/cmd/list"
	"github.com/kiln-ml/kiln/cli/internal/cmd/logs"
	"github.com/kiln-ml/kiln/cli/internal/cmd/queues"
	"github.com/kiln-ml/kiln/cli/internal/cmd/runtimes"
	"github.com/kiln-ml/kiln/cli/internal/cmd/schedules"
	"github.com/kiln-ml/kiln/cli/internal/cmd/submit"
	"github.com/kiln-ml/kiln/cli/internal/cmd/suspend"
	"github.com/kiln-ml/kiln/cli/internal/cmd/version"
	"github.com/kiln-ml/kiln/cli/internal/cmd/wait"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// NewCmdRoot returns the kiln command. name is how it was invoked: "kiln", or
// "kubectl-kiln" as a kubectl plugin (then help says "kubectl kiln").
func NewCmdRoot(f *factory.Factory, name string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kiln <command>",
		Short: "Submit, follow and control training jobs on Kubernetes",
		Long: `kiln submits training jobs to Kiln (Kubeflow Trainer TrainJobs), follows them, and controls them,
through the Kiln API server, as you: your Kubernetes RBAC decides what you may do.

It reads its server, token and namespace from its configuration (` + "`kiln config`" + `; file
$KILN_CONFIG, default ~/.config/kiln/config.yaml), overridden by KILN_SERVER, KILN_TOKEN,
KILN_NAMESPACE, KILN_CA_FILE and KILN_CONTEXT, and by the global flags.

Exit codes: 0 ok, 1 error, 2 wrong usage, 3 the job failed (wait, submit --wait), 4 timed out.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       kilnversion.Version,
	}
	if name == "kubectl-kiln" {
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl kiln"}
	}
	cmd.SetVersionTemplate("kiln {{.Version}}\n")
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.ConfigPath, "config", f.ConfigPath, "Kiln configuration file")
	pf.StringVar(&f.Context, "context", "", "configuration context to use")
	pf.StringVarP(&f.Namespace, "namespace", "n", "", "namespace to act in (default: the context's)")
	pf.StringVar(&f.Server, "server", "", "API server URL, overriding the context's")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return factory.Usagef("%v (see `%s --help`)", err, c.CommandPath())
	})
	cmd.SetIn(f.IO.In)
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)

	cmd.AddGroup(&cobra.Group{ID: "jobs", Title: "Training jobs:"}, &cobra.Group{ID: "cluster", Title: "Cluster:"}, &cobra.Group{ID: "setup", Title: "Setup:"})
	for _, c := range []*cobra.Command{
		submit.NewCmdSubmit(f, nil), list.NewCmdList(f, nil), get.NewCmdGet(f, nil), describe.NewCmdDescribe(f, nil),
		logs.NewCmdLogs(f, nil), wait.NewCmdWait(f, nil), suspend.NewCmdSuspend(f, nil), suspend.NewCmdResume(f, nil),
		deletecmd.NewCmdDelete(f, nil), schedules.NewCmdSchedules(f), convert.NewCmdConvert(f, nil),
	} {
		c.GroupID = "jobs"
		cmd.AddCommand(c)
	}
	for _, c := range []*cobra.Command{runtimes.NewCmdRuntimes(f), queues.NewCmdQueues(f)} {
		c.GroupID = "cluster"
		cmd.AddCommand(c)
	}
	for _, c := range []*cobra.Command{configcmd.NewCmdConfig(f), version.NewCmdVersion(f, nil), consolecmd.NewCmdConsole(f, nil), completion.NewCmdCompletion(f)} {
		c.GroupID = "setup"
		cmd.AddCommand(c)
	}
	cmd.SetHelpCommandGroupID("setup")
	cmd.SetCompletionCommandGroupID("setup")
	// Errors about arguments are usage errors too.
	for _, c := range cmd.Commands() {
		wrapArgs(c)
	}
	return cmd
}

func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return factory.Usagef("%v: %s", err, strings.TrimSpace(fmt.Sprintf("usage: %s", cmd.UseLine())))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}
