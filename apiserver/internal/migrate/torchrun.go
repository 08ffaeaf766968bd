package migrate

import (
	"path"
	"slices"
	"strconv"
	"strings"
)

// torchrunFlags are the launcher flags whose values Kiln's torch runtime supplies through
// the PET_* environment (torchrun reads PET_<FLAG> for each flag not given): given on the
// command line they would override Kiln's, and point at the source's master.
var torchrunFlags = []string{"nnodes", "node_rank", "master_addr", "master_port", "nproc_per_node", "rdzv_endpoint", "rdzv_backend", "rdzv_id", "standalone"}

// valueless are the flags among them that take no value.
var valueless = map[string]bool{"standalone": true}

// launcher finds torchrun in argv: `torchrun ...`, or `python -m torch.distributed.run ...`
// (or the older torch.distributed.launch). It returns the index of the first argument after
// the launcher, or -1.
func launcher(argv []string) int {
	for i, a := range argv {
		if path.Base(a) == "torchrun" {
			return i + 1
		}
		if strings.HasPrefix(path.Base(a), "python") && i+2 < len(argv) && argv[i+1] == "-m" &&
			(argv[i+2] == "torch.distributed.run" || argv[i+2] == "torch.distributed.launch") {
			return i + 3
		}
	}
	return -1
}

// flagName is a torchrun flag's name with underscores (torchrun takes --nproc-per-node and
// --nproc_per_node alike), "" when a is not a flag.
func flagName(a string) (name, value string, hasValue bool) {
	if !strings.HasPrefix(a, "--") {
		return "", "", false
	}
	n := strings.TrimPrefix(a, "--")
	n, value, hasValue = strings.Cut(n, "=")
	return strings.ReplaceAll(n, "-", "_"), value, hasValue
}

// launch is what stripping the launcher flags found.
type launch struct {
	// found: argv runs torchrun.
	found bool
	// nprocPerNode is the --nproc_per_node value ("" when not given).
	nprocPerNode string
	// removed are the flags taken out, as given.
	removed []string
}

// stripTorchrunFlags removes the launcher flags Kiln sets from command and args (the
// launcher may be in either, its flags in either). Flags after the training script belong
// to the script and stay.
func stripTorchrunFlags(command, args []string) ([]string, []string, launch) {
	argv := append(append([]string{}, command...), args...)
	start := launcher(argv)
	var l launch
	if start < 0 {
		return command, args, l
	}
	l.found = true
	keep := make([]bool, len(argv))
	for i := range keep {
		keep[i] = true
	}
	for i := start; i < len(argv); i++ {
		name, value, hasValue := flagName(argv[i])
		if name == "" {
			if strings.HasPrefix(argv[i], "-") {
				continue // a short flag of torchrun's own
			}
			break // the script: what follows is its own
		}
		if !slices.Contains(torchrunFlags, name) {
			if !hasValue && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") && !looksLikeScript(argv[i+1]) {
				i++ // the flag's value
			}
			continue
		}
		keep[i] = false
		given := argv[i]
		if !hasValue && !valueless[name] && i+1 < len(argv) {
			value = argv[i+1]
			keep[i+1] = false
			given += " " + value
			i++
		}
		if name == "nproc_per_node" {
			l.nprocPerNode = value
		}
		l.removed = append(l.removed, given)
	}
	var newCommand, newArgs []string
	for i, a := range argv {
		if !keep[i] {
			continue
		}
		if i < len(command) {
			newCommand = append(newCommand, a)
		} else {
			newArgs = append(newArgs, a)
		}
	}
	return newCommand, newArgs, l
}

// looksLikeScript says whether a is the training program rather than a flag's value.
func looksLikeScript(a string) bool {
	return strings.HasSuffix(a, ".py") || strings.Contains(a, "/")
}

// runsShell says whether argv hands a script to a shell (sh -c '...'): flags inside the
// string are not parsed.
func runsShell(argv []string) bool {
	for i, a := range argv {
		if b := path.Base(a); (b == "sh" || b == "bash") && i+1 < len(argv) && strings.HasPrefix(argv[i+1], "-") && strings.Contains(argv[i+1], "c") {
			return true
		}
	}
	return false
}

// positiveInt parses a process count ("8"), false for auto, gpu, cpu and the like.
func positiveInt(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return 0, false
	}
	return int32(n), true
}
