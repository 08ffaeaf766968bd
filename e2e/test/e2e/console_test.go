package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-ml/kiln/api/clientconfig"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// browser is a headless Chromium (Debian's package) and what went wrong in its pages.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
	b.mu.Unlock()
}

// Problems are the console errors, exceptions and failed requests seen, but those expect says were wanted.
func (b *browser) Problems(expect func(string) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, p := range b.problems {
		if !expect(p) {
			out = append(out, p)
		}
	}
	return out
}

func newBrowser(ctx context.Context) *browser {
	GinkgoHelper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		Fail("no chromium on PATH: make test-e2e installs Debian's chromium package (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("lang", "en-US"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	DeferCleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: bctx}
	Expect(chromedp.Listen(bctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`))
				}
				b.problem("console.error: %s", strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			b.problem("exception: %s %s", e.ExceptionDetails.Text, exceptionText(e.ExceptionDetails))
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				b.problem("log: %s %s", e.Entry.Text, e.Entry.URL)
			}
		case *network.EventLoadingFailed:
			if !e.Canceled {
				b.problem("request failed: %s %s", e.ErrorText, e.BlockedReason)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				b.problem("HTTP %d %s", e.Response.Status, e.Response.URL)
			}
		}
	})).To(Succeed())
	return b
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return ""
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, actions...)
	Expect(err).NotTo(HaveOccurred(), "the page says:\n%s\nproblems so far: %q", b.page(), b.Problems(func(string) bool { return false }))
}

// click clicks the first element matching sel, as a user's mouse does. The console re-renders a list or a page
// when a watch event arrives, so the element found may be replaced before the click reaches it ("node is detached"):
// a user would click the new one, and so does click, until the action's deadline.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for {
			_, err := chromedp.Click(chromedp.CSS(sel))(ctx, t)
			if err == nil || ctx.Err() != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("clicking %s: %w", sel, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// page is the page's URL and text, for a failure's message.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// why is what a failed step's message needs to tell a page that did nothing from a request that failed and
// from a cluster that did not follow: the page, the browser's problems and the job's Kueue workloads.
func (b *browser) why(namespace, job string) string {
	wls, err := kubectl("", "get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o",
		`jsonpath={range .items[?(@.metadata.ownerReferences[0].name=="`+job+`")]}{.metadata.name} created {.metadata.creationTimestamp} active={.spec.active} `+
			`{range .status.conditions[*]}{.type}={.status}({.reason}) {end}{"\n"}{end}`)
	if err != nil {
		wls = "(unreadable: " + err.Error() + ")"
	}
	return fmt.Sprintf("the page says:\n%s\nproblems so far: %q\nthe job's workloads:\n%s", b.page(), b.Problems(func(string) bool { return false }), wls)
}

func (b *browser) text(sel string) string {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	Expect(err).NotTo(HaveOccurred(), "text of %s", sel)
	return s
}

func (b *browser) eval(expr string) bool {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	return err == nil && v
}

// screenshot saves the page as a PNG in bin/console-screenshots, and in docs/console when
// KILN_CONSOLE_SCREENSHOTS=docs (make console-screenshots), where docs/console.md shows them.
func (b *browser) screenshot(root, name string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	Expect(err).NotTo(HaveOccurred())
	dirs := []string{filepath.Join(root, "bin", "console-screenshots")}
	if os.Getenv("KILN_CONSOLE_SCREENSHOTS") == "docs" {
		dirs = append(dirs, filepath.Join(root, "docs", "console"))
	}
	for _, dir := range dirs {
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)).To(Succeed())
	}
}

// axeViolation is one of axe-core's findings.
type axeViolation struct {
	ID, Impact, Help string
	Nodes            []string
}

// accessibility runs axe-core (console/node_modules, from the lockfile) on the page and
// returns its serious and critical findings.
func (b *browser) accessibility(root string) []axeViolation {
	GinkgoHelper()
	src, err := os.ReadFile(filepath.Join(root, "console", "node_modules", "axe-core", "axe.min.js"))
	Expect(err).NotTo(HaveOccurred(), "axe-core is installed by make console (npm ci)")
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](string(src)+";true"))
	Expect(err).NotTo(HaveOccurred())
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document).then(r => JSON.stringify({Passes: r.passes.length,
		Violations: r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({ID: v.id, Impact: v.impact, Help: v.help,
			Nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))}))`, chromedp.EvalAwaitPromise))
	Expect(err).NotTo(HaveOccurred())
	var res struct {
		Passes     int
		Violations []axeViolation
	}
	Expect(json.Unmarshal([]byte(raw), &res)).To(Succeed())
	Expect(res.Passes).To(BeNumerically(">", 10), "axe-core checked the page (%d rules passed)", res.Passes)
	return res.Violations
}

var _ = Describe("The web console, in a real browser", Label(chartMode), func() {
	It("signs in, shows a job live, its page and its logs, suspends and resumes it, hides another team's jobs and refuses a bad token", func(ctx SpecContext) {
		root, cfgPath := os.Getenv("KILN_ROOT"), os.Getenv(clientconfig.EnvConfig)
		if root == "" || cfgPath == "" {
			Skip("KILN_ROOT and KILN_CONFIG are not set: not on the local platform")
		}
		cfg, err := clientconfig.Load(cfgPath)
		Expect(err).NotTo(HaveOccurred())
		kc, err := cfg.Resolve()
		Expect(err).NotTo(HaveOccurred())
		base := fmt.Sprintf("http://127.0.0.1:%d", platform.DefaultConfig(root).KilnAPIPort)
		b := newBrowser(ctx)

		By("refusing a bad token with the server's reason")
		b.do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"),
			click(`button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS(".login .error")))
		Expect(b.text(".login .error")).To(ContainSubstring("refused this token"))
		b.screenshot(root, "login")

		By("signing in with the demo user's token")
		b.do(chromedp.SetValue(chromedp.CSS("#token"), kc.Token),
			click(`button[type="submit"]`), chromedp.WaitVisible(chromedp.CSS(".jobs h1")))
		Eventually(func() string { return b.text(".jobs h1 .count") }).WithTimeout(20 * time.Second).ShouldNot(ContainSubstring("loading"))
		Expect(b.eval(`sessionStorage.getItem("kiln.token") !== null && !location.href.includes("kiln.token")`)).To(BeTrue(), "the token is in the session, not the URL")

		By("showing a job submitted through the CLI without a reload")
		name := fmt.Sprintf("console-%d", time.Now().UnixNano()%1_000_000)
		DeferCleanup(func(ctx context.Context) {
			_ = k8s.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: name}})
		})
		out, errOut, code := kilnCLI(simulatedJob(name, "300s", "team: console"), "submit", "-f", "-") // long enough to suspend and resume
		Expect(code).To(Equal(0), "%s%s", out, errOut)
		submitted := time.Now()
		row := fmt.Sprintf(`!!document.querySelector('a[href="#/jobs/%s"]')`, name)
		Eventually(func() bool { return b.eval(row) }).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(BeTrue())
		seen := time.Since(submitted)
		AddReportEntry("console: a submitted job shown after", seen.Round(time.Millisecond).String())
		Expect(seen).To(BeNumerically("<", 3*time.Second), "the watch shows a new job at once (the target is 1 s; %s here)", seen)
		Expect(b.eval(`location.hash === "" || location.hash === "#/"`)).To(BeTrue(), "no navigation happened")
		b.screenshot(root, "jobs")
		Expect(b.accessibility(root)).To(BeEmpty(), "axe-core on the jobs page")

		By("opening the job: its state, its steps and its logs")
		b.do(click(fmt.Sprintf(`a[href="#/jobs/%s"]`, name)), chromedp.WaitVisible(chromedp.CSS(".job h1")))
		Expect(b.text(".job h1")).To(ContainSubstring(name), "the page of the job clicked")
		Eventually(func() string { return b.text(".job .title .state") }).WithTimeout(60 * time.Second).Should(Equal("Running"))
		b.do(chromedp.WaitVisible(chromedp.CSS(`.log[aria-label="Logs"]`)))
		b.do(click(`[role="tab"][data-tab="pods"]`), chromedp.WaitVisible(chromedp.CSS("table.plain")))
		Expect(b.text("table.plain")).To(ContainSubstring("node"))
		if os.Getenv(platform.EnvInstall) != string(platform.InstallChart) {
			By("drawing its progress and its loss curve as its trainer reports")
			report := statusReporter(ctx, &platform.Platform{Config: platform.DefaultConfig(root), Out: GinkgoWriter}, kc.Namespace, name)
			for step := 1; step <= 6; step++ {
				report(step)
			}
			Eventually(func() bool { return b.eval(`document.querySelector(".progress progress")?.value === 6`) }).WithTimeout(15 * time.Second).Should(BeTrue())
			Eventually(func() bool {
				return b.eval(`Number(document.querySelector('.chart[data-metric="loss"]')?.dataset.points) >= 6`)
			}).WithTimeout(30*time.Second).Should(BeTrue(), "the loss chart holds the six reports")
			Expect(b.text(".progress")).To(ContainSubstring("step 6 of 100"))
		}
		b.screenshot(root, "job")
		Expect(b.accessibility(root)).To(BeEmpty(), "axe-core on the job's page")

		By("suspending it from the page: kiln get sees it")
		b.do(click(`button[data-action="suspend"]`), chromedp.WaitVisible(chromedp.CSS("dialog[open]")),
			click(`dialog[open] button[data-confirm]`))
		Eventually(func() string { out, _, _ := kilnCLI("", "get", name); return out }).WithTimeout(30*time.Second).
			Should(ContainSubstring("Suspended"), func() string { return b.why(kc.Namespace, name) })
		Eventually(func() string { return b.text(".job .title .state") }).WithTimeout(10 * time.Second).Should(Equal("Suspended"))

		By("resuming it from the page")
		b.do(click(`button[data-action="resume"]`), chromedp.WaitVisible(chromedp.CSS("dialog[open]")),
			click(`dialog[open] button[data-confirm]`))
		Eventually(func() string { out, _, _ := kilnCLI("", "get", name); return out }).WithTimeout(30*time.Second).
			ShouldNot(ContainSubstring("Suspended"), func() string { return b.why(kc.Namespace, name) })

		By("in the dark theme, and on a phone-width screen")
		b.do(click(`button[data-action="theme"]`))
		Eventually(func() bool { return b.eval(`document.documentElement.dataset.theme === "dark"`) }).Should(BeTrue())
		Expect(b.accessibility(root)).To(BeEmpty(), "axe-core in the dark theme")
		b.screenshot(root, "job-dark")
		b.do(chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/#/"), chromedp.WaitVisible(chromedp.CSS(".jobs h1")))
		Expect(b.eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`)).To(BeTrue(), "nothing wider than a phone's screen")
		b.screenshot(root, "jobs-phone")
		b.do(chromedp.EmulateViewport(1280, 800))

		By("running a schedule now from the page, and listing its runs")
		sched := name + "-weekly"
		DeferCleanup(func() { _, _, _ = kilnCLI("", "schedule", "delete", sched) })
		out, errOut, code = kilnCLI("", "schedule", "create", sched, "--schedule", "0 2 * * 0", "--time-zone", "Europe/Berlin",
			"--runtime", "torch-distributed", "--", "torchrun", "retrain.py")
		Expect(code).To(Equal(0), "%s%s", out, errOut)
		// The page lists the schedules again every 10 s; the API server's cache sees a new one a moment later.
		schedRow := fmt.Sprintf(`tr[data-schedule=%q]`, sched)
		b.do(chromedp.Navigate(base + "/#/schedules"))
		Eventually(func() bool { return b.eval(fmt.Sprintf(`!!document.querySelector(%q)`, schedRow)) }).
			WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(), "the schedule is listed")
		Expect(b.text(schedRow)).To(ContainSubstring("(Europe/Berlin)"), "its next run, in its time zone")
		b.do(click(schedRow+` button[data-action="trigger"]`), chromedp.WaitVisible(chromedp.CSS("dialog[open]")),
			click(`dialog[open] button[data-confirm]`), chromedp.WaitVisible(chromedp.CSS(".job h1")))
		Expect(b.text(".job h1")).To(HavePrefix(sched + "-m"))
		run := b.text(".job h1")
		b.do(chromedp.Navigate(base+"/#/schedules"), chromedp.WaitVisible(chromedp.CSS(schedRow+` button[aria-expanded]`)),
			click(schedRow+` button[aria-expanded]`), chromedp.WaitVisible(chromedp.CSS(`ul.runs`)))
		Expect(b.text("ul.runs")).To(ContainSubstring(run))

		By("not showing another team's jobs")
		other := newNamespace(ctx, "console-other")
		Expect(k8s.Create(ctx, torchJob(other, "not-yours", 1).Obj())).To(Succeed())
		b.do(chromedp.Navigate(base+"/#/"), chromedp.WaitVisible(chromedp.CSS(".jobs h1")),
			chromedp.SetValue(chromedp.CSS("#ns"), other), chromedp.SendKeys(chromedp.CSS("#ns"), kb.Enter))
		Eventually(func() string { return b.text(".jobs") }).WithTimeout(10 * time.Second).Should(ContainSubstring("may not list the jobs of namespace " + other))
		Expect(b.eval(`!document.querySelector('a[href="#/jobs/not-yours"]')`)).To(BeTrue())

		By("having logged no error and failed no request but the bad token's, and those the machine's network cut")
		// The real node's specs run beside this one: each pod's veth that comes up on this machine
		// gets an address, and Chromium aborts the requests in flight on any address change
		// (net::ERR_NETWORK_CHANGED). The page makes such calls again (the suspend and resume
		// above too); a user's laptop changing networks does the same to it.
		Expect(b.Problems(func(p string) bool {
			return strings.Contains(p, "ERR_NETWORK_CHANGED") ||
				strings.Contains(p, "401") && (strings.Contains(p, "GetServerInfo") || strings.Contains(p, "status of 401"))
		})).To(BeEmpty())
	})
})
