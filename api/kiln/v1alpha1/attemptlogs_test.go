package v1alpha1

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAttemptLogRoundTrip(t *testing.T) {
	cases := map[string]struct {
		log           string
		wantTruncated bool
	}{
		"short":               {log: "step 1\nSIGTERM: writing an emergency checkpoint\n"},
		"empty":               {log: ""},
		"over the kept bytes": {log: strings.Repeat("a line of training output\n", AttemptLogBytes/10), wantTruncated: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, truncated, err := EncodeAttemptLog([]byte(tc.log))
			if err != nil {
				t.Fatal(err)
			}
			if truncated != tc.wantTruncated {
				t.Errorf("truncated = %v, want %v", truncated, tc.wantTruncated)
			}
			if len(data) > AttemptLogBytes {
				t.Errorf("%d bytes gzipped: more than a ConfigMap holds", len(data))
			}
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelAttempt: "2"}, Annotations: map[string]string{AnnotationLogPod: "p", AnnotationLogCapturedAt: "2026-11-26T12:00:00Z"}},
				BinaryData: map[string][]byte{AttemptLogKey: data},
			}
			got, err := DecodeAttemptLog(cm)
			if err != nil {
				t.Fatal(err)
			}
			if got.Attempt != 2 || got.Pod != "p" || got.CapturedAt.IsZero() {
				t.Errorf("decoded %+v", got)
			}
			switch {
			case !tc.wantTruncated && string(got.Text) != tc.log:
				t.Errorf("text %q, want %q", got.Text, tc.log)
			case tc.wantTruncated && (len(got.Text) > AttemptLogBytes || !bytes.HasSuffix([]byte(tc.log), got.Text) || !bytes.HasPrefix(got.Text, []byte("a line"))):
				t.Errorf("kept %d bytes, not the log's last whole lines", len(got.Text))
			}
		})
	}
}

func TestAttemptLogName(t *testing.T) {
	if got, want := AttemptLogName("mnist-node-0-3-x7k2p"), "mnist-node-0-3-x7k2p-logs"; got != want {
		t.Errorf("AttemptLogName = %q, want %q", got, want)
	}
	if AttemptOf(map[string]string{LabelJobSetRestartAttempt: "4"}) != 4 || AttemptOf(nil) != 0 {
		t.Error("AttemptOf misreads the restart-attempt label")
	}
}
