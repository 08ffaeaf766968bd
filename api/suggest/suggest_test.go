package suggest

import "testing"

func TestClosest(t *testing.T) {
	runtimes := []string{"torch-distributed", "torch-distributed-spot", "deepspeed-distributed", "mpi-distributed", "jax-distributed", "xgboost-distributed"}
	queues := []string{"default", "gpu-a100", "team-nlp"}
	cases := map[string]struct {
		name       string
		candidates []string
		want       string
	}{
		"one letter swapped":         {"troch-distributed", runtimes, "torch-distributed"},
		"one letter missing":         {"torch-distribted", runtimes, "torch-distributed"},
		"one letter extra":           {"torch-distributedd", runtimes, "torch-distributed"},
		"case":                       {"Torch-Distributed", runtimes, "torch-distributed"},
		"prefix":                     {"torch", runtimes, "torch-distributed"},
		"typo beats prefix":          {"torch-distributed-spt", runtimes, "torch-distributed-spot"},
		"nothing near":               {"gpu-queue", queues, ""},
		"queue typo":                 {"defaults", queues, "default"},
		"short names need one match": {"ab", []string{"cd"}, ""},
		"empty name":                 {"", queues, ""},
		"no candidates":              {"default", nil, ""},
		"the name itself is skipped": {"default", []string{"default"}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Closest(tc.name, tc.candidates); got != tc.want {
				t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

func TestDidYouMean(t *testing.T) {
	if got, want := DidYouMean("defaults", []string{"default"}), ` (did you mean "default"?)`; got != want {
		t.Errorf("DidYouMean = %q, want %q", got, want)
	}
	if got := DidYouMean("zzz", []string{"default"}); got != "" {
		t.Errorf("DidYouMean = %q, want nothing", got)
	}
}

func TestList(t *testing.T) {
	cases := map[string]struct {
		in   []string
		most int
		want string
	}{
		"none":      {nil, 5, "none"},
		"sorted":    {[]string{"b", "a"}, 5, `"a", "b"`},
		"and more":  {[]string{"d", "c", "b", "a"}, 2, `"a", "b" and 2 more`},
		"compacted": {[]string{"a", "a"}, 5, `"a"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := List(tc.in, tc.most); got != tc.want {
				t.Errorf("List = %q, want %q", got, tc.want)
			}
		})
	}
}
